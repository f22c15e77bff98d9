package stream

// Defaults, bounds and helpers the package keeps unexported, under the names the external
// tests use.
const (
	DefaultMaxDeliveries     = defaultMaxDeliveries
	DefaultMinIdle           = defaultMinIdle
	DefaultClaimInterval     = defaultClaimInterval
	DefaultConsumerTimeout   = defaultConsumerTimeout
	DefaultDelayPollInterval = defaultDelayPollInterval
	DefaultSendTimeout       = defaultSendTimeout
	MaxBlockTimeout          = maxBlockTimeout
	MaxDuration              = maxDuration
	MaxDelay                 = maxDelay
	IdempotencyTTL           = idempotencyTTL
	MaxIdempotencyKeyLen     = maxIdempotencyKeyLen
)

// MaxRetryError is the type of the error OnFailure receives for an entry dead-lettered
// after its last delivery.
type MaxRetryError = maxRetryError

// IsPermanent is isPermanent.
func IsPermanent(err error) bool { return isPermanent(err) }

// Buffered returns the number of records s holds for its next Checkpoint.
func Buffered(s *CheckpointedListSink) int { return s.buffered() }
