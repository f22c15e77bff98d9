package cache

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redstream-go/redstream"
)

// The defaults of the Config fields whose zero value means the default.
const (
	// DefaultTimeout is the default of Config.Timeout (timeout-ms: 100, beyond the Java
	// starter): the deadline of each Redis command or script the cache sends.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultMaxStaleness is the default of ClientSideCacheConfig.MaxStaleness
	// (client-side-cache.max-staleness-ms: 3000): past it without an answer on the
	// connections that deliver invalidations, reads are not answered from memory.
	DefaultMaxStaleness = 3 * time.Second
	// DefaultHeartbeat is the default of ClientSideCacheConfig.Heartbeat
	// (client-side-cache.heartbeat-ms: 1000), how often those connections are asked.
	DefaultHeartbeat = time.Second
)

// The values DefaultConfig sets, as in the Java starter (YAML keys under redis-cache); the
// fields are taken literally, so they have no zero-value default.
const (
	defaultName         = "default"             // Config.Name
	defaultKeyPrefix    = "cache:"              // Config.KeyPrefix
	defaultEntryTTL     = time.Hour             // Config.DefaultTTL (default-ttl-seconds: 3600)
	defaultNullTTL      = time.Minute           // Config.NullTTL (null-ttl-seconds: 60)
	defaultJitterRatio  = 0.1                   // Config.JitterRatio
	defaultLockTTL      = 10 * time.Second      // BreakdownConfig.LockTTL
	defaultWaitTimeout  = 3 * time.Second       // BreakdownConfig.WaitTimeout
	defaultWaitInterval = 50 * time.Millisecond // BreakdownConfig.WaitInterval
	defaultLocalTTL     = time.Minute           // ClientSideCacheConfig.TTL
	// minHeartbeat is the least ClientSideCacheConfig.Heartbeat.
	minHeartbeat = 10 * time.Millisecond
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
	// Breaker configures the circuit breaker in front of Redis, the same breaker as the
	// Redis limiters' and deduplicators' (the zero value is the default breaker). While it
	// is open, every call fails at once with an ErrUnavailable error wrapping
	// redstream.ErrCircuitOpen (under OnRedisError "load", GetOrLoad and GetMany answer
	// from the loader at once). A failure is a call that did not answer within Timeout,
	// could not be sent or read, or got the error reply of a server that cannot serve
	// (LOADING, BUSY, READONLY, CLUSTERDOWN, ...; not OOM, since reads still work). A
	// caller cancelling its own context is not one; a hung call outliving the caller's own
	// deadline is, when that deadline left it at least 10ms. A GetMany spanning several
	// cluster masters needs each of their breakers closed; its failure counts for the
	// master the error names (a refused or reset connection), or for none (a timeout, an
	// EOF). YAML: breaker.* (disabled, failures, error-rate, min-calls, window-ms,
	// cool-down-ms, probes).
	Breaker redstream.BreakerOptions `yaml:"breaker"`
	// FailSafe configures fail-safe: serving the last known value of a key, flagged stale,
	// when its loader or Redis fails. YAML: fail-safe.* (enabled, max-staleness-ms,
	// throttle-ms, max-entries).
	FailSafe FailSafeConfig `yaml:"fail-safe"`
	// LoadSoftTimeout, when positive, bounds how long GetOrLoad waits for a load when
	// fail-safe has a stale value for the key: past it the stale value is returned (Stale
	// reports it) and the load goes on in the background, its result stored as usual. It
	// needs FailSafe.Enabled (otherwise no stale value is ever at hand); the LoadTimeouts
	// option overrides it per call. YAML: load-soft-timeout-ms. Default 0: off.
	LoadSoftTimeout time.Duration `yaml:"load-soft-timeout-ms" unit:"ms"`
	// LoadHardTimeout, when positive, abandons a load after it: the loader's context is
	// cancelled and GetOrLoad returns an error wrapping context.DeadlineExceeded (or, with
	// fail-safe, the stale value), caching nothing. A loader that ignores its context runs
	// on until it returns, its result dropped. The LoadTimeouts option overrides it per
	// call. YAML: load-hard-timeout-ms. Default 0: off.
	LoadHardTimeout time.Duration `yaml:"load-hard-timeout-ms" unit:"ms"`
	// EagerRefresh, in (0, 1), reloads a hot key before it expires: a GetOrLoad hit on a
	// key past that fraction of its ttl (the call's ttl argument) starts one background
	// load, once across all processes (a lock key held for what is left of the entry's
	// life), and keeps returning the current value meanwhile; the loaded value replaces
	// it with a fresh TTL. The hit then reads the key's PTTL with its GET (pipelined, one
	// round trip). A failed refresh leaves the entry to expire as usual. It works neither
	// with SlidingExpiration (the TTL is renewed by reads) nor with client-side caching
	// (copies in memory do not tell the key's remaining TTL). YAML: eager-refresh.
	// Default 0: off.
	EagerRefresh float64 `yaml:"eager-refresh"`
	// Codec encodes values; nil means JSON. It is not read from YAML.
	Codec Codec `yaml:"-"`
	// Logger receives the cache's log records; nil means slog.Default(). Levels: Warn when
	// the circuit breaker opens (Redis failing: the error, and what GetOrLoad and GetMany
	// do now), Info when it closes again; Warn when writes no caller waits for (the
	// write-back of a loaded value, a lock release, a sliding renewal) start failing, Info
	// when they work again; Warn when hits from client-side cache memory start being
	// refused (no heartbeat answered within ClientSideCache.MaxStaleness), Info when they
	// are served again: once per change of state, never per call. Errors callers see
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
	// MaxStaleness bounds how far behind Redis a copy served from memory can be. Redis
	// sends invalidations on the connections that read the keys; a heartbeat reads through
	// every one of them (see Heartbeat), and a reply proves that every invalidation Redis
	// sent before the heartbeat was sent has arrived. A read is answered from memory only
	// while the last heartbeat all connections answered was sent at most MaxStaleness ago;
	// otherwise it goes to Redis, with its deadline (Timeout) and the failure policy
	// (OnRedisError) as any read that reaches Redis, and is counted in
	// redis_cache_local_refused_total. So a value served from memory reflects every write
	// Redis completed more than MaxStaleness earlier, even when the connection is up and
	// silent (a hung server, a stalled network path); without the bound, rueidis would
	// serve copies until its own write timeout (10s by default) closed the connection.
	// YAML: max-staleness-ms. Default 3s; 0 means the default; otherwise more than
	// Heartbeat.
	MaxStaleness time.Duration `yaml:"max-staleness-ms" unit:"ms"`
	// Heartbeat is how often the heartbeat reads through the connections; each read has
	// the deadline MaxStaleness. Each heartbeat reads up to 256 keys that do not exist
	// (two commands each, pipelined, one round trip per connection), so that it reaches
	// every connection rueidis may open to a server (see the package documentation for a
	// cluster). YAML: heartbeat-ms. Default 1s; 0 means the default; otherwise at least
	// 10ms and less than MaxStaleness.
	Heartbeat time.Duration `yaml:"heartbeat-ms" unit:"ms"`
}

// DefaultConfig returns the Java starter's defaults: prefix "cache:", no env isolation, TTL 1h,
// null TTL 60s, jitter 0.1, no sliding expiration, breakdown protection on (lock 10s, wait
// 3s, every 50ms), client-side caching off (when on: copies for 60s, at most 3s behind
// Redis, a heartbeat every second), JSON; beyond the starter, a 100ms deadline per
// Redis call and Redis errors returned to the caller.
func DefaultConfig() Config {
	return Config{
		Name:        defaultName,
		KeyPrefix:   defaultKeyPrefix,
		DefaultTTL:  defaultEntryTTL,
		NullTTL:     defaultNullTTL,
		JitterRatio: defaultJitterRatio,
		Breakdown: BreakdownConfig{
			Enabled:      true,
			LockTTL:      defaultLockTTL,
			WaitTimeout:  defaultWaitTimeout,
			WaitInterval: defaultWaitInterval,
		},
		ClientSideCache: ClientSideCacheConfig{TTL: defaultLocalTTL, MaxStaleness: DefaultMaxStaleness, Heartbeat: DefaultHeartbeat},
		Timeout:         DefaultTimeout,
		OnRedisError:    ReturnError,
		FailSafe: FailSafeConfig{
			MaxStaleness: defaultFailSafeStaleness,
			Throttle:     defaultFailSafeThrottle,
			MaxEntries:   defaultFailSafeMaxEntries,
		},
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
	if err := c.validateLoads(bad); err != nil {
		return err
	}
	switch c.OnRedisError {
	case "", ReturnError, LoadOnError:
	default:
		return bad("OnRedisError", "on-redis-error", "must be %q or %q, got %q", ReturnError, LoadOnError, string(c.OnRedisError))
	}
	if cs := c.ClientSideCache; cs.Enabled {
		if cs.TTL < time.Millisecond {
			return bad("ClientSideCache.TTL", "client-side-cache.ttl-ms", "must be at least 1ms, got %v", cs.TTL)
		}
		if cs.Heartbeat != 0 && cs.Heartbeat < minHeartbeat {
			return bad("ClientSideCache.Heartbeat", "client-side-cache.heartbeat-ms", "must be at least %v (0: the default, %v), got %v", minHeartbeat, DefaultHeartbeat, cs.Heartbeat)
		}
		if cs.MaxStaleness < 0 {
			return bad("ClientSideCache.MaxStaleness", "client-side-cache.max-staleness-ms", "must not be negative (0: the default, %v), got %v", DefaultMaxStaleness, cs.MaxStaleness)
		}
		if beat, bound := cs.heartbeat(), cs.maxStaleness(); beat >= bound {
			return bad("ClientSideCache.MaxStaleness", "client-side-cache.max-staleness-ms", "must be more than the heartbeat interval (heartbeat-ms: %v), got %v", beat, bound)
		}
	}
	return nil
}

// validateLoads checks the fail-safe and load timeout fields.
func (c *Config) validateLoads(bad func(field, key, format string, args ...any) error) error {
	if fs := c.FailSafe; fs.Enabled {
		switch {
		case fs.MaxStaleness < time.Millisecond:
			return bad("FailSafe.MaxStaleness", "fail-safe.max-staleness-ms", "must be at least 1ms, got %v", fs.MaxStaleness)
		case fs.Throttle < time.Millisecond:
			return bad("FailSafe.Throttle", "fail-safe.throttle-ms", "must be at least 1ms, got %v", fs.Throttle)
		case fs.MaxEntries < 1:
			return bad("FailSafe.MaxEntries", "fail-safe.max-entries", "must be at least 1, got %d", fs.MaxEntries)
		}
	}
	switch {
	case c.LoadSoftTimeout < 0:
		return bad("LoadSoftTimeout", "load-soft-timeout-ms", "must not be negative, got %v", c.LoadSoftTimeout)
	case c.LoadHardTimeout < 0:
		return bad("LoadHardTimeout", "load-hard-timeout-ms", "must not be negative, got %v", c.LoadHardTimeout)
	case c.LoadSoftTimeout > 0 && !c.FailSafe.Enabled:
		return bad("LoadSoftTimeout", "load-soft-timeout-ms", "needs fail-safe.enabled: the stale value it returns is fail-safe's")
	case c.LoadSoftTimeout > 0 && c.LoadHardTimeout > 0 && c.LoadSoftTimeout >= c.LoadHardTimeout:
		return bad("LoadSoftTimeout", "load-soft-timeout-ms", "must be less than load-hard-timeout-ms (%v), got %v", c.LoadHardTimeout, c.LoadSoftTimeout)
	case c.EagerRefresh == 0:
	case !(c.EagerRefresh > 0 && c.EagerRefresh < 1):
		return bad("EagerRefresh", "eager-refresh", "must be in (0, 1) (0: off), got %v", c.EagerRefresh)
	case c.SlidingExpiration:
		return bad("EagerRefresh", "eager-refresh", "does not work with sliding-expire-enabled")
	case c.ClientSideCache.Enabled:
		return bad("EagerRefresh", "eager-refresh", "does not work with client-side-cache.enabled")
	}
	return nil
}

// maxStaleness returns MaxStaleness, or its default for 0.
func (cs ClientSideCacheConfig) maxStaleness() time.Duration {
	if cs.MaxStaleness == 0 {
		return DefaultMaxStaleness
	}
	return cs.MaxStaleness
}

// heartbeat returns Heartbeat, or its default for 0.
func (cs ClientSideCacheConfig) heartbeat() time.Duration {
	if cs.Heartbeat == 0 {
		return DefaultHeartbeat
	}
	return cs.Heartbeat
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
