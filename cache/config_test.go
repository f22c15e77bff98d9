package cache

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/redstream-go/redstream"
)

func TestLoadConfigSeedDefaults(t *testing.T) {
	// The seed's block, verbatim.
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
			got, err := LoadConfig([]byte(tc.doc))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if want := DefaultConfig(); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoadConfigSpellings(t *testing.T) {
	want := DefaultConfig()
	want.Name = "orders"
	want.KeyPrefix = "app:"
	want.EnvIsolation = true
	want.Env = "prod"
	want.DefaultTTL = 120 * time.Second
	want.NullTTL = 5 * time.Second
	want.JitterRatio = 0
	want.SlidingExpiration = true
	want.Breakdown = BreakdownConfig{Enabled: false, LockTTL: 2 * time.Second, WaitTimeout: 0, WaitInterval: 10 * time.Millisecond}
	want.ClientSideCache = ClientSideCacheConfig{Enabled: true, TTL: 1500 * time.Millisecond}
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
`},
		{"camelCase", `
redisCache:
  name: orders
  keyPrefix: "app:"
  envIsolation: true
  env: prod
  defaultTtlSeconds: 120
  nullTtlSeconds: 5
  jitterRatio: 0.0
  slidingExpireEnabled: true
  breakdown:
    enabled: false
    lockTtlMs: 2000
    waitTimeoutMs: 0
    waitIntervalMs: 10
  clientSideCache: {enabled: true, ttlMs: 1500}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadConfig([]byte(tc.doc))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      string // substring of the error: the key path and the problem
	}{
		{"zero ttl", "redis-cache:\n  default-ttl-seconds: 0\n", "redis-cache.default-ttl-seconds (line 2): must be positive, got 0"},
		{"negative null ttl", "redis-cache:\n  null-ttl-seconds: -5\n", "redis-cache.null-ttl-seconds (line 2): must be positive"},
		{"jitter 1", "redis-cache:\n  jitter-ratio: 1\n", "redis-cache.jitter-ratio (line 2): must be in [0, 1), got 1"},
		{"jitter negative", "redis-cache:\n  jitterRatio: -0.5\n", "redis-cache.jitterRatio (line 2): must be in [0, 1)"},
		{"jitter text", "redis-cache:\n  jitter-ratio: lots\n", `redis-cache.jitter-ratio (line 2): want a number, got "lots"`},
		{"ttl text", "redis-cache:\n  default-ttl-seconds: 1h\n", `redis-cache.default-ttl-seconds (line 2): want an integer, got "1h"`},
		{"ttl float", "redis-cache:\n  default-ttl-seconds: 1.5\n", `want an integer, got "1.5"`},
		{"bool text", "redis-cache:\n  breakdown:\n    enabled: maybe\n", `redis-cache.breakdown.enabled (line 3): want true or false, got "maybe"`},
		{"zero lock ttl", "redis-cache:\n  breakdown:\n    lock-ttl-ms: 0\n", "redis-cache.breakdown.lock-ttl-ms (line 3): must be positive"},
		{"negative wait", "redis-cache:\n  breakdown:\n    wait-timeout-ms: -1\n", "redis-cache.breakdown.wait-timeout-ms (line 3): must not be negative"},
		{"zero interval", "redis-cache:\n  breakdown:\n    wait-interval-ms: 0\n", "redis-cache.breakdown.wait-interval-ms (line 3): must be positive"},
		{"huge ttl", "redis-cache:\n  default-ttl-seconds: 99999999999999\n", "redis-cache.default-ttl-seconds (line 2): too large"},
		{"unknown key", "redis-cache:\n  default-ttl: 5\n", "redis-cache.default-ttl (line 2): unknown key"},
		{"unknown nested key", "redis-cache:\n  breakdown:\n    lock-ttl: 5\n", "redis-cache.breakdown.lock-ttl (line 3): unknown key"},
		{"duplicate spelling", "redis-cache:\n  key-prefix: a\n  keyPrefix: b\n", "redis-cache.keyPrefix (line 3): same key as redis-cache.key-prefix"},
		{"list for a value", "redis-cache:\n  env: [a, b]\n", "redis-cache.env (line 2): want a single value, got a list"},
		{"value for a mapping", "redis-cache:\n  breakdown: true\n", "redis-cache.breakdown (line 2): want a mapping"},
		{"not a mapping", "redis-cache: 5\n", "redis-cache (line 1): want a mapping"},
		{"document is a list", "- a\n", "the document must be a mapping"},
		{"bad yaml", "redis-cache: [\n", "cache: config:"},
		{"empty name", "redis-cache:\n  name: \"\"\n", "Name (redis-cache.name) must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tc.doc))
			if err == nil {
				t.Fatal("LoadConfig accepted it")
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("err = %v, want it to wrap redstream.ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cache: ") {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigEmbedsInLargerStruct(t *testing.T) {
	var app struct {
		Cache Config `yaml:"redis-cache"`
		Other string `yaml:"other"`
	}
	app.Cache = DefaultConfig()
	app.Cache.Codec = JSON
	doc := "other: x\nredis-cache:\n  null-ttl-seconds: 7\n  breakdown:\n    wait-interval-ms: 5\n"
	if err := yaml.Unmarshal([]byte(doc), &app); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Codec = JSON
	want.NullTTL = 7 * time.Second
	want.Breakdown.WaitInterval = 5 * time.Millisecond
	if !reflect.DeepEqual(app.Cache, want) || app.Other != "x" {
		t.Errorf("got %+v", app.Cache)
	}
	if err := yaml.Unmarshal([]byte("redis-cache:\n  jitter-ratio: 2\n"), &app); err == nil || !strings.Contains(err.Error(), "jitter-ratio") {
		t.Errorf("embedded decode error = %v, want one naming jitter-ratio", err)
	}
}
