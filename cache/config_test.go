package cache

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // the error, whole
	}{
		{"empty name", func(c *Config) { c.Name = "" }, "cache: Name (redis-cache.name) must not be empty"},
		{"zero ttl", func(c *Config) { c.DefaultTTL = 0 }, "cache: DefaultTTL (redis-cache.default-ttl-seconds) must be positive, got 0s"},
		{"sub-ms null ttl", func(c *Config) { c.NullTTL = time.Microsecond }, "cache: NullTTL (redis-cache.null-ttl-seconds) must be at least 1ms (Redis counts milliseconds), got 1µs"},
		{"jitter 1", func(c *Config) { c.JitterRatio = 1 }, "cache: JitterRatio (redis-cache.jitter-ratio) must be in [0, 1), got 1"},
		{"negative wait", func(c *Config) { c.Breakdown.WaitTimeout = -1 }, "cache: Breakdown.WaitTimeout (redis-cache.breakdown.wait-timeout-ms) must not be negative, got -1ns"},
		{"zero interval", func(c *Config) { c.Breakdown.WaitInterval = 0 }, "cache: Breakdown.WaitInterval (redis-cache.breakdown.wait-interval-ms) must be at least 1ms, got 0s"},
		{"zero lock ttl", func(c *Config) { c.Breakdown.LockTTL = 0 }, "cache: Breakdown.LockTTL (redis-cache.breakdown.lock-ttl-ms) must be positive, got 0s"},
		{"sub-ms timeout", func(c *Config) { c.Timeout = time.Microsecond }, "cache: Timeout (redis-cache.timeout-ms) must be at least 1ms (0: the default, 100ms), got 1µs"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "cache: Timeout (redis-cache.timeout-ms) must be at least 1ms (0: the default, 100ms), got -1s"},
		{"unknown policy", func(c *Config) { c.OnRedisError = "ignore" }, `cache: OnRedisError (redis-cache.on-redis-error) must be "error" or "load", got "ignore"`},
		{"breaker error rate", func(c *Config) { c.Breaker.ErrorRate = 1.5 }, "cache: Breaker.ErrorRate (redis-cache.breaker.error-rate) must be at most 1 (negative disables it), got 1.5"},
		{"breaker cool-down", func(c *Config) { c.Breaker.CoolDown = -time.Second }, "cache: Breaker.CoolDown (redis-cache.breaker.cool-down-ms) must be at least 1ms (0: the default), got -1s"},
		{"breaker probes", func(c *Config) { c.Breaker.Probes = -1 }, "cache: Breaker.Probes (redis-cache.breaker.probes) must not be negative, got -1"},
		{"client-side ttl", func(c *Config) { c.ClientSideCache = ClientSideCacheConfig{Enabled: true} }, "cache: ClientSideCache.TTL (redis-cache.client-side-cache.ttl-ms) must be at least 1ms, got 0s"},
		{"negative max staleness", func(c *Config) { c.ClientSideCache.Enabled, c.ClientSideCache.MaxStaleness = true, -time.Second },
			"cache: ClientSideCache.MaxStaleness (redis-cache.client-side-cache.max-staleness-ms) must not be negative (0: the default, 3s), got -1s"},
		{"heartbeat not below max staleness", func(c *Config) {
			c.ClientSideCache.Enabled, c.ClientSideCache.MaxStaleness, c.ClientSideCache.Heartbeat = true, time.Second, time.Second
		}, "cache: ClientSideCache.MaxStaleness (redis-cache.client-side-cache.max-staleness-ms) must be more than the heartbeat interval (heartbeat-ms: 1s), got 1s"},
		{"default heartbeat above max staleness", func(c *Config) {
			c.ClientSideCache.Enabled, c.ClientSideCache.MaxStaleness, c.ClientSideCache.Heartbeat = true, 500*time.Millisecond, 0
		}, "cache: ClientSideCache.MaxStaleness (redis-cache.client-side-cache.max-staleness-ms) must be more than the heartbeat interval (heartbeat-ms: 1s), got 500ms"},
		{"negative heartbeat", func(c *Config) { c.ClientSideCache.Enabled, c.ClientSideCache.Heartbeat = true, -time.Second },
			"cache: ClientSideCache.Heartbeat (redis-cache.client-side-cache.heartbeat-ms) must be at least 10ms (0: the default, 1s), got -1s"},
		{"sub-10ms heartbeat", func(c *Config) { c.ClientSideCache.Enabled, c.ClientSideCache.Heartbeat = true, time.Millisecond },
			"cache: ClientSideCache.Heartbeat (redis-cache.client-side-cache.heartbeat-ms) must be at least 10ms (0: the default, 1s), got 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(&c)
			err := c.Validate()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
			var ce *ConfigError
			if !errors.Is(err, redstream.ErrInvalidConfig) || !errors.As(err, &ce) || !strings.HasPrefix(ce.Path, "redis-cache.") {
				t.Errorf("err = %#v: want a *ConfigError with a redis-cache path matching ErrInvalidConfig", err)
			}
		})
	}
}

// A Config with the fields added for outages left zero (as written before they existed)
// gets their defaults.
func TestZeroOutageFieldsMeanDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Timeout, cfg.OnRedisError, cfg.Breaker = 0, "", redstream.BreakerOptions{}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c, err := New(redistest.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Config(); got.Timeout != DefaultTimeout || got.OnRedisError != ReturnError {
		t.Errorf("Config() = Timeout %v, OnRedisError %q; want %v, %q", got.Timeout, got.OnRedisError, DefaultTimeout, ReturnError)
	}
}

// The staleness bound of client-side caching defaults to 3s with a heartbeat every second,
// in DefaultConfig and for fields left zero.
func TestStalenessDefaults(t *testing.T) {
	d := DefaultConfig().ClientSideCache
	if d.MaxStaleness != DefaultMaxStaleness || d.Heartbeat != DefaultHeartbeat || DefaultMaxStaleness != 3*time.Second || DefaultHeartbeat != time.Second {
		t.Fatalf("DefaultConfig().ClientSideCache = %+v, want MaxStaleness 3s, Heartbeat 1s", d)
	}
	cfg := DefaultConfig()
	cfg.ClientSideCache = ClientSideCacheConfig{Enabled: true, TTL: time.Minute}
	c, err := New(redistest.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Config().ClientSideCache; got.MaxStaleness != DefaultMaxStaleness || got.Heartbeat != DefaultHeartbeat {
		t.Errorf("Config().ClientSideCache = %+v, want the defaults", got)
	}
	if c.beat.bound != DefaultMaxStaleness || c.beat.interval != DefaultHeartbeat {
		t.Errorf("heartbeat every %v with bound %v, want %v and %v", c.beat.interval, c.beat.bound, DefaultHeartbeat, DefaultMaxStaleness)
	}
}
