package stream

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redstream-go/redstream/core"
)

// DeliveryRetryPolicy decides how often a failing entry is delivered and how long it waits
// between deliveries. A handler error with retry leaves the entry pending; the consumer that
// failed it delivers it again NextBackoff(its delivery count) after the failure, until
// MaxDeliveries deliveries have failed: then it is dead-lettered. If that consumer is gone,
// another one takes the entry over once it has been idle for max(Autoclaim.MinIdle,
// NextBackoff).
// Implementations must be safe for concurrent use.
type DeliveryRetryPolicy interface {
	// MaxDeliveries is the most deliveries of one entry, the first one included (>= 1).
	MaxDeliveries() int
	// NextBackoff is how long an entry delivered deliveryCount times (>= 1) must stay idle
	// before it is delivered again. Results are clamped to 1 ms..MaxDuration. It is evaluated
	// at each failure (and on every crash-recovery scan), so a jittered policy draws anew
	// each time.
	NextBackoff(deliveryCount int64) time.Duration
}

// FixedRetryPolicy delivers an entry at most Max times, Backoff apart. With Backoff equal to
// Autoclaim.MinIdle it is the seed's behaviour (max-retry deliveries, autoclaim.min-idle-ms
// apart).
type FixedRetryPolicy struct {
	Max     int           // most deliveries, the first included; < 1 means 1
	Backoff time.Duration // idle time before each redelivery
}

// MaxDeliveries returns p.Max, at least 1.
func (p FixedRetryPolicy) MaxDeliveries() int { return max(p.Max, 1) }

// NextBackoff returns p.Backoff.
func (p FixedRetryPolicy) NextBackoff(int64) time.Duration { return p.Backoff }

// ExponentialRetryPolicy delivers an entry at most Max times, waiting Backoff.Delay(n) after
// the n-th delivery: core.Backoff's exponential delay (microseconds), with its jitter mode
// drawn from math/rand/v2.
type ExponentialRetryPolicy struct {
	Max     int
	Backoff core.Backoff
}

// NewExponentialRetryPolicy returns a policy of maxDeliveries deliveries whose backoff starts
// at initial and grows by multiplier up to maxDelay. It returns an error for maxDeliveries <
// 1 or for parameters core.NewBackoff rejects.
func NewExponentialRetryPolicy(maxDeliveries int, initial, maxDelay time.Duration, multiplier float64, jitter core.Jitter) (ExponentialRetryPolicy, error) {
	if maxDeliveries < 1 {
		return ExponentialRetryPolicy{}, errInvalid("max deliveries %d: want >= 1", maxDeliveries)
	}
	b, err := core.NewBackoff(initial.Microseconds(), maxDelay.Microseconds(), multiplier, jitter)
	if err != nil {
		return ExponentialRetryPolicy{}, fmt.Errorf("stream: retry policy: %w", err)
	}
	return ExponentialRetryPolicy{Max: maxDeliveries, Backoff: b}, nil
}

// MaxDeliveries returns p.Max, at least 1.
func (p ExponentialRetryPolicy) MaxDeliveries() int { return max(p.Max, 1) }

// NextBackoff returns the backoff after delivery number deliveryCount.
func (p ExponentialRetryPolicy) NextBackoff(deliveryCount int64) time.Duration {
	d := p.Backoff.Delay(deliveryCount, 0, func(n int64) int64 { return rand.Int64N(n) })
	return time.Duration(d) * time.Microsecond
}

// ErrMaxRetryExceeded matches (errors.Is) the error OnFailure receives when an entry is
// dead-lettered because it reached its max deliveries.
var ErrMaxRetryExceeded = errors.New("stream: max retry exceeded")

// maxRetryError is the error OnFailure receives for an entry dead-lettered after its last
// allowed delivery failed (or after its consumer vanished while handling it).
type maxRetryError struct {
	Deliveries int64 // deliveries so far
	Max        int   // the handler's max deliveries
	Err        error // the last handler error; nil when the last delivery's outcome is unknown
}

// Error says "stream: max retry exceeded", the counts, and the last error if known.
func (e *maxRetryError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("stream: max retry exceeded: delivered %d times (max %d); the last delivery was not acknowledged", e.Deliveries, e.Max)
	}
	return fmt.Sprintf("stream: max retry exceeded: delivered %d times (max %d): %v", e.Deliveries, e.Max, e.Err)
}

// Is reports whether target is ErrMaxRetryExceeded.
func (e *maxRetryError) Is(target error) bool { return target == ErrMaxRetryExceeded }

// Unwrap returns the last handler error.
func (e *maxRetryError) Unwrap() error { return e.Err }

// Permanent marks err as not worth retrying: a handler returning it has its message
// dead-lettered at once, as if the handler had NoRetry set. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// isPermanent reports whether err was marked by Permanent.
func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// defaultRetryPolicy is the policy of a handler without RetryPolicy: cfg.MaxDeliveries
// deliveries, the first redelivery cfg.RetryBackoff after a failure, each later wait twice
// the one before, up to cfg.Autoclaim.MinIdle (cfg has its defaults).
func defaultRetryPolicy(cfg Config) DeliveryRetryPolicy {
	first := min(cfg.RetryBackoff, cfg.Autoclaim.MinIdle)
	if first >= cfg.Autoclaim.MinIdle {
		return FixedRetryPolicy{Max: cfg.MaxDeliveries, Backoff: cfg.Autoclaim.MinIdle}
	}
	return doublingPolicy{max: cfg.MaxDeliveries, first: first, ceiling: cfg.Autoclaim.MinIdle}
}

// doublingPolicy waits first after the first delivery and twice as long after each later
// one, up to ceiling, without jitter.
type doublingPolicy struct {
	max            int
	first, ceiling time.Duration
}

func (p doublingPolicy) MaxDeliveries() int { return max(p.max, 1) }

func (p doublingPolicy) NextBackoff(deliveryCount int64) time.Duration {
	d := p.first
	for i := int64(1); i < deliveryCount && d < p.ceiling; i++ {
		d *= 2
	}
	return min(d, p.ceiling)
}
