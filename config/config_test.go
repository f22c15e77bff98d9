package config_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		// A closed rueidis cluster client leaves a goroutine sleeping out a 5s refresh delay.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// logBuffer is a concurrency-safe buffer for a slog text handler.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func logger() (*slog.Logger, *logBuffer) {
	var b logBuffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

func load(t *testing.T, doc string, opts config.Options) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(doc), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// engine returns the engine limiter under the Named (and Multi) wrappers.
func engine(t *testing.T, l redstream.Limiter) redstream.Limiter {
	t.Helper()
	for {
		u, ok := l.(interface{ Unwrap() redstream.Limiter })
		if !ok {
			return l
		}
		l = u.Unwrap()
	}
}

// admitted counts how many of n requests at one instant the limiter admits.
func admitted(t *testing.T, l redstream.Limiter, key string, at time.Time, n int) int {
	t.Helper()
	got := 0
	for range n {
		d, err := l.AllowN(context.Background(), key, at, 1)
		if err != nil {
			t.Fatalf("AllowAt: %v", err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}

var t0 = time.Unix(1_800_000_000, 0)

func checkSeedSettings(t *testing.T, s config.RateLimitSettings) {
	t.Helper()
	if !s.Enabled || s.Backend != "redis" || s.DefaultName != "api1" || len(s.Policies) != 2 {
		t.Fatalf("settings = %+v", s)
	}
	a1, a2 := s.Policies[0], s.Policies[1]
	if a1.Name != "api1" || a1.Algorithm != redstream.AlgorithmSlidingWindow || a1.Window != time.Second || a1.Limit != 10 || a1.Backend != "redis" {
		t.Errorf("api1 = %+v", a1)
	}
	if a2.Name != "api2" || a2.Algorithm != redstream.AlgorithmTokenBucket || a2.Capacity != 100 || a2.RatePerSecond != 50 {
		t.Errorf("api2 = %+v", a2)
	}
}

func TestSeedExampleWithoutRedis(t *testing.T) {
	for _, file := range []string{"seed.yaml", "relaxed.yaml"} {
		t.Run(file, func(t *testing.T) {
			log, logs := logger()
			c := load(t, readFile(t, file), config.Options{Logger: log})
			rl := c.RateLimit
			checkSeedSettings(t, rl.Settings)
			if got := strings.Count(logs.String(), "no Redis client was given (Options.Redis)"); got != 2 {
				t.Errorf("%d fallback warnings, want 2:\n%s", got, logs)
			}
			if fmt.Sprint(rl.Registry.Names()) != "[api1 api2]" || rl.DefaultName != "api1" {
				t.Errorf("registry %v, default %q", rl.Registry.Names(), rl.DefaultName)
			}
			api1, _ := rl.Registry.Get("api1")
			if rl.Default != api1 {
				t.Errorf("Default is not the api1 limiter")
			}
			if _, ok := engine(t, api1).(*memory.Limiter); !ok {
				t.Errorf("api1 engine = %T, want *memory.Limiter", engine(t, api1))
			}
			if n := admitted(t, api1, "req", t0, 15); n != 10 {
				t.Errorf("api1 admitted %d of 15, want 10", n)
			}
			api2, _ := rl.Registry.Get("api2")
			if n := admitted(t, api2, "req", t0, 120); n != 100 {
				t.Errorf("api2 admitted %d of 120, want the burst of 100", n)
			}
			if n := admitted(t, api2, "req", t0.Add(time.Second), 60); n != 50 {
				t.Errorf("api2 admitted %d one second later, want 50", n)
			}
		})
	}
}

func TestSeedExampleOnRedis(t *testing.T) {
	client := redistest.Client(t)
	log, logs := logger()
	c := load(t, readFile(t, "seed.yaml"), config.Options{Redis: client, Logger: log})
	checkSeedSettings(t, c.RateLimit.Settings)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("unexpected warnings:\n%s", logs)
	}
	api1, _ := c.RateLimit.Registry.Get("api1")
	rb, ok := engine(t, api1).(*redisbackend.Limiter)
	if !ok {
		t.Fatalf("api1 engine = %T, want *redisbackend.Limiter", engine(t, api1))
	}
	if rb.KeyPrefix() != "streaming:rl:api1" {
		t.Errorf("api1 key prefix = %q", rb.KeyPrefix())
	}
	key := fmt.Sprintf("req-%d", time.Now().UnixNano())
	if n := admitted(t, api1, key, t0, 15); n != 10 {
		t.Errorf("api1 on Redis admitted %d of 15, want 10", n)
	}
	// The registry's limiters are Named: the seed's metrics move.
	allowed, denied, _ := metrics.RateLimitCounters("api1")
	if allowed.Get() < 10 || denied.Get() < 5 {
		t.Errorf("api1 counters allowed=%d denied=%d", allowed.Get(), denied.Get())
	}
}

func TestFullExample(t *testing.T) {
	client := redistest.Client(t)
	log, logs := logger()
	c := load(t, readFile(t, "full.yaml"), config.Options{Redis: client, Logger: log})
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("unexpected warnings:\n%s", logs)
	}
	rl := c.RateLimit
	if fmt.Sprint(rl.Registry.Names()) != "[api login search shaper tenants uploads]" || rl.DefaultName != "api" {
		t.Fatalf("registry %v, default %q", rl.Registry.Names(), rl.DefaultName)
	}
	s := rl.Settings
	if s.FailurePolicy != redstream.FailFallback || s.Policies[3].FailurePolicy != redstream.FailOpen || s.Policies[1].FailurePolicy != redstream.FailFallback {
		t.Errorf("failure policies: section %v, search %v, uploads %v", s.FailurePolicy, s.Policies[3].FailurePolicy, s.Policies[1].FailurePolicy)
	}
	if r := s.Redis; !reflect.DeepEqual(r, defaultRedis) {
		t.Errorf("section Redis keys %+v, want the defaults written out", r)
	}
	if r := s.Policies[1].Redis; !r.JavaCompatible || r.Timeout != 100*time.Millisecond {
		t.Errorf("uploads Redis keys %+v, want java-compatible", r)
	}
	if r := s.Policies[3].Redis; r.Timeout != 50*time.Millisecond || r.Breaker.Failures != -1 || r.Breaker.ErrorRate != 0.5 || r.JavaCompatible {
		t.Errorf("search Redis keys %+v, want timeout-ms 50 and failures -1", r)
	}
	if p := s.Policies[3]; p.Previous != redstream.SlidingCounter(time.Second, 25) || p.Carry != core.CarryProportional {
		t.Errorf("search: previous %+v carry %v, want the sliding counter of 25 and proportional", p.Previous, p.Carry)
	}
	if q := s.Policies[4].Redis.Quota; s.Policies[4].Name != "tenants" || !q.Enabled || q.Duration != 100*time.Millisecond || q.MaxShare != 0.1 {
		t.Errorf("policy %s: quota %+v, want enabled with the section's defaults", s.Policies[4].Name, q)
	}
	if s.Shadow || !s.Policies[3].Shadow || s.Policies[0].Shadow {
		t.Errorf("shadow: section %v, search %v, api %v; want false, true, false", s.Shadow, s.Policies[3].Shadow, s.Policies[0].Shadow)
	}
	wantEngines := map[string]string{
		"api": "*redisbackend.Limiter", "uploads": "*redisbackend.Limiter", "shaper": "*memory.Limiter",
		"search": "*redisbackend.Limiter", "login": "*redisbackend.Limiter", "tenants": "*redisbackend.Limiter",
	}
	for name, want := range wantEngines {
		l, _ := rl.Registry.Get(name)
		if got := fmt.Sprintf("%T", engine(t, l)); got != want {
			t.Errorf("%s engine = %s, want %s", name, got, want)
		}
	}
	login, _ := rl.Registry.Get("login")
	multi, ok := login.(*metrics.NamedLimiter).Unwrap().(interface{ Rules() []redstream.Rule })
	if !ok || len(multi.Rules()) != 2 || multi.Rules()[0].Name != "per-minute" {
		t.Fatalf("login is not a two-rule redstream.Multi limiter: %T", login.(*metrics.NamedLimiter).Unwrap())
	}
	if engine(t, login).(*redisbackend.Limiter).KeyPrefix() != "auth:login" {
		t.Errorf("login key prefix = %q", engine(t, login).(*redisbackend.Limiter).KeyPrefix())
	}
	user := fmt.Sprintf("user-%d", time.Now().UnixNano())
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	got := 0
	for m := range 10 { // 10 minutes, 5 tries each: 5 per minute, 20 per day
		got += admitted(t, login, user, day.Add(time.Duration(m)*time.Minute), 5)
	}
	if got != 20 {
		t.Errorf("login admitted %d over 10 minutes, want the daily 20", got)
	}
	shaper, _ := rl.Registry.Get("shaper")
	d, _ := shaper.AllowN(context.Background(), "k", t0, 1)
	d2, _ := shaper.AllowN(context.Background(), "k", t0, 1)
	if !d.Allowed || !d2.Allowed || d2.Delay != 200*time.Millisecond {
		t.Errorf("leaky bucket shaping: %+v then %+v, want a 200ms delay on the second", d, d2)
	}
}

func TestDefaults(t *testing.T) {
	c := load(t, "redis-streaming:\n  ratelimit:\n    enabled: true\n", config.Options{})
	rl := c.RateLimit
	s := rl.Settings
	if s.Backend != "memory" || s.Window != time.Second || s.Limit != 100 || s.KeyPrefix != "streaming:rl" ||
		s.DefaultName != "default" || s.FailurePolicy != redstream.FailClosed || len(s.Policies) != 0 {
		t.Errorf("defaults = %+v", s)
	}
	if fmt.Sprint(rl.Registry.Names()) != "[default]" || rl.DefaultName != "default" {
		t.Errorf("registry %v, default %q", rl.Registry.Names(), rl.DefaultName)
	}
	if n := admitted(t, rl.Default, "k", t0, 120); n != 100 {
		t.Errorf("default limiter admitted %d of 120, want 100", n)
	}
	if _, ok := engine(t, rl.Default).(*memory.Limiter); !ok {
		t.Errorf("default engine = %T", engine(t, rl.Default))
	}

	single := load(t, "redis-streaming.ratelimit: {enabled: true, window-ms: 500, limit: 3, default-name: only}\n", config.Options{})
	if single.RateLimit.DefaultName != "only" || admitted(t, single.RateLimit.Default, "k", t0, 5) != 3 ||
		admitted(t, single.RateLimit.Default, "k", t0.Add(500*time.Millisecond), 5) != 3 {
		t.Errorf("top-level window-ms/limit are not used for the single limiter")
	}

	for name, doc := range map[string]string{
		"empty file":   "",
		"disabled":     "redis-streaming:\n  ratelimit:\n    enabled: false\n",
		"other keys":   "spring:\n  redis:\n    host: 127.0.0.1\n",
		"null section": "redis-streaming:\n  ratelimit:\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := load(t, doc, quiet)
			if c.RateLimit.Settings.Enabled || len(c.RateLimit.Registry.Names()) != 0 || c.RateLimit.DefaultName != "" {
				t.Errorf("a disabled section built %v, %q", c.RateLimit.Registry.Names(), c.RateLimit.DefaultName)
			}
			// Rate limiting is off: Default admits everything and never panics.
			if n := admitted(t, c.RateLimit.Default, "k", t0, 1000); n != 1000 {
				t.Errorf("disabled Default admitted %d of 1000, want all", n)
			}
			if _, err := c.RateLimit.Default.AllowN(context.Background(), "", time.Time{}, 1); !errors.Is(err, redstream.ErrEmptyKey) {
				t.Errorf("disabled Default with an empty key: %v, want ErrEmptyKey", err)
			}
		})
	}
}

// TestStrictAndLenient: each silent degradation of the Java starter is an error naming the
// key and its line by default, and, with Options.Lenient, a warning saying what is used
// instead.
func TestStrictAndLenient(t *testing.T) {
	head := "redis-streaming:\n  ratelimit:\n"
	tests := []struct {
		name, doc string
		strict    string // the whole error
		warning   string // a substring of the lenient warning
		check     func(t *testing.T, rl *config.RateLimit)
	}{
		{
			"unknown algorithm", head + "    enabled: true\n    default-name: api\n    policies:\n      api:\n        algorithm: gcra\n        limit: 5\n",
			`config: redis-streaming.ratelimit.policies.api.algorithm (line 7): unknown algorithm "gcra"; want sliding, token-bucket, leaky-bucket, fixed or sliding-counter`,
			`msg="config: unknown algorithm \"gcra\"; using sliding (window-ms 1000, limit 5)" key=redis-streaming.ratelimit.policies.api.algorithm line=7`,
			func(t *testing.T, rl *config.RateLimit) {
				if a := rl.Settings.Policies[0].Algorithm; a != redstream.AlgorithmSlidingWindow {
					t.Errorf("algorithm = %v, want sliding", a)
				}
			},
		},
		{
			"misspelled key", head + "    enabled: true\n    policies:\n      default:\n        limt: 10\n",
			"config: redis-streaming.ratelimit.policies.default.limt (line 6): unknown key (did you mean limit?)",
			`msg="config: unknown key (did you mean limit?); ignored" key=redis-streaming.ratelimit.policies.default.limt line=6`,
			func(t *testing.T, rl *config.RateLimit) {
				if l := rl.Settings.Policies[0].Limit; l != 100 {
					t.Errorf("limit = %d, want the default 100", l)
				}
			},
		},
		{
			"unknown section key", head + "    enabled: true\n    defualt-name: x\n",
			"config: redis-streaming.ratelimit.defualt-name (line 4): unknown key (did you mean default-name?)",
			"unknown key (did you mean default-name?); ignored",
			nil,
		},
		{
			"misspelled default-name", head + "    enabled: true\n    default-name: ap1\n    policies:\n      zeta: {limit: 2}\n      api1: {limit: 4}\n",
			`config: redis-streaming.ratelimit.default-name (line 4): default-name "ap1" names no policy; set it to one of: api1, zeta`,
			`default-name \"ap1\" names no policy; using \"api1\", the first policy by name`,
			func(t *testing.T, rl *config.RateLimit) {
				if rl.DefaultName != "api1" {
					t.Errorf("default = %q, want api1", rl.DefaultName)
				}
			},
		},
		{
			"policies without enabled", head + "    policies:\n      api: {limit: 1}\n",
			"config: redis-streaming.ratelimit.policies (line 3): policies are set but enabled is missing, so none would be built; set enabled: true, or remove the policies",
			"policies are set but enabled is missing; no limiter is built and Default admits every request",
			func(t *testing.T, rl *config.RateLimit) {
				if len(rl.Registry.Names()) != 0 || admitted(t, rl.Default, "k", t0, 5) != 5 {
					t.Errorf("a disabled section built %v or its Default limits", rl.Registry.Names())
				}
			},
		},
		{
			"policies with enabled false", head + "    enabled: false\n    policies:\n      api: {limit: 1}\n",
			"config: redis-streaming.ratelimit.policies (line 4): policies are set but enabled is false (line 3), so none would be built; set enabled: true, or remove the policies",
			"policies are set but enabled is false (line 3)",
			nil,
		},
		{
			"bucket key on a window", head + "    enabled: true\n    default-name: api\n    policies:\n      api: {algorithm: fixed, capacity: 5}\n",
			"config: redis-streaming.ratelimit.policies.api.capacity (line 6): does not apply to the fixed algorithm, which uses window-ms and limit",
			"does not apply to the fixed algorithm; ignored",
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load([]byte(tt.doc), quiet)
			if err == nil || err.Error() != tt.strict {
				t.Fatalf("strict error = %v\nwant           %s", err, tt.strict)
			}
			var ye *yamlx.Error
			if !errors.As(err, &ye) || ye.Line == 0 || !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("error %#v: want a *yamlx.Error with a line, matching ErrInvalidConfig", err)
			}
			log, logs := logger()
			c, err := config.Load([]byte(tt.doc), config.Options{Lenient: true, Logger: log})
			if err != nil {
				t.Fatalf("lenient Load: %v", err)
			}
			if !strings.Contains(logs.String(), tt.warning) {
				t.Errorf("lenient warnings lack %q:\n%s", tt.warning, logs)
			}
			if c.RateLimit.Default == nil {
				t.Fatal("lenient Default is nil")
			}
			if _, err := c.RateLimit.Default.AllowN(context.Background(), "k", time.Time{}, 1); err != nil {
				t.Errorf("lenient Default.Allow: %v", err)
			}
			if tt.check != nil {
				tt.check(t, c.RateLimit)
			}
		})
	}
}

// TestNoDefaultName: policies without default-name and without a "default" policy are a
// valid file (limiters are looked up by name); Default returns ErrNoDefault instead of
// picking one silently.
func TestNoDefaultName(t *testing.T) {
	rl := load(t, "redis-streaming.ratelimit:\n  enabled: true\n  policies:\n    b: {limit: 1}\n    a: {limit: 2}\n", quiet).RateLimit
	if _, err := rl.Default.AllowN(context.Background(), "k", time.Time{}, 1); !errors.Is(err, config.ErrNoDefault) || !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Default.Allow error = %v, want ErrNoDefault", err)
	}
	if rl.DefaultName != "" || fmt.Sprint(rl.Registry.Names()) != "[a b]" {
		t.Errorf("default %q, registry %v", rl.DefaultName, rl.Registry.Names())
	}
	log, logs := logger()
	rl = load(t, "redis-streaming.ratelimit:\n  enabled: true\n  policies:\n    b: {limit: 1}\n    a: {limit: 2}\n", config.Options{Lenient: true, Logger: log}).RateLimit
	if rl.DefaultName != "a" || !strings.Contains(logs.String(), `using \"a\", the first policy by name`) {
		t.Errorf("lenient default %q; warnings:\n%s", rl.DefaultName, logs)
	}
}

func TestBadValues(t *testing.T) {
	head := "redis-streaming:\n  ratelimit:\n    enabled: true\n"
	pol := head + "    policies:\n      api1:\n"
	tests := []struct {
		name, doc, want string
	}{
		{"limit zero", pol + "        limit: 0\n", "config: redis-streaming.ratelimit.policies.api1.limit (line 6): limit = 0, want in [1, 1099511627776]"},
		{"limit text", pol + "        limit: ten\n", `config: redis-streaming.ratelimit.policies.api1.limit (line 6): must be an integer, got "ten"`},
		{"window negative", pol + "        window-ms: -5\n", "config: redis-streaming.ratelimit.policies.api1.window-ms (line 6): window = -5ms, want more than 0 and at most 625499h56m53.685248s"},
		{"window camel", pol + "        windowMs: 0\n", "config: redis-streaming.ratelimit.policies.api1.window-ms (line 6): window = 0s, want more than 0 and at most 625499h56m53.685248s"},
		{"window too large", pol + "        window-ms: 9223372036855\n", "config: redis-streaming.ratelimit.policies.api1.window-ms (line 6): is out of range: 9223372036855ms"},
		{"capacity", pol + "        algorithm: token-bucket\n        capacity: 0.5\n", "config: redis-streaming.ratelimit.policies.api1.capacity (line 7): capacity = 0.5, want a finite number in [1, 1099511627776]"},
		{"rate", pol + "        algorithm: token-bucket\n        rate-per-second: 2e6\n", "config: redis-streaming.ratelimit.policies.api1.rate-per-second (line 7): ratePerSecond = 2e+06, want a finite number in (0, 1e6] per second"},
		{"policy backend", pol + "        backend: mongo\n", `config: redis-streaming.ratelimit.policies.api1.backend (line 6): must be memory or redis, got "mongo"`},
		{"section backend", head + "    backend: 42\n", `config: redis-streaming.ratelimit.backend (line 4): must be memory or redis, got "42"`},
		{"enabled", "redis-streaming:\n  ratelimit:\n    enabled: maybe\n", `config: redis-streaming.ratelimit.enabled (line 3): must be true or false, got "maybe"`},
		{"failure policy", head + "    failure-policy: sometimes\n", `config: redis-streaming.ratelimit.failure-policy (line 4): must be fail-closed, fail-open or fallback, got "sometimes"`},
		{"key prefix", pol + "        key-prefix: a{b}\n", `config: redis-streaming.ratelimit.policies.api1.key-prefix (line 6): must not contain '{' or '}'`},
		{"section limit", head + "    limit: -1\n", "config: redis-streaming.ratelimit.limit (line 4): limit = -1, want in [1, 1099511627776]"},
		{"policies list", head + "    policies: [a, b]\n", "config: redis-streaming.ratelimit.policies (line 4): must be a mapping, got a list"},
		{"policy scalar", head + "    policies:\n      api1: 5\n", `config: redis-streaming.ratelimit.policies.api1 (line 5): must be a mapping, got "5"`},
		{"duplicate", pol + "        window-ms: 1\n        windowMs: 2\n", `config: redis-streaming.ratelimit.policies.api1.window-ms (line 7): is set twice ("windowMs" here and "window-ms" at line 6)`},
		{"empty limits", pol + "        limits: {}\n", "config: redis-streaming.ratelimit.policies.api1.limits (line 6): must list at least one limit"},
		{"bad sub-limit", pol + "        limits:\n          a: {limit: 0}\n", "config: redis-streaming.ratelimit.policies.api1.limits.a.limit (line 7): limit = 0, want in [1, 1099511627776]"},
		{"shared prefix", head + "    backend: redis\n    policies:\n      a: {key-prefix: p, limit: 1}\n      b: {key-prefix: p, limit: 2}\n",
			`config: redis-streaming.ratelimit.policies.b (line 7): key-prefix "p" is also used by policy "a" with other limits`},
		{"sliding counter too large", pol + "        algorithm: sliding-counter\n        window-ms: 2251799813685\n        limit: 1099511627776\n",
			"config: redis-streaming.ratelimit.policies.api1 (line 5): sliding-counter: limit × window = 1099511627776 × 2251799813685000µs exceeds 2^53"},
		{"section is a scalar", "redis-streaming:\n  ratelimit: on\n", `config: redis-streaming.ratelimit (line 2): must be a mapping, got "on"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts config.Options
			if strings.Contains(tt.doc, "backend: redis") {
				opts.Redis = redistest.Client(t)
			}
			opts.Logger, _ = logger()
			_, err := config.Load([]byte(tt.doc), opts)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant   %s", err, tt.want)
			}
			var ye *yamlx.Error
			if !errors.As(err, &ye) {
				t.Errorf("error %T is not a *yamlx.Error", err)
			}
		})
	}
}

func TestSharedPrefixSameLimits(t *testing.T) {
	doc := `redis-streaming.ratelimit:
  enabled: true
  backend: redis
  policies:
    web: {key-prefix: shared, algorithm: fixed, limit: 3}
    mobile: {key-prefix: shared, algorithm: fixed, limit: 3}
`
	rl := load(t, doc, config.Options{Redis: redistest.Client(t)}).RateLimit
	web, _ := rl.Registry.Get("web")
	mobile, _ := rl.Registry.Get("mobile")
	key := fmt.Sprintf("user-%d", time.Now().UnixNano())
	// Same prefix, same limits: the two names share one budget per key.
	if got := admitted(t, web, key, t0, 2) + admitted(t, mobile, key, t0, 2); got != 3 {
		t.Errorf("admitted %d across the two names, want the shared 3", got)
	}
}

func TestFromConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "application.yml")
	if err := os.WriteFile(path, []byte("redis-streaming.ratelimit.enabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.FromConfig(path, config.Options{})
	if err != nil || c.RateLimit.Default == nil {
		t.Fatalf("FromConfig = %v, %v", c, err)
	}
	if _, err := config.FromConfig(filepath.Join(t.TempDir(), "missing.yml"), config.Options{}); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Errorf("missing file error = %v", err)
	}
}

// TestFailurePolicies runs Redis limiters from a config file against a server that is
// then stopped: fail-closed returns errors, fail-open admits, fallback decides in memory.
func TestFailurePolicies(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    policies:
      closed: {algorithm: fixed, window-ms: 60000, limit: 2}
      open: {algorithm: fixed, window-ms: 60000, limit: 2, failure-policy: fail-open}
      local: {algorithm: fixed, window-ms: 60000, limit: 2, failure-policy: fallback}
`
	log, _ := logger()
	rl := load(t, doc, config.Options{Redis: client, Logger: log}).RateLimit
	get := func(name string) redstream.Limiter {
		l, err := rl.Registry.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, name := range []string{"closed", "open", "local"} {
		if n := admitted(t, get(name), "k", t0, 3); n != 2 {
			t.Fatalf("%s with Redis up admitted %d of 3, want 2", name, n)
		}
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A key other than "k": "k"'s denial is remembered (local denials) and still answered,
	// whatever the failure policy; the policies decide what Redis cannot.
	if d, err := get("closed").AllowN(ctx, "fresh", t0, 1); err == nil || d.Allowed {
		t.Errorf("fail-closed with Redis down: %+v, %v; want an error", d, err)
	}
	for range 3 {
		if d, err := get("open").AllowN(ctx, "fresh", t0, 1); err != nil || !d.Allowed {
			t.Errorf("fail-open with Redis down: %+v, %v; want admitted", d, err)
		}
	}
	var local []bool
	for range 3 {
		d, err := get("local").AllowN(ctx, "fresh", t0, 1)
		if err != nil {
			t.Fatalf("fallback with Redis down: %v", err)
		}
		local = append(local, d.Allowed)
	}
	if fmt.Sprint(local) != "[true true false]" {
		t.Errorf("fallback decisions = %v, want the memory limiter's [true true false]", local)
	}
}

// TestSectionNameTypos: a misspelled section is not silently ignored: under this library's
// prefix it is an error; at the top level, a key one or two letters away from a section's
// name is an error in strict mode and a warning in lenient mode.
func TestSectionNameTypos(t *testing.T) {
	_, err := config.Load([]byte("redis-streaming:\n  ratelimt:\n    enabled: true\n"), quiet)
	if err == nil || err.Error() != "config: redis-streaming.ratelimt (line 2): unknown key (did you mean ratelimit?)" {
		t.Errorf("misspelled ratelimit: %v", err)
	}
	for doc, want := range map[string]string{
		"redis-cahce:\n  key-prefix: x\n":          `config: redis-cahce (line 1): top-level key "redis-cahce" is not read; did you mean redis-cache?`,
		"redisStram.read-count: 5\n":               `config: redisStram (line 1): top-level key "redisStram" is not read; did you mean redis-stream?`,
		"redis-streamin.ratelimit.enabled: true\n": `config: redis-streamin (line 1): top-level key "redis-streamin" is not read; did you mean redis-streaming?`,
		"redis-streams:\n  read-count: 5\nredis-cache-x: {}\n": `config: redis-streams (line 1): top-level key "redis-streams" is not read; did you mean redis-stream?` + "\n" +
			`config: redis-cache-x (line 3): top-level key "redis-cache-x" is not read; did you mean redis-cache?`,
	} {
		if _, err := config.Load([]byte(doc), quiet); err == nil || err.Error() != want || !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%q strict: %v\nwant %s", doc, err, want)
		}
		log, logs := logger()
		load(t, doc, config.Options{Logger: log, Lenient: true})
		if !strings.Contains(logs.String(), "is not read; did you mean") {
			t.Errorf("%q lenient: no warning:\n%s", doc, logs)
		}
	}
	log, logs := logger()
	load(t, "redis-stream.read-count: 5\nredis-cache.name: x\nredisStreaming.ratelimit.enabled: true\nspring.application.name: a\nmy-app: {x: 1}\n", config.Options{Logger: log})
	if logs.String() != "" {
		t.Errorf("warnings for correct names:\n%s", logs)
	}
}

// TestAllErrorsInFileOrder: a file with several mistakes in several sections reports every
// one, in the order of their lines, each with its line.
func TestAllErrorsInFileOrder(t *testing.T) {
	doc := `redis-cache:
  key-prefx: "cache:"
  default-ttl-seconds: soon
redis-stream:
  read-cont: 10
  block-ms: 2000
  max-retry: many
redis-streaming:
  ratelimit:
    enabled: true
    limt: 5
`
	_, err := config.Load([]byte(doc), quiet)
	if err == nil || !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Fatalf("Load: %v, want an error matching ErrInvalidConfig", err)
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"(line 2)", "(line 3)", "(line 5)", "(line 7)", "(line 11)"}
	if len(lines) != len(want) {
		t.Fatalf("%d errors, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.HasPrefix(lines[i], "config: ") || strings.Count(lines[i], "config: ") != 1 {
			t.Errorf("error %d = %q, want one starting \"config: \" at %s", i+1, lines[i], w)
		}
	}
	var ye *yamlx.Error
	if !errors.As(err, &ye) {
		t.Errorf("errors.As finds no *yamlx.Error in %T", err)
	}
}

// TestIdempotencySection: redis-idempotency binds an Idempotent's options and the
// middleware's, checks them as idempotency.Options.Validate does, and builds an Idempotent
// on the client.
func TestIdempotencySection(t *testing.T) {
	doc := `redis-idempotency:
  name: payments
  retention-ms: 86400000
  lease-ms: 10s
  timeout-ms: 250
  breaker: {failures: 5}
  http:
    required: true
    methods: [POST, PUT]
`
	cfg, err := config.Load([]byte(doc), config.Options{Redis: redistest.Client(t), Logger: quiet.Logger})
	if err != nil {
		t.Fatal(err)
	}
	o, h := cfg.Idempotency.Options, cfg.Idempotency.HTTP
	if o.Name != "payments" || o.Retention != 24*time.Hour || o.Lease != 10*time.Second || o.Timeout != 250*time.Millisecond ||
		o.Breaker.Failures != 5 || !h.Required || strings.Join(h.Methods, ",") != "POST,PUT" {
		t.Errorf("Idempotency = %+v", cfg.Idempotency)
	}
	idem, err := cfg.NewIdempotent()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for i := 0; i < 2; i++ {
		if _, err := idem.Do(context.Background(), "order-1", "fp", func(context.Context) ([]byte, error) { calls++; return []byte("ok"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Errorf("the function ran %d times for one key, want 1", calls)
	}
	for doc, want := range map[string]string{
		"redis-idempotency:\n  lease-ms: 1\n":        "config: redis-idempotency (line 1): invalid configuration: Lease = 1ms, want 3ms to Retention (24h0m0s)",
		"redis-idempotency:\n  retension-ms: 1000\n": "config: redis-idempotency.retension-ms (line 2): unknown key (did you mean retention-ms?)",
	} {
		if _, err := config.Load([]byte(doc), quiet); err == nil || err.Error() != want || !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%q: %v\nwant %s", doc, err, want)
		}
	}
}
