package stream

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/metrics"
)

// Defaults of Config, the seed's values where the seed has one. A zero field of Config means
// its default.
const (
	defaultReadCount        = 10                     // entries per XREADGROUP
	defaultBlockTimeout     = 2 * time.Second        // XREADGROUP BLOCK
	defaultMaxDeliveries    = 3                      // deliveries per entry, the first one included
	defaultMinIdle          = 60 * time.Second       // idle time before another consumer takes a pending entry over
	defaultRetryBackoff     = time.Second            // first redelivery of an own failed entry (default retry policy)
	defaultClaimInterval    = 5 * time.Second        // longest period of the pending-entry scan
	defaultTrimMaxLen       = 100000                 // entries kept by trimming
	defaultTrimInterval     = 60 * time.Second       // period of trimming
	defaultDeadLetterMaxLen = 100000                 // entries kept in a dead-letter stream
	defaultConcurrency      = 1                      // handler goroutines per handler
	defaultShutdownTimeout  = 5 * time.Second        // how long Close and Run drain in-flight handlers
	defaultConsumerTimeout  = 10 * time.Minute       // idle time after which an empty consumer is removed from its group
	configSection           = "redis-stream"         // the YAML section
	maxReadCount            = 10000                  // largest ReadCount Validate accepts
	maxConcurrency          = 10000                  // largest Handler.Concurrency Register accepts
	maxMaxDeliveries        = 1000000                // largest MaxDeliveries accepted
	maxDuration             = 30 * 24 * time.Hour    // largest duration setting accepted (block timeout: maxBlockTimeout)
	maxBlockTimeout         = time.Hour              // largest BlockTimeout accepted
	minMinIdle              = 10 * time.Millisecond  // smallest non-zero Autoclaim.MinIdle accepted
	minInterval             = 10 * time.Millisecond  // smallest non-zero scan or trim interval accepted
	minConsumerTimeout      = time.Second            // smallest positive ConsumerTimeout accepted
	defaultPartitionLease   = 10 * time.Second       // time to live of partition leases (Handler.OwnPartitions)
	minPartitionLease       = 100 * time.Millisecond // smallest non-zero PartitionLease accepted
	minDurationSetting      = time.Millisecond       // smallest non-zero duration of any other setting
	minLeasePeriod          = 5 * time.Millisecond   // floor of the lease refresh period
	maxLeasePeriod          = 10 * time.Second       // ceiling of the lease refresh period
)

// TrimMode selects how the consumer trims its topics' streams.
type TrimMode string

const (
	// TrimSafe, the default (also selected by ""), keeps every entry some consumer group has
	// not yet received and acknowledged, even when the stream then stays above Trim.MaxLen.
	// On Redis 8.2 and later it uses XTRIM ... ACKED; before, a script trims by MINID below
	// the oldest pending entry and the slowest group's last-delivered id.
	TrimSafe TrimMode = "safe"
	// TrimMaxLen is the seed's exact XTRIM MAXLEN: the newest Trim.MaxLen entries are kept,
	// whether or not they were consumed. A backlog longer than MaxLen loses its oldest
	// unconsumed entries; deleted pending entries are reported through
	// Config.OnTrimmedWhilePending, entries never delivered are gone without a trace.
	TrimMaxLen TrimMode = "maxlen"
	// TrimOff disables trimming.
	TrimOff TrimMode = "off"
)

// Config configures producers, consumers, trimming and dead letters. The zero value is the
// default configuration; every field's zero means its default, as each field states and
// WithDefaults applies. Durations are
// time.Duration; their YAML keys keep the seed's milliseconds (`block-ms: 2000`), as the
// `unit:"ms"` tags say. Sub-millisecond parts of a duration are ignored (Redis counts
// milliseconds). Every field carries a `yaml` tag (`yaml:"-"` for the Go-only hooks), so a
// generic binder can read the seed's `redis-stream` section into it.
type Config struct {
	// EnvIsolation appends "_" + Env to every stream name (when Env is non-empty), so that
	// several environments can share one Redis. Producers and consumers must agree.
	EnvIsolation bool `yaml:"env-isolation"`
	// Env is the environment suffix used under EnvIsolation.
	Env string `yaml:"env"`
	// Partitions maps a topic (before env isolation) to its number of partitions, 0 to 1024. A
	// topic absent or mapped to 0 or 1 is one stream (its name, see WIRE.md); a topic of P > 1
	// partitions is P streams with hash tags of their own (PartitionStreams), spread over a
	// cluster's slots. The producer writes a message to the partition of its key (FNV-1a of
	// the key, stream/WIRE.md) and a consumer reads every partition of its topics. Producers
	// and consumers of a topic must agree on its count; changing it moves keys to other
	// partitions (drain the topic first). In YAML, `partitions:` with one `topic: count` entry
	// per topic (a topic whose name holds a '.' cannot be written there: YAML keys with dots
	// are paths).
	Partitions map[string]int `yaml:"partitions"`
	// Priorities maps a topic (before env isolation) to its number of priority levels, 0 to
	// 16. A topic of L > 1 levels is L streams in the topic's hash slot: level 0 is the
	// topic's own stream (where a message sent without WithPriority goes, as every other
	// producer writes it), level p > 0 the stream "{<topic>}:prio:<p>" (WIRE.md). A producer
	// writes a message to the level WithPriority names; a consumer's handler of the topic
	// reads every level and hands its messages to Handle by the levels' weights
	// (Handler.PriorityWeights) or strictly (Handler.StrictPriority). A topic cannot be both
	// partitioned and prioritised. Producers and consumers of a topic must agree. In YAML,
	// `priorities:` with one `topic: levels` entry per topic.
	Priorities map[string]int `yaml:"priorities"`
	// PartitionLease is the time to live of a partition lease and of a member's heartbeat
	// when handlers own partitions (Handler.OwnPartitions): a consumer that stops renewing
	// (killed, cut off) loses its partitions to the others after this long, and stops
	// handling them itself after half of it. Renewed every fifth of it. Default 10 s; 100
	// ms to 1 hour.
	PartitionLease time.Duration `yaml:"partition-lease-ms" unit:"ms"`
	// ConsumerName is this consumer's name in its groups. Empty or only white space (the
	// default) generates a name unique to the Consumer value, as the seed does for a blank
	// name; a fixed name shared by several processes makes them one consumer and breaks load
	// balancing, so set it only for a single instance. A name with white space at either
	// end or a control character is rejected.
	ConsumerName string `yaml:"consumer-name"`
	// ReadCount is the most entries one XREADGROUP returns, 1 to 10,000. Default 10.
	// It also bounds the read-ahead: a handler holds at most Concurrency + ReadCount entries
	// (running or queued), and reads only as many as that leaves room for.
	ReadCount int `yaml:"read-count"`
	// BlockTimeout is how long one XREADGROUP waits for new entries (1 ms to
	// 1 hour). Default 2 s. Close and Pause interrupt a read in progress.
	BlockTimeout time.Duration `yaml:"block-ms" unit:"ms"`
	// MaxDeliveries is the most deliveries of one entry, the first one included, after which
	// a failing entry is dead-lettered (YAML max-retry, the seed's name). Default 3. A
	// handler's MaxDeliveries, or the MaxDeliveries of its RetryPolicy, overrides it: see
	// Handler.MaxDeliveries for the rule when they disagree.
	MaxDeliveries int `yaml:"max-retry"`
	// RetryBackoff is the backoff of the default retry policy (a handler without
	// RetryPolicy): an entry whose handler failed is delivered again RetryBackoff after its
	// first failure, and each later wait doubles, up to Autoclaim.MinIdle. Default 1 s, so a
	// failing handler is retried within about a second; the seed retries only after
	// autoclaim.min-idle-ms, which a value equal to Autoclaim.MinIdle restores. Crash
	// recovery (entries of a consumer that is gone) still waits for Autoclaim.MinIdle. 1 ms
	// to 30 days.
	RetryBackoff time.Duration `yaml:"retry-backoff-ms" unit:"ms"`
	// HandlerTimeout is the default Handler.Timeout: the longest one Handle call may run
	// before its context is cancelled and the delivery counts as failed. Default 0: no
	// timeout.
	HandlerTimeout time.Duration `yaml:"handler-timeout-ms" unit:"ms"`
	// ShutdownTimeout is how long Close and Run let in-flight handlers finish before
	// cancelling their context (Close also stops at its own context's end). Default 5 s.
	ShutdownTimeout time.Duration `yaml:"shutdown-timeout-ms" unit:"ms"`
	// ConsumerTimeout is how long a consumer of one of this Consumer's groups may stay idle,
	// with an empty pending list, before this Consumer deletes it from the group (a name
	// left by a process that crashed). A consumer that owns pending entries is never
	// deleted. Default 10 minutes (or three times BlockTimeout if that is longer); at least
	// 1 s and more than twice BlockTimeout; negative disables the removal.
	ConsumerTimeout time.Duration `yaml:"consumer-timeout-ms" unit:"ms"`
	// Autoclaim configures the re-claiming of pending entries (retries, crash recovery).
	Autoclaim AutoclaimConfig `yaml:"autoclaim"`
	// Trim configures the periodic trimming of the consumed topics' streams.
	Trim TrimConfig `yaml:"trim"`
	// DeadLetter bounds the dead-letter streams.
	DeadLetter DeadLetterConfig `yaml:"dead-letter"`
	// Delay configures the moving of delayed messages (WithDelay, WithDeliverAt) into the
	// consumed topics.
	Delay DelayConfig `yaml:"delay"`
	// SendTimeout is the producer's deadline for one send (Producer.Send, SendBatch, a
	// delayed send): a send returns within it, or by its context's deadline if that is
	// earlier, even when Redis hangs (the message may then have been written: see
	// ErrOutcomeUnknown). It also bounds a context without deadline. Default 2 s; 1 ms
	// to 1 hour.
	SendTimeout time.Duration `yaml:"send-timeout-ms" unit:"ms"`
	// DisableHistory stops the consumer from recording the per-minute history of its topics
	// (entries handled, failures, retries and dead letters per group), which the console
	// draws: one pipelined call per handler at most once a second, into a small hash per
	// topic and minute that expires after 25 hours. Default false: recorded.
	DisableHistory bool `yaml:"disable-history"`

	// Logger receives the consumer's log records. Nil means slog.Default(). Levels: Warn
	// when background work starts failing (reads, acknowledgements, scans, leases,
	// dead-letter writes, housekeeping) and Info when it recovers, once per change of state,
	// never per attempt; Warn for configuration conflicts; Info for start, stop and
	// consumers removed from a group; Debug for retries scheduled.
	Logger *slog.Logger `yaml:"-"`
	// Metrics is the set the package's metrics are registered in. Nil means
	// metrics.Stream (registered with VictoriaMetrics' default registry).
	Metrics *metrics.Set `yaml:"-"`
	// OnTrimmedWhilePending, if set, is called with the ids of pending entries that were
	// deleted from the stream before being acknowledged (by trimming, XDEL or MAXLEN on
	// write) when a scan finds them. They are also counted in
	// redis_streaming_mq_trimmed_while_pending_total. It may be called concurrently and must
	// not block for long.
	OnTrimmedWhilePending func(topic, group string, ids []string) `yaml:"-"`
	// OnError, if set, receives errors of the consumer's background work (a failed read, ack,
	// scan or trim) that the consumer retries by itself. It may be called concurrently and
	// must not block for long.
	OnError func(err error) `yaml:"-"`
}

// AutoclaimConfig configures the pending-entry scan.
type AutoclaimConfig struct {
	// MinIdle is how long a pending entry must have been idle before a consumer other than
	// its owner takes it over (crash recovery), and the longest backoff of the default retry
	// policy (see Config.RetryBackoff).
	// Entries a live consumer holds are never idle that long: it refreshes them every
	// MinIdle/3 (bounded to 5 ms..10 s). Default 60 s; at least 10 ms.
	MinIdle time.Duration `yaml:"min-idle-ms" unit:"ms"`
	// Interval is the longest period of the pending-entry scan; a consumer scans earlier
	// when one of its own failed entries reaches the end of its backoff. Default 5 s; at
	// least 10 ms.
	Interval time.Duration `yaml:"interval-ms" unit:"ms"`
}

// TrimConfig configures trimming.
type TrimConfig struct {
	// MaxLen is the number of entries trimming keeps (a soft bound: streams grow between two
	// trims, and TrimSafe keeps unacknowledged entries beyond it). Default 100000.
	MaxLen int64 `yaml:"maxlen"`
	// Interval is the period of trimming. Default 60 s; at least 10 ms.
	Interval time.Duration `yaml:"interval-ms" unit:"ms"`
	// MaxAge also trims entries older than this (by the time in their ids and the Redis
	// server's clock: XTRIM MINID), whatever the length; TrimSafe still keeps the entries
	// some group has not received and acknowledged. Default 0: no age bound.
	MaxAge time.Duration `yaml:"max-age-ms" unit:"ms"`
	// Mode is TrimSafe (the default, also ""), TrimMaxLen or TrimOff.
	Mode TrimMode `yaml:"mode"`
}

// DeadLetterConfig bounds every dead-letter stream. Bounds are applied when a dead letter is
// written; dead letters dropped by them are counted in
// redis_streaming_dlq_trimmed_total.
type DeadLetterConfig struct {
	// MaxLen is the most entries kept per dead-letter stream; the oldest go first. Default
	// 100000; a negative value means unbounded.
	MaxLen int64 `yaml:"maxlen"`
	// MaxAge drops dead letters older than this. Default 0: no age bound.
	MaxAge time.Duration `yaml:"max-age-ms" unit:"ms"`
}

// DelayConfig configures the mover each running handler runs for its topic: it moves the
// topic's scheduled messages into the stream when they are due.
type DelayConfig struct {
	// PollInterval is the longest time between two looks at the topic's schedule: the mover
	// also wakes at the due time of the earliest message it saw, so a message scheduled
	// further ahead than PollInterval arrives within a few ms of its due time, one scheduled
	// closer within PollInterval of it. Each look is one short script call. Default 100 ms; at
	// least 10 ms.
	PollInterval time.Duration `yaml:"poll-interval-ms" unit:"ms"`
	// Disabled turns the mover off in this Consumer (its topics get no delayed messages
	// unless another Consumer of them runs one). Default false.
	Disabled bool `yaml:"disabled"`
}

// WithDefaults returns c with every zero field replaced by its default (the seed's values, the
// safe trim mode, slog.Default() and the metrics.Stream set). Constructors apply it; call it
// to see the values a Config will run with.
func (c Config) WithDefaults() Config {
	if c.ReadCount == 0 {
		c.ReadCount = defaultReadCount
	}
	if c.BlockTimeout == 0 {
		c.BlockTimeout = defaultBlockTimeout
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = defaultMaxDeliveries
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = defaultShutdownTimeout
	}
	if c.ConsumerTimeout == 0 {
		// The default must stay valid for any valid BlockTimeout: a consumer blocked in a
		// read looks idle to the server for up to BlockTimeout.
		c.ConsumerTimeout = max(defaultConsumerTimeout, 3*c.BlockTimeout)
	}
	if c.Autoclaim.MinIdle == 0 {
		c.Autoclaim.MinIdle = defaultMinIdle
	}
	if c.Autoclaim.Interval == 0 {
		c.Autoclaim.Interval = defaultClaimInterval
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = defaultRetryBackoff
	}
	if c.Trim.MaxLen == 0 {
		c.Trim.MaxLen = defaultTrimMaxLen
	}
	if c.Trim.Interval == 0 {
		c.Trim.Interval = defaultTrimInterval
	}
	if c.Trim.Mode == "" {
		c.Trim.Mode = TrimSafe
	}
	if c.DeadLetter.MaxLen == 0 {
		c.DeadLetter.MaxLen = defaultDeadLetterMaxLen
	}
	if c.Delay.PollInterval == 0 {
		c.Delay.PollInterval = defaultDelayPollInterval
	}
	if c.PartitionLease == 0 {
		c.PartitionLease = defaultPartitionLease
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = defaultSendTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Stream
	}
	return c
}

// Validate reports the first invalid field of c, naming its key path in the YAML section
// (for example "redis-stream.read-count"). It rejects every value that would overflow,
// panic or make no sense: negative counts and durations, counts above the bounds their
// fields state, non-zero durations under a millisecond (or under the floor their fields
// state), durations above 30 days (1 hour for BlockTimeout, ShutdownTimeout, SendTimeout,
// PartitionLease and Delay.PollInterval), a ConsumerTimeout shorter than twice
// BlockTimeout, an unknown trim mode. The error wraps redstream.ErrInvalidConfig.
func (c Config) Validate() error {
	return c.validate(configSection)
}

func (c Config) validate(prefix string) error {
	bad := func(key string, v any, want string) error {
		return cfgErr(prefix+"."+key, "got %v, want %s", v, want)
	}
	count := func(key string, v, hi int64, def int) error {
		switch {
		case v < 0:
			return bad(key, v, fmt.Sprintf("a positive count (0 for the default %d)", def))
		case v > hi:
			return bad(key, v, fmt.Sprintf("at most %d", hi))
		}
		return nil
	}
	dur := func(key string, d, lo, hi time.Duration) error {
		switch {
		case d < 0:
			return bad(key, fmtMs(d), "a positive number of milliseconds")
		case d != 0 && (d < lo || d > hi):
			return bad(key, fmtMs(d), fmt.Sprintf("0 (the default) or %s to %s milliseconds", fmtMs(lo), fmtMs(hi)))
		}
		return nil
	}
	if n := c.ConsumerName; strings.TrimSpace(n) != "" && (strings.TrimSpace(n) != n || strings.ContainsFunc(n, unicode.IsControl)) {
		return bad("consumer-name", strconv.Quote(n), "a name without white space at either end or control characters (or empty: a unique name)")
	}
	if err := count("read-count", int64(c.ReadCount), maxReadCount, defaultReadCount); err != nil {
		return err
	}
	if err := count("max-retry", int64(c.MaxDeliveries), maxMaxDeliveries, defaultMaxDeliveries); err != nil {
		return err
	}
	if c.Trim.MaxLen < 0 {
		return bad("trim.maxlen", c.Trim.MaxLen, "a positive count (0 for the default 100000)")
	}
	if c.Trim.MaxAge < 0 {
		return bad("trim.max-age-ms", fmtMs(c.Trim.MaxAge), "a non-negative number of milliseconds")
	}
	if c.DeadLetter.MaxAge < 0 {
		return bad("dead-letter.max-age-ms", fmtMs(c.DeadLetter.MaxAge), "a non-negative number of milliseconds")
	}
	for _, d := range []struct {
		key    string
		v      time.Duration
		lo, hi time.Duration
	}{
		{"block-ms", c.BlockTimeout, minDurationSetting, maxBlockTimeout},
		{"handler-timeout-ms", c.HandlerTimeout, minDurationSetting, maxDuration},
		{"retry-backoff-ms", c.RetryBackoff, minDurationSetting, maxDuration},
		{"shutdown-timeout-ms", c.ShutdownTimeout, minDurationSetting, maxBlockTimeout},
		{"autoclaim.min-idle-ms", c.Autoclaim.MinIdle, minMinIdle, maxDuration},
		{"autoclaim.interval-ms", c.Autoclaim.Interval, minInterval, maxDuration},
		{"trim.interval-ms", c.Trim.Interval, minInterval, maxDuration},
		{"delay.poll-interval-ms", c.Delay.PollInterval, minInterval, maxBlockTimeout},
		{"partition-lease-ms", c.PartitionLease, minPartitionLease, maxBlockTimeout},
		{"send-timeout-ms", c.SendTimeout, minDurationSetting, maxBlockTimeout},
		{"dead-letter.max-age-ms", c.DeadLetter.MaxAge, minDurationSetting, 100 * 365 * 24 * time.Hour},
		{"trim.max-age-ms", c.Trim.MaxAge, minDurationSetting, 100 * 365 * 24 * time.Hour},
	} {
		if err := dur(d.key, d.v, d.lo, d.hi); err != nil {
			return err
		}
	}
	if c.ConsumerTimeout > 0 {
		block := c.BlockTimeout
		if block == 0 {
			block = defaultBlockTimeout
		}
		if err := dur("consumer-timeout-ms", c.ConsumerTimeout, max(minConsumerTimeout, 2*block+time.Millisecond), maxDuration); err != nil {
			return err
		}
	}
	return c.validateNames(bad)
}

// validateNames is validate for the trim mode, the env and the partitioned topics; bad
// builds validate's errors.
func (c Config) validateNames(bad func(key string, v any, want string) error) error {
	switch c.Trim.Mode {
	case "", TrimSafe, TrimMaxLen, TrimOff:
	default:
		return bad("trim.mode", strconv.Quote(string(c.Trim.Mode)), `"safe", "maxlen" or "off"`)
	}
	if c.EnvIsolation && strings.IndexByte(c.Env, '}') >= 0 {
		return bad("env", strconv.Quote(c.Env), "no '}'")
	}
	for _, topic := range slices.Sorted(maps.Keys(c.Priorities)) {
		key := "priorities." + topic
		n := c.Priorities[topic]
		if n < 0 || n > streamwire.MaxPriorities {
			return bad(key, n, fmt.Sprintf("0 to %d (0 or 1: one level)", streamwire.MaxPriorities))
		}
		if err := checkName("topic", topic); err != nil {
			return bad(key, strconv.Quote(topic), "a valid topic name")
		}
		if n > 1 && c.Partitions[topic] > 1 {
			return bad(key, n, "0 or 1 for a partitioned topic (a topic is partitioned or prioritised, not both)")
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(c.Partitions)) {
		key := "partitions." + topic
		n := c.Partitions[topic]
		if n < 0 || n > streamwire.MaxPartitions {
			return bad(key, n, fmt.Sprintf("0 to %d (0 or 1: one stream)", streamwire.MaxPartitions))
		}
		if err := checkName("topic", topic); err != nil {
			return bad(key, strconv.Quote(topic), "a valid topic name")
		}
		if _, tagged := hashTag(topic); tagged && n > 1 {
			return bad(key, strconv.Quote(topic), "a topic without a {hash tag} (a tag would pin every partition to one slot)")
		}
	}
	return nil
}

// fmtMs formats d as a number of milliseconds, as the YAML keys write it ("1500"); a
// duration with a sub-millisecond part is written as time.Duration does ("1.5ms").
func fmtMs(d time.Duration) string {
	if d%time.Millisecond != 0 {
		return d.String()
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// ConfigError is a configuration error naming its key path. It matches
// redstream.ErrInvalidConfig under errors.Is.
type ConfigError struct {
	Path string // key path, e.g. "redis-stream.autoclaim.min-idle-ms"
	Msg  string
}

// Error returns "stream: <path>: <msg>".
// An error without a path (a bad constructor argument) is "stream: <msg>".
func (e *ConfigError) Error() string {
	if e.Path == "" {
		return "stream: " + e.Msg
	}
	return "stream: " + e.Path + ": " + e.Msg
}

// Unwrap returns redstream.ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return redstream.ErrInvalidConfig }

func cfgErr(path, format string, args ...any) error {
	return &ConfigError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// errInvalid wraps redstream.ErrInvalidConfig with the package prefix.
func errInvalid(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}
