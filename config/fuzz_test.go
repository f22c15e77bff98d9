package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
)

// The fuzz targets load arbitrary input and check that nothing panics, hangs or blows up,
// that every error is a configuration error, and that whatever loads is usable: limiters
// answer, the stream and cache settings pass their own Validate, the Redis settings give
// a client option. Inputs the issue tracker found (an endless loop on "a[b", alias bombs)
// are kept in testdata/fuzz/<Target>/.

var fuzzEnv = map[string]string{"APP_ENV": "prod", "REDIS_HOST": "127.0.0.1", "EMPTY": "", "API_LIMIT": "7"}

func fuzzOptions(lenient bool) config.Options {
	o := quiet
	o.Lenient = lenient
	o.Getenv = func(k string) (string, bool) { v, ok := fuzzEnv[k]; return v, ok }
	return o
}

// checkLoad checks the outcome of one load.
func checkLoad(t *testing.T, cfg *config.Config, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Fatalf("error %q (%T) does not match ErrInvalidConfig", err, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "config: ") || len(msg) > 4096 {
			t.Fatalf("error message %.200q... (%d bytes): want a short one starting with \"config: \"", msg, len(msg))
		}
		return
	}
	rl := cfg.RateLimit
	if rl == nil || rl.Registry == nil || rl.Default == nil {
		t.Fatalf("RateLimit %+v has a nil part", rl)
	}
	ctx := context.Background()
	if _, err := rl.Default.AllowN(ctx, "k", t0, 1); err != nil && !errors.Is(err, config.ErrNoDefault) {
		t.Fatalf("Default.AllowAt: %v", err)
	}
	n := 0
	for _, name := range rl.Registry.Names() {
		l, _ := rl.Registry.Get(name)
		if _, err := l.AllowN(ctx, "k", t0, 1); err != nil {
			t.Fatalf("limiter %q: %v", name, err)
		}
		if n++; n == 4 {
			break
		}
	}
	if err := cfg.Stream.Validate(); err != nil {
		t.Fatalf("Stream does not validate: %v", err)
	}
	c := cfg.Cache
	if err := c.Validate(); err != nil {
		t.Fatalf("Cache does not validate: %v", err)
	}
	if cfg.Redis.Set {
		if _, err := cfg.Redis.ClientOption(); err != nil {
			t.Fatalf("ClientOption of loaded settings: %v", err)
		}
	}
}

func loadBoth(t *testing.T, data []byte, properties bool) {
	t.Helper()
	start := time.Now()
	defer func() {
		// Linear in the input: a few KB load in milliseconds. The margin absorbs a loaded
		// machine; a slow input is kept by the fuzzer as a failure.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("loading %d bytes took %v", len(data), d)
		}
	}()
	for _, lenient := range []bool{false, true} {
		var (
			cfg *config.Config
			err error
		)
		if properties {
			cfg, err = config.LoadProperties(data, fuzzOptions(lenient))
		} else {
			cfg, err = config.Load(data, fuzzOptions(lenient))
		}
		checkLoad(t, cfg, err)
	}
}

// seeds adds the YAML files of testdata and the Spring Boot example.
func seeds(f *testing.F, glob string) {
	files, _ := filepath.Glob(glob)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// indent puts data under a section heading, every line indented.
func indent(head string, data []byte, by string) []byte {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return []byte(head + strings.Join(lines, "\n"))
}

// FuzzLoad loads whole YAML files.
func FuzzLoad(f *testing.F) {
	seeds(f, "testdata/*.yaml")
	seeds(f, "testdata/spring/*.yml")
	seeds(f, "testdata/hostile/*.yaml")
	f.Add([]byte("a[b: 1\n"))
	f.Add([]byte("redis-streaming.ratelimit.policies.[api.v1.limit: 5\n"))
	f.Add([]byte("x: &x {a: 1}\ny: {<<: [*x, *x], b: 2}\n---\nspring.config.activate.on-profile: prod\ny.b: 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) { loadBoth(t, data, false) })
}

// FuzzLoadRateLimit loads redis-streaming.ratelimit sections.
func FuzzLoadRateLimit(f *testing.F) {
	for _, s := range []string{
		"enabled: true\ndefault-name: api\npolicies:\n  api: {algorithm: sliding, window-ms: 1000, limit: 10}\n",
		"enabled: true\npolicies:\n  a: {algorithm: token-bucket, capacity: 5, rate-per-second: 1}\n  b: {algorithm: leaky-bucket, capacity: 2, rate-per-second: 0.5}\n",
		"enabled: true\nbackend: redis\nfailure-policy: fallback\npolicies:\n  login:\n    limits:\n      m: {algorithm: fixed, window-ms: 60000, limit: 5}\n      d: {algorithm: sliding-counter, window-ms: 86400000, limit: 20}\n",
		"enabled: true\nwindow-ms: 500\nlimit: 3\ndefault-name: only\nkey-prefix: x\n",
		"policies:\n  api: {algorithm: gcra, limt: 10}\n",
		"policies.[api.v1.limit: 5\n",
		"enabled: true\nbackend: redis\ntimeout-ms: 50\nbreaker:\n  failures: -1\n  error-rate: 0.25\n  min-calls: 40\n  window-ms: 30000\n  cool-down-ms: 500\n  probes: 2\npolicies:\n  api: {algorithm: token-bucket, capacity: 5, rate-per-second: 1, java-compatible: true}\n  off: {breaker: {disabled: true}, local-denials: false, timeout-ms: -1}\n",
		"enabled: true\njava-compatible: true\npolicies:\n  a: {algorithm: fixed, backend: redis}\n  b: {backend: memory, breaker: {disabled: true, probes: 0}}\n",
		"enabled: true\nbackend: redis\nbreaker: {error-rate: .nan, failures: 0}\ntimeout-ms: 9223372036855\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		loadBoth(t, indent("redis-streaming:\n  ratelimit:\n", data, "    "), false)
	})
}

// FuzzLoadStream loads redis-stream sections.
func FuzzLoadStream(f *testing.F) {
	for _, s := range []string{
		"read-count: 20\nblock-ms: 500\nmax-retry: 5\nautoclaim:\n  min-idle-ms: 1000\n  interval-ms: 200\ntrim:\n  maxlen: 50000\n  interval-ms: 10000\n  mode: maxlen\n",
		"envIsolation: true\nenv: dev\nhandler-timeout-ms: 1s\nshutdown-timeout-ms: PT3S\nconsumer-timeout-ms: -1\ndead-letter: {maxlen: -1, max-age-ms: 86400000}\n",
		"block-ms: 9223372036855\n",
		"partitions:\n  orders: 4\n  \"{x}\": 2\n  a.b: 3\npartition-lease-ms: 5000\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		loadBoth(t, indent("redis-stream:\n", data, "  "), false)
	})
}

// FuzzLoadCache loads redis-cache sections.
func FuzzLoadCache(f *testing.F) {
	for _, s := range []string{
		"key-prefix: \"cache:\"\ndefault-ttl-seconds: 3600\nnull-ttl-seconds: 60\njitter-ratio: 0.1\nbreakdown:\n  enabled: true\n  lock-ttl-ms: 10000\n  wait-timeout-ms: 3000\n  wait-interval-ms: 50\n",
		"clientSideCache: {enabled: true, ttlMs: 1500}\ndefaultTtlSeconds: 2m\nname: orders\n",
		"default-ttl-seconds: 99999999999999\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		loadBoth(t, indent("redis-cache:\n", data, "  "), false)
	})
}

// FuzzLoadRedis loads spring.data.redis sections and builds their client options.
func FuzzLoadRedis(f *testing.F) {
	for _, s := range []string{
		"host: localhost\nport: 6379\nusername: app\npassword: s3cret\ndatabase: 2\nssl:\n  enabled: true\ntimeout: 2s\nclient-name: orders\n",
		"cluster:\n  nodes: 127.0.0.1:7000,127.0.0.1:7001\n",
		"sentinel:\n  master: mymaster\n  nodes: [10.0.0.1:26379, 10.0.0.2]\n",
		"url: rediss://user:pw@example.com:6380/3\nconnect-timeout: 500\nlettuce:\n  pool:\n    max-active: 8\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		loadBoth(t, indent("spring:\n  data:\n    redis:\n", data, "      "), false)
	})
}

// FuzzLoadProperties loads .properties files.
func FuzzLoadProperties(f *testing.F) {
	seeds(f, "testdata/spring/*.properties")
	for _, s := range []string{
		"redis-streaming.ratelimit.enabled=true\nredis-streaming.ratelimit.policies.api.limit=5\nredis-streaming.ratelimit.default-name=api\n",
		"a[b=1\n",
		"key\\\n  continued = value\\u0041\n#---\nspring.config.activate.on-profile=prod\nredis-cache.name=x\n",
		"spring.data.redis.cluster.nodes[0]=h1:7000\nspring.data.redis.cluster.nodes[1]=h2:7001\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { loadBoth(t, data, true) })
}

// FuzzLoadPlaceholders loads files whose values hold ${...} placeholders and profile
// conditions, with a fixed environment and the profiles given by the input.
func FuzzLoadPlaceholders(f *testing.F) {
	for _, s := range []string{
		"app.name: orders\nredis-cache.key-prefix: \"${app.name}:${APP_ENV:dev}:\"\n",
		"a0: x\na1: ${a0}${a0}\na2: ${a1}${a1}\n",
		"a: ${b}\nb: ${a}\n",
		"a: ${${APP_ENV}.host:${REDIS_HOST}}\nprod.host: h\n",
		"redis-streaming.ratelimit: {enabled: true, limit: \"${API_LIMIT:10}\"}\n",
		"spring.profiles.active: ${APP_ENV:dev}\n---\nspring.config.activate.on-profile: \"prod & !eu\"\nredis-cache.name: p\n",
	} {
		f.Add([]byte(s), "prod,eu")
	}
	f.Fuzz(func(t *testing.T, data []byte, profiles string) {
		for _, lenient := range []bool{false, true} {
			o := fuzzOptions(lenient)
			o.Profiles = strings.Split(profiles, ",")
			cfg, err := config.Load(data, o)
			checkLoad(t, cfg, err)
		}
	})
}
