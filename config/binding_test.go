package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/stream"
)

// The redis-stream and redis-cache sections are bound to stream.Config and cache.Config
// through their struct tags by the one binder of internal/yamlx, and checked by their own
// Validate.

func TestStreamSection(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want stream.Config
	}{
		{"empty document", "", stream.Config{}},
		{"no section", "spring:\n  redis:\n    host: x\n", stream.Config{}},
		{"null section", "redis-stream:\n", stream.Config{}},
		{"seed keys", `
spring:
  redis: {host: 127.0.0.1}
redis-stream:
  env-isolation: true
  env: "dev"
  consumer-name: "c1"
  read-count: 20
  block-ms: 500
  max-retry: 5
  autoclaim:
    min-idle-ms: 1000
    interval-ms: 200
  trim:
    maxlen: 50000
    interval-ms: 10000
`, stream.Config{EnvIsolation: true, Env: "dev", ConsumerName: "c1", ReadCount: 20, BlockTimeout: 500 * time.Millisecond, MaxDeliveries: 5,
			Autoclaim: stream.AutoclaimConfig{MinIdle: 1000 * time.Millisecond, Interval: 200 * time.Millisecond},
			Trim:      stream.TrimConfig{MaxLen: 50000, Interval: 10000 * time.Millisecond}}},
		{"camelCase and extras", `
redisStream:
  envIsolation: false
  readCount: "7"
  autoclaim: {minIdleMs: 50}
  trim: {maxLen: 9, mode: maxlen}
  deadLetter: {maxLen: -1, maxAgeMs: 86400000}
`, stream.Config{ReadCount: 7, Autoclaim: stream.AutoclaimConfig{MinIdle: 50 * time.Millisecond},
			Trim: stream.TrimConfig{MaxLen: 9, Mode: stream.TrimMaxLen}, DeadLetter: stream.DeadLetterConfig{MaxLen: -1, MaxAge: 86400000 * time.Millisecond}}},
		{"dotted keys", `
redis-stream.read-count: 3
redis-stream:
  autoclaim.interval-ms: 40
  trim.mode: "off"
`, stream.Config{ReadCount: 3, Autoclaim: stream.AutoclaimConfig{Interval: 40 * time.Millisecond}, Trim: stream.TrimConfig{Mode: stream.TrimOff}}},
		{"partitions", `
redis-stream:
  partitions:
    orders: 4
    audit-log: 1
  partition-lease-ms: 5000
`, stream.Config{Partitions: map[string]int{"orders": 4, "audit-log": 1}, PartitionLease: 5 * time.Second}},
		{"priorities", `
redis-stream:
  priorities:
    emails: 3
`, stream.Config{Priorities: map[string]int{"emails": 3}}},
		{"duration strings, as Spring reads them", `
redis-stream:
  block-ms: 1s
  handler-timeout-ms: 1500ms
  shutdown-timeout-ms: PT3S
  consumer-timeout-ms: 2m
`, stream.Config{BlockTimeout: time.Second, HandlerTimeout: 1500 * time.Millisecond, ShutdownTimeout: 3 * time.Second, ConsumerTimeout: 2 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := load(t, tc.yaml, quiet)
			if want := tc.want.WithDefaults(); !reflect.DeepEqual(cfg.Stream, want) {
				t.Errorf("got  %+v\nwant %+v", cfg.Stream, want)
			}
		})
	}
}

func TestStreamSectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bad int", "redis-stream:\n  read-count: ten\n", `config: redis-stream.read-count (line 2): must be an integer, got "ten"`},
		{"negative", "redis-stream:\n  block-ms: -1\n", "config: redis-stream.block-ms (line 2): "},
		{"nested bad duration", "redis-stream:\n  autoclaim:\n    min-idle-ms: 1.5\n", `config: redis-stream.autoclaim.min-idle-ms (line 3): must be a duration such as 500ms, 2s or a whole number of ms, got "1.5"`},
		{"bad bool", "redis-stream:\n  env-isolation: maybe\n", `config: redis-stream.env-isolation (line 2): must be true or false, got "maybe"`},
		{"unknown key", "redis-stream:\n  raed-count: 1\n", "config: redis-stream.raed-count (line 2): unknown key (did you mean read-count?)"},
		{"unknown nested key", "redis-stream:\n  trim:\n    max: 1\n", "config: redis-stream.trim.max (line 3): unknown key"},
		{"bad mode", "redis-stream:\n  trim: {mode: sometimes}\n", "config: redis-stream.trim.mode (line 2): "},
		{"mapping expected", "redis-stream:\n  autoclaim: 5\n", `config: redis-stream.autoclaim (line 2): must be a mapping, got "5"`},
		{"scalar expected", "redis-stream:\n  read-count: [1]\n", "config: redis-stream.read-count (line 2): must be an integer, got a list"},
		{"section not a mapping", "redis-stream: 5\n", `config: redis-stream (line 1): must be a mapping, got "5"`},
		{"out of range for int", "redis-stream:\n  max-retry: 99999999999999999999\n", "config: redis-stream.max-retry (line 2): is out of range"},
		{"out of range by Validate", "redis-stream:\n  max-retry: 99999999999\n", "config: redis-stream.max-retry (line 2): "},
		{"duration overflow", "redis-stream:\n  block-ms: 9223372036855\n", "config: redis-stream.block-ms (line 2): is out of range"},
		{"not yaml", "redis-stream: [\n", "config: yaml: line 1:"},
		{"partitions not a mapping", "redis-stream:\n  partitions: 4\n", `config: redis-stream.partitions (line 2): must be a mapping, got "4"`},
		{"partition count not an integer", "redis-stream:\n  partitions:\n    orders: many\n", `config: redis-stream.partitions.orders (line 3): must be an integer, got "many"`},
		{"partition count out of range", "redis-stream:\n  partitions:\n    orders: 5000\n", "config: redis-stream.partitions.orders (line 3): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load([]byte(tc.yaml), quiet)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant    %s...", err, tc.want)
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("error %v does not match ErrInvalidConfig", err)
			}
		})
	}
	// A Validate error still unwraps to stream's own error.
	_, err := config.Load([]byte("redis-stream:\n  read-count: -1\n"), quiet)
	var ce *stream.ConfigError
	if !errors.As(err, &ce) || ce.Path != "redis-stream.read-count" {
		t.Errorf("error %v does not unwrap to the *stream.ConfigError", err)
	}
}

func TestCacheSection(t *testing.T) {
	seed := `
redis-cache:
  key-prefix: "cache:"
  env-isolation: false
  env: ""
  default-ttl-seconds: 3600
  null-ttl-seconds: 60
  jitter-ratio: 0.1
  sliding-expire-enabled: false
  breakdown:
    enabled: true
    lock-ttl-ms: 10000
    wait-timeout-ms: 3000
    wait-interval-ms: 50
`
	for _, tc := range []struct{ name, doc string }{
		{"seed block", seed},
		{"empty document", ""},
		{"no redis-cache key", "spring:\n  redis:\n    port: 6379\n"},
		{"empty redis-cache", "redis-cache:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := load(t, tc.doc, quiet).Cache, cache.DefaultConfig(); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}

	want := cache.DefaultConfig()
	want.Name = "orders"
	want.KeyPrefix = "app:"
	want.EnvIsolation = true
	want.Env = "prod"
	want.DefaultTTL = 120 * time.Second
	want.NullTTL = 5 * time.Second
	want.JitterRatio = 0
	want.SlidingExpiration = true
	want.Breakdown = cache.BreakdownConfig{Enabled: false, LockTTL: 2 * time.Second, WaitTimeout: 0, WaitInterval: 10 * time.Millisecond}
	want.ClientSideCache = cache.ClientSideCacheConfig{Enabled: true, TTL: 1500 * time.Millisecond, MaxStaleness: 2 * time.Second, Heartbeat: 500 * time.Millisecond}
	for _, tc := range []struct{ name, doc string }{
		{"kebab-case", `
redis-cache:
  name: orders
  key-prefix: "app:"
  env-isolation: true
  env: prod
  default-ttl-seconds: 120
  null-ttl-seconds: 5
  jitter-ratio: 0
  sliding-expire-enabled: true
  breakdown:
    enabled: false
    lock-ttl-ms: 2000
    wait-timeout-ms: 0
    wait-interval-ms: 10
  client-side-cache:
    enabled: true
    ttl-ms: 1500
    max-staleness-ms: 2000
    heartbeat-ms: 500
`},
		{"camelCase and duration strings", `
redisCache:
  name: orders
  keyPrefix: "app:"
  envIsolation: true
  env: prod
  defaultTtlSeconds: 2m
  nullTtlSeconds: 5
  jitterRatio: 0.0
  slidingExpireEnabled: true
  breakdown:
    enabled: false
    lockTtlMs: 2s
    waitTimeoutMs: 0
    waitIntervalMs: 10
  clientSideCache: {enabled: true, ttlMs: 1500, maxStalenessMs: 2s, heartbeatMs: 500}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := load(t, tc.doc, quiet).Cache; !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestCacheSectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      string // the whole error
	}{
		{"zero ttl", "redis-cache:\n  default-ttl-seconds: 0\n", "config: redis-cache.default-ttl-seconds (line 2): must be positive, got 0s"},
		{"negative null ttl", "redis-cache:\n  null-ttl-seconds: -5\n", "config: redis-cache.null-ttl-seconds (line 2): must be positive, got -5s"},
		{"jitter 1", "redis-cache:\n  jitter-ratio: 1\n", "config: redis-cache.jitter-ratio (line 2): must be in [0, 1), got 1"},
		{"jitter negative camel", "redis-cache:\n  jitterRatio: -0.5\n", "config: redis-cache.jitter-ratio (line 2): must be in [0, 1), got -0.5"},
		{"jitter text", "redis-cache:\n  jitter-ratio: lots\n", `config: redis-cache.jitter-ratio (line 2): must be a finite number, got "lots"`},
		{"ttl text", "redis-cache:\n  default-ttl-seconds: soon\n", `config: redis-cache.default-ttl-seconds (line 2): must be a duration such as 500ms, 2s or a whole number of s, got "soon"`},
		{"bool text", "redis-cache:\n  breakdown:\n    enabled: maybe\n", `config: redis-cache.breakdown.enabled (line 3): must be true or false, got "maybe"`},
		{"zero lock ttl", "redis-cache:\n  breakdown:\n    lock-ttl-ms: 0\n", "config: redis-cache.breakdown.lock-ttl-ms (line 3): must be positive, got 0s"},
		{"negative wait", "redis-cache:\n  breakdown:\n    wait-timeout-ms: -1\n", "config: redis-cache.breakdown.wait-timeout-ms (line 3): must not be negative, got -1ms"},
		{"zero interval", "redis-cache:\n  breakdown:\n    wait-interval-ms: 0\n", "config: redis-cache.breakdown.wait-interval-ms (line 3): must be at least 1ms, got 0s"},
		{"huge ttl", "redis-cache:\n  default-ttl-seconds: 99999999999999\n", "config: redis-cache.default-ttl-seconds (line 2): is out of range: 99999999999999s"},
		{"unknown key", "redis-cache:\n  default-ttl: 5\n", "config: redis-cache.default-ttl (line 2): unknown key (did you mean default-ttl-seconds?)"},
		{"unknown nested key", "redis-cache:\n  breakdown:\n    lock-ttl: 5\n", "config: redis-cache.breakdown.lock-ttl (line 3): unknown key (did you mean lock-ttl-ms?)"},
		{"duplicate spelling", "redis-cache:\n  key-prefix: a\n  keyPrefix: b\n", `config: redis-cache.key-prefix (line 3): is set twice ("keyPrefix" here and "key-prefix" at line 2)`},
		{"list for a value", "redis-cache:\n  env: [a, b]\n", "config: redis-cache.env (line 2): must be a string, got a list"},
		{"value for a mapping", "redis-cache:\n  breakdown: true\n", `config: redis-cache.breakdown (line 2): must be a mapping, got "true"`},
		{"not a mapping", "redis-cache: 5\n", `config: redis-cache (line 1): must be a mapping, got "5"`},
		{"document is a list", "- a\n", "config: (document) (line 1): must be a mapping of settings"},
		{"empty name", "redis-cache:\n  name: \"\"\n", "config: redis-cache.name (line 2): must not be empty"},
		{"default left invalid by another key", "redis-cache:\n  client-side-cache:\n    enabled: true\n    ttl-ms: 0\n", "config: redis-cache.client-side-cache.ttl-ms (line 4): must be at least 1ms, got 0s"},
		{"negative max staleness", "redis-cache:\n  client-side-cache:\n    enabled: true\n    max-staleness-ms: -1\n", "config: redis-cache.client-side-cache.max-staleness-ms (line 4): must not be negative (0: the default, 3s), got -1ms"},
		{"heartbeat past max staleness", "redis-cache:\n  client-side-cache:\n    enabled: true\n    max-staleness-ms: 500\n    heartbeat-ms: 500\n", "config: redis-cache.client-side-cache.max-staleness-ms (line 4): must be more than the heartbeat interval (heartbeat-ms: 500ms), got 500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load([]byte(tc.doc), quiet)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v\nwant    %s", err, tc.want)
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("err = %v, want it to match redstream.ErrInvalidConfig", err)
			}
		})
	}
	_, err := config.Load([]byte("redis-cache:\n  jitter-ratio: 2\n"), quiet)
	var ce *cache.ConfigError
	if !errors.As(err, &ce) || ce.Field != "JitterRatio" {
		t.Errorf("error %v does not unwrap to the *cache.ConfigError", err)
	}
}
