package cache

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redstream-go/redstream"
)

// Defaults of Config, as in the Java starter (YAML keys under redis-cache).
const (
	// DefaultName is the default Config.Name (the metrics label).
	DefaultName = "default"
	// DefaultKeyPrefix is the default Config.KeyPrefix (key-prefix).
	DefaultKeyPrefix = "cache:"
	// DefaultEntryTTL is the default Config.DefaultTTL (default-ttl-seconds: 3600).
	DefaultEntryTTL = time.Hour
	// DefaultNullTTL is the default Config.NullTTL (null-ttl-seconds: 60).
	DefaultNullTTL = time.Minute
	// DefaultJitterRatio is the default Config.JitterRatio (jitter-ratio: 0.1).
	DefaultJitterRatio = 0.1
	// DefaultLockTTL is the default BreakdownConfig.LockTTL (breakdown.lock-ttl-ms: 10000).
	DefaultLockTTL = 10 * time.Second
	// DefaultWaitTimeout is the default BreakdownConfig.WaitTimeout
	// (breakdown.wait-timeout-ms: 3000).
	DefaultWaitTimeout = 3 * time.Second
	// DefaultWaitInterval is the default BreakdownConfig.WaitInterval
	// (breakdown.wait-interval-ms: 50).
	DefaultWaitInterval = 50 * time.Millisecond
	// DefaultLocalTTL is the default ClientSideCacheConfig.TTL (client-side-cache.ttl-ms:
	// 60000), the longest a value is served from process memory without asking Redis.
	DefaultLocalTTL = time.Minute
	// DefaultTimeout is the default Config.Timeout (timeout-ms: 100, beyond the Java
	// starter): the deadline of each Redis command or script the cache sends.
	DefaultTimeout = 100 * time.Millisecond
)

// RedisErrorPolicy says what GetOrLoad and GetMany do when Redis fails (an error reply, a
// broken connection, Config.Timeout passed, or the circuit breaker open). It never applies
// to the caller's own context ending, to bad arguments, or to a loader or codec error.
type RedisErrorPolicy string

const (
	// ReturnError, the default (also ""), returns the Redis error to the caller. The loader
	// is not called: a source that relies on the cache to survive its load is not flooded
	// when Redis goes away.
	ReturnError RedisErrorPolicy = "error"
	// LoadOnError calls the loader and returns its result without caching anything (Redis
	// is not written while it fails). Concurrent misses of one key in a process still share
	// one load; across processes there is no lock, so every process loads once per call.
	LoadOnError RedisErrorPolicy = "load"
)

// Config configures a Cache. Its fields mirror the Java starter's keys under redis-cache (given with
// each field, in the yaml tags); package config reads them from a configuration file. Fields are taken literally: start from
// DefaultConfig and change what you need, since the zero Config is invalid (zero TTLs are
// rejected, and a zero JitterRatio or a false Breakdown.Enabled switch protections off).
//
// Durations are rounded down to whole milliseconds when sent to Redis; every TTL must be at
// least 1ms.
type Config struct {
	// Name labels the cache's metrics (name="..."); give every cache in a process its own.
	// YAML: name. Default "default".
	Name string `yaml:"name"`
	// KeyPrefix starts every Redis key. YAML: key-prefix. Default "cache:".
	KeyPrefix string `yaml:"key-prefix"`
	// EnvIsolation, with a non-empty Env, puts Env between the prefix and the key:
	// KeyPrefix + Env + ":" + key (cache:<env>:<key>), so environments sharing one Redis
	// never see each other's entries. YAML: env-isolation, env. Default false, "".
	EnvIsolation bool   `yaml:"env-isolation"`
	Env          string `yaml:"env"`
	// DefaultTTL is the TTL of entries written with the DefaultTTL sentinel, and of sliding
	// renewals. YAML: default-ttl-seconds. Default 1h.
	DefaultTTL time.Duration `yaml:"default-ttl-seconds" unit:"s"`
	// NullTTL is the TTL of a null marker, the cached "not found" of a loader (penetration
	// protection). YAML: null-ttl-seconds. Default 60s.
	NullTTL time.Duration `yaml:"null-ttl-seconds" unit:"s"`
	// JitterRatio adds a random extra of up to JitterRatio*ttl to every TTL the cache
	// writes (values, null markers, Expire, sliding renewals), so entries written together
	// do not expire together (avalanche protection). 0 disables it; it must be in [0, 1).
	// YAML: jitter-ratio. Default 0.1.
	JitterRatio float64 `yaml:"jitter-ratio"`
	// SlidingExpiration renews DefaultTTL (with jitter) when a read finds a real value;
	// null markers are never renewed. With client-side caching, reads answered from
	// process memory do not reach Redis and renew nothing; a read that reaches Redis renews
	// once less than half of DefaultTTL is left. YAML: sliding-expire-enabled. Default false.
	SlidingExpiration bool `yaml:"sliding-expire-enabled"`
	// Breakdown configures the stampede (cache breakdown) protection of GetOrLoad.
	// YAML: breakdown.*.
	Breakdown BreakdownConfig `yaml:"breakdown"`
	// ClientSideCache configures client-side caching. YAML: client-side-cache.*.
	ClientSideCache ClientSideCacheConfig `yaml:"client-side-cache"`
	// Timeout is the deadline of each Redis command or script the cache sends (a Get is one,
	// a GetOrLoad miss two to four), applied even when the caller's context has none; the
	// caller's own deadline still applies when it is sooner. A GetMany round trip (one per
	// step of the batch) carrying n keys gets Timeout × ceil(n/1000).
	// It does not bound the loader, and the waits of Breakdown are bounded by WaitTimeout.
	// Past it the call counts as a Redis failure (see OnRedisError). YAML: timeout-ms.
	// Default 100ms; 0 means the default (so a Config written before this field existed
	// keeps working), otherwise at least 1ms.
	Timeout time.Duration `yaml:"timeout-ms" unit:"ms"`
	// OnRedisError is what GetOrLoad and GetMany do when Redis fails: ReturnError ("error",
	// the default; "" means it too) or LoadOnError ("load"). Get, Set, Delete, Exists and
	// Expire always return the error. YAML: on-redis-error. Default "error".
	OnRedisError RedisErrorPolicy `yaml:"on-redis-error"`
	// Breaker configures the circuit breaker in front of Redis. YAML: breaker.*.
	Breaker BreakerConfig `yaml:"breaker"`
	// Codec encodes values; nil means JSON. It is not read from YAML.
	Codec Codec `yaml:"-"`
	// Logger receives the cache's log records; nil means slog.Default(). Levels: Warn when
	// the circuit breaker opens (Redis failing: the error, and what GetOrLoad and GetMany
	// do now), Info when it closes again; Warn when writes no caller waits for (the
	// write-back of a loaded value, a lock release, a sliding renewal) start failing, Info
	// when they work again: once per change of state, never per call. Errors callers see
	// are returned, not logged. It is not read from YAML.
	Logger *slog.Logger `yaml:"-"`
}

// BreakdownConfig configures the stampede protection of GetOrLoad: at most one load per key
// at a time in a process (singleflight), and across processes through a lock held in Redis.
type BreakdownConfig struct {
	// Enabled turns the protection on. When false, GetOrLoad loads on every miss without
	// any coordination. YAML: enabled. Default true.
	Enabled bool `yaml:"enabled"`
	// LockTTL bounds how long a lock survives its owner (a crashed or hung loader): after it
	// a waiter takes the lock over. Keep it above the slowest load: a load that outlives its
	// lock is returned to its callers but not cached. YAML: lock-ttl-ms. Default 10s.
	LockTTL time.Duration `yaml:"lock-ttl-ms" unit:"ms"`
	// WaitTimeout is how long a caller waits for another process's load before it loads
	// by itself without the lock (a degraded load, counted in the metrics). 0 never waits.
	// YAML: wait-timeout-ms. Default 3s.
	WaitTimeout time.Duration `yaml:"wait-timeout-ms" unit:"ms"`
	// WaitInterval is how often a waiting caller reads the key again.
	// YAML: wait-interval-ms. Default 50ms.
	WaitInterval time.Duration `yaml:"wait-interval-ms" unit:"ms"`
}

// BreakerConfig configures a Cache's circuit breaker, the same breaker as the Redis limiters
// and deduplicators (redisbackend.BreakerOptions). The zero value is the default breaker:
// it opens after 3 consecutive outage errors, or when half of at least 20 calls in 10s
// failed; while open, every call fails at once with an ErrUnavailable error wrapping
// redstream.ErrCircuitOpen (under OnRedisError "load", GetOrLoad and GetMany answer from
// the loader at once); after a cool-down of 1s one probe call reaches Redis and closes the
// breaker when it succeeds, or opens it for another cool-down when it fails. An outage
// error is a call that did not answer within Timeout, could not be sent or read, or got
// the error reply of a server that cannot serve (LOADING, BUSY, READONLY, CLUSTERDOWN, ...;
// not OOM, since reads still work). A caller cancelling its own context is not one; a hung
// call outliving the caller's own deadline is, when that deadline left it at least 10ms
// (callers whose deadlines are shorter than Timeout open the breaker too).
type BreakerConfig struct {
	// Disabled turns the breaker off: every call reaches Redis and, against a hung
	// server, waits for its Timeout. YAML: disabled. Default false.
	Disabled bool `yaml:"disabled"`
	// Failures is the number of consecutive outage errors that opens the breaker;
	// negative disables this rule. YAML: failures. Default (0) 3.
	Failures int `yaml:"failures"`
	// ErrorRate, in (0, 1], opens the breaker when that fraction of the calls of the last
	// Window failed, once MinCalls calls were made; negative disables this rule.
	// YAML: error-rate. Default (0) 0.5.
	ErrorRate float64 `yaml:"error-rate"`
	// MinCalls is the number of calls in Window below which ErrorRate is not judged.
	// YAML: min-calls. Default (0) 20.
	MinCalls int `yaml:"min-calls"`
	// Window is the period ErrorRate is measured over. YAML: window-ms. Default (0) 10s.
	Window time.Duration `yaml:"window-ms" unit:"ms"`
	// CoolDown is how long the open breaker fails calls before a probe; it bounds how
	// long the cache keeps answering without Redis after Redis is back.
	// YAML: cool-down-ms. Default (0) 1s.
	CoolDown time.Duration `yaml:"cool-down-ms" unit:"ms"`
	// Probes is the number of concurrent probe calls once the cool-down is over, and the
	// number of successful probes that close the breaker. YAML: probes. Default (0) 1.
	Probes int `yaml:"probes"`
	// OnStateChange, when set, is called after each transition of the breaker,
	// synchronously on the goroutine whose call caused it; keep it fast and do not call
	// the Cache from it. It is not read from YAML.
	OnStateChange func(BreakerChange) `yaml:"-"`
	// OnFailure, when set, is called with each outage error of a Redis call (not with the
	// fast failures of an open breaker), synchronously on the caller's goroutine; keep it
	// fast. It is not read from YAML.
	OnFailure func(error) `yaml:"-"`
}

// ClientSideCacheConfig configures client-side caching (rueidis server-assisted
// invalidation): reads keep a copy in process memory that Redis invalidates when any client
// changes the key, so a hot read costs no round trip. It needs a rueidis client with client
// tracking (RESP3, Redis 6+, and ClientOption.DisableCache false); with tracking disabled
// rueidis turns the cached reads into plain reads.
type ClientSideCacheConfig struct {
	// Enabled turns client-side caching on. YAML: enabled. Default false.
	Enabled bool `yaml:"enabled"`
	// TTL is the longest a copy is served from memory; a copy never outlives the key's own
	// TTL. YAML: ttl-ms. Default 60s.
	TTL time.Duration `yaml:"ttl-ms" unit:"ms"`
}

// DefaultConfig returns the Java starter's defaults: prefix "cache:", no env isolation, TTL 1h,
// null TTL 60s, jitter 0.1, no sliding expiration, breakdown protection on (lock 10s, wait
// 3s, every 50ms), client-side caching off, JSON; beyond the starter, a 100ms deadline per
// Redis call and Redis errors returned to the caller.
func DefaultConfig() Config {
	return Config{
		Name:        DefaultName,
		KeyPrefix:   DefaultKeyPrefix,
		DefaultTTL:  DefaultEntryTTL,
		NullTTL:     DefaultNullTTL,
		JitterRatio: DefaultJitterRatio,
		Breakdown: BreakdownConfig{
			Enabled:      true,
			LockTTL:      DefaultLockTTL,
			WaitTimeout:  DefaultWaitTimeout,
			WaitInterval: DefaultWaitInterval,
		},
		ClientSideCache: ClientSideCacheConfig{TTL: DefaultLocalTTL},
		Timeout:         DefaultTimeout,
		OnRedisError:    ReturnError,
	}
}

// Validate reports the first invalid field, wrapped in redstream.ErrInvalidConfig. New calls
// it.
func (c *Config) Validate() error {
	bad := func(field, key, format string, args ...any) error {
		return &ConfigError{Field: field, Path: "redis-cache." + key, Msg: fmt.Sprintf(format, args...)}
	}
	if c.Name == "" {
		return bad("Name", "name", "must not be empty")
	}
	if err := checkTTL(c.DefaultTTL); err != nil {
		return bad("DefaultTTL", "default-ttl-seconds", "%v", err)
	}
	if err := checkTTL(c.NullTTL); err != nil {
		return bad("NullTTL", "null-ttl-seconds", "%v", err)
	}
	if err := checkJitter(c.JitterRatio); err != nil {
		return bad("JitterRatio", "jitter-ratio", "%v", err)
	}
	if err := checkTTL(c.Breakdown.LockTTL); err != nil {
		return bad("Breakdown.LockTTL", "breakdown.lock-ttl-ms", "%v", err)
	}
	if c.Breakdown.WaitTimeout < 0 {
		return bad("Breakdown.WaitTimeout", "breakdown.wait-timeout-ms", "must not be negative, got %v", c.Breakdown.WaitTimeout)
	}
	if c.Breakdown.WaitInterval < time.Millisecond {
		return bad("Breakdown.WaitInterval", "breakdown.wait-interval-ms", "must be at least 1ms, got %v", c.Breakdown.WaitInterval)
	}
	if c.Timeout != 0 && c.Timeout < time.Millisecond {
		return bad("Timeout", "timeout-ms", "must be at least 1ms (0: the default, 100ms), got %v", c.Timeout)
	}
	if b := c.Breaker; !b.Disabled {
		switch {
		case b.ErrorRate > 1 || b.ErrorRate != b.ErrorRate:
			return bad("Breaker.ErrorRate", "breaker.error-rate", "must be at most 1 (negative disables it), got %v", b.ErrorRate)
		case b.MinCalls < 0:
			return bad("Breaker.MinCalls", "breaker.min-calls", "must not be negative, got %d", b.MinCalls)
		case b.Window < 0 || (b.Window > 0 && b.Window < time.Millisecond):
			return bad("Breaker.Window", "breaker.window-ms", "must be at least 1ms (0: the default), got %v", b.Window)
		case b.CoolDown < 0 || (b.CoolDown > 0 && b.CoolDown < time.Millisecond):
			return bad("Breaker.CoolDown", "breaker.cool-down-ms", "must be at least 1ms (0: the default), got %v", b.CoolDown)
		case b.Probes < 0:
			return bad("Breaker.Probes", "breaker.probes", "must not be negative, got %d", b.Probes)
		}
	}
	switch c.OnRedisError {
	case "", ReturnError, LoadOnError:
	default:
		return bad("OnRedisError", "on-redis-error", "must be %q or %q, got %q", ReturnError, LoadOnError, string(c.OnRedisError))
	}
	if c.ClientSideCache.Enabled && c.ClientSideCache.TTL < time.Millisecond {
		return bad("ClientSideCache.TTL", "client-side-cache.ttl-ms", "must be at least 1ms, got %v", c.ClientSideCache.TTL)
	}
	return nil
}

func checkTTL(d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("must be positive, got %v", d)
	case d < time.Millisecond:
		return fmt.Errorf("must be at least 1ms (Redis counts milliseconds), got %v", d)
	}
	return nil
}

func checkJitter(r float64) error {
	if !(r >= 0 && r < 1) { // also rejects NaN
		return fmt.Errorf("must be in [0, 1), got %v", r)
	}
	return nil
}

// ConfigError is an invalid configuration value, returned by Validate (and so by New). Path
// names the key of the field in a redis-cache section of a configuration file, so that
// package config reports it at the key's line. It matches redstream.ErrInvalidConfig with
// errors.Is.
type ConfigError struct {
	// Field is the Config field at fault, e.g. "JitterRatio".
	Field string
	// Path is the key path in a configuration file, e.g. "redis-cache.jitter-ratio".
	Path string
	// Msg says what is wrong, e.g. "must be in [0, 1), got 2".
	Msg string
}

// Error returns "cache: <Field> (<path>) <msg>".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("cache: %s (%s) %s", e.Field, e.Path, e.Msg)
}

// Unwrap returns redstream.ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return redstream.ErrInvalidConfig }
