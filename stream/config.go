package stream

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
)

// Defaults of Config, the seed's values. A zero field of Config means its default.
const (
	DefaultReadCount        = 10     // entries per XREADGROUP
	DefaultBlockMs          = 2000   // XREADGROUP BLOCK, milliseconds
	DefaultMaxRetry         = 3      // deliveries per entry, the first one included
	DefaultMinIdleMs        = 60000  // idle time before a pending entry is re-claimed, ms
	DefaultClaimIntervalMs  = 30000  // period of the pending-entry scan, ms
	DefaultTrimMaxLen       = 100000 // entries kept by trimming
	DefaultTrimIntervalMs   = 60000  // period of trimming, ms
	DefaultDeadLetterMaxLen = 100000 // entries kept in a dead-letter stream
	DefaultConcurrency      = 1      // handler goroutines per handler
	ConfigSection           = "redis-stream"
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
// default configuration (the seed's defaults); every numeric field's zero means its Default*
// constant. Its YAML form is the seed's `redis-stream` section, read by [LoadConfig] and
// [ConfigFromNode].
type Config struct {
	// EnvIsolation appends "_" + Env to every stream name (when Env is non-empty), so that
	// several environments can share one Redis. Producers and consumers must agree.
	EnvIsolation bool `yaml:"env-isolation"`
	// Env is the environment suffix used under EnvIsolation.
	Env string `yaml:"env"`
	// ConsumerName is this consumer's name in its groups. Empty (the default) generates a
	// name unique to the Consumer value; a fixed name shared by several processes makes them
	// one consumer and breaks load balancing, so set it only for a single instance.
	ConsumerName string `yaml:"consumer-name"`
	// ReadCount is the most entries one XREADGROUP returns. Default 10.
	ReadCount int `yaml:"read-count"`
	// BlockMs is how long one XREADGROUP waits for new entries, in milliseconds. Default
	// 2000. It also bounds how long Consumer.Close waits for a read in progress.
	BlockMs int64 `yaml:"block-ms"`
	// MaxRetry is the most deliveries of one entry, the first one included, after which a
	// failing entry is dead-lettered. Default 3. A handler may override it.
	MaxRetry int `yaml:"max-retry"`
	// Autoclaim configures the re-claiming of pending entries (retries, crash recovery).
	Autoclaim AutoclaimConfig `yaml:"autoclaim"`
	// Trim configures the periodic trimming of the consumed topics' streams.
	Trim TrimConfig `yaml:"trim"`
	// DeadLetter bounds the dead-letter streams.
	DeadLetter DeadLetterConfig `yaml:"dead-letter"`

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
	// MinIdleMs is how long a pending entry must have been idle (since its last delivery)
	// before it is delivered again, in milliseconds: the backoff of the default retry
	// policy. Default 60000. Too small competes with slow handlers; too large recovers slowly.
	MinIdleMs int64 `yaml:"min-idle-ms"`
	// IntervalMs is the period of the scan, in milliseconds. Default 30000.
	IntervalMs int64 `yaml:"interval-ms"`
}

// TrimConfig configures trimming.
type TrimConfig struct {
	// MaxLen is the number of entries trimming keeps (a soft bound: streams grow between two
	// trims, and TrimSafe keeps unacknowledged entries beyond it). Default 100000.
	MaxLen int64 `yaml:"maxlen"`
	// IntervalMs is the period of trimming, in milliseconds. Default 60000.
	IntervalMs int64 `yaml:"interval-ms"`
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
	// MaxAgeMs drops dead letters older than this many milliseconds. Default 0: no age bound.
	MaxAgeMs int64 `yaml:"max-age-ms"`
}

// WithDefaults returns c with every zero field replaced by its default (the seed's values, the
// safe trim mode and the metrics.Stream set). Constructors apply it; call it to see the
// values a Config will run with.
func (c Config) WithDefaults() Config {
	if c.ReadCount == 0 {
		c.ReadCount = DefaultReadCount
	}
	if c.BlockMs == 0 {
		c.BlockMs = DefaultBlockMs
	}
	if c.MaxRetry == 0 {
		c.MaxRetry = DefaultMaxRetry
	}
	if c.Autoclaim.MinIdleMs == 0 {
		c.Autoclaim.MinIdleMs = DefaultMinIdleMs
	}
	if c.Autoclaim.IntervalMs == 0 {
		c.Autoclaim.IntervalMs = DefaultClaimIntervalMs
	}
	if c.Trim.MaxLen == 0 {
		c.Trim.MaxLen = DefaultTrimMaxLen
	}
	if c.Trim.IntervalMs == 0 {
		c.Trim.IntervalMs = DefaultTrimIntervalMs
	}
	if c.Trim.Mode == "" {
		c.Trim.Mode = TrimSafe
	}
	if c.DeadLetter.MaxLen == 0 {
		c.DeadLetter.MaxLen = DefaultDeadLetterMaxLen
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Stream
	}
	return c
}

// Validate reports the first invalid field of c, naming its key path in the YAML section
// (for example "redis-stream.read-count"). The error wraps redstream.ErrInvalidConfig.
func (c Config) Validate() error {
	return c.validate(ConfigSection)
}

func (c Config) validate(prefix string) error {
	bad := func(key string, v any, want string) error {
		return cfgErr(prefix+"."+key, "got %v, want %s", v, want)
	}
	switch {
	case c.ReadCount < 0:
		return bad("read-count", c.ReadCount, "a positive count (0 for the default 10)")
	case c.BlockMs < 0:
		return bad("block-ms", c.BlockMs, "a positive number of milliseconds (0 for the default 2000)")
	case c.MaxRetry < 0:
		return bad("max-retry", c.MaxRetry, "a positive count (0 for the default 3)")
	case c.Autoclaim.MinIdleMs < 0:
		return bad("autoclaim.min-idle-ms", c.Autoclaim.MinIdleMs, "a positive number of milliseconds")
	case c.Autoclaim.IntervalMs < 0:
		return bad("autoclaim.interval-ms", c.Autoclaim.IntervalMs, "a positive number of milliseconds")
	case c.Trim.MaxLen < 0:
		return bad("trim.maxlen", c.Trim.MaxLen, "a positive count (0 for the default 100000)")
	case c.Trim.IntervalMs < 0:
		return bad("trim.interval-ms", c.Trim.IntervalMs, "a positive number of milliseconds")
	case c.DeadLetter.MaxAgeMs < 0:
		return bad("dead-letter.max-age-ms", c.DeadLetter.MaxAgeMs, "a non-negative number of milliseconds")
	}
	switch c.Trim.Mode {
	case "", TrimSafe, TrimMaxLen, TrimOff:
	default:
		return bad("trim.mode", strconv.Quote(string(c.Trim.Mode)), `"safe", "maxlen" or "off"`)
	}
	if c.EnvIsolation && strings.IndexByte(c.Env, '}') >= 0 {
		return bad("env", strconv.Quote(c.Env), "no '}'")
	}
	return nil
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
