package config_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/redisbackend"
)

// TestRedisLimiterKeys: timeout-ms, breaker.*, java-compatible and local-denials set on the
// section are every Redis policy's defaults, each key (each breaker key too) overridden on
// its own by a policy, and become the engines' redisbackend.Options.
func TestRedisLimiterKeys(t *testing.T) {
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    default-name: api
    timeout-ms: 50
    breaker:
      failures: -1
      cool-down-ms: 500
    policies:
      api: {algorithm: token-bucket, capacity: 10, rate-per-second: 5, java-compatible: true}
      login:
        timeout-ms: -1
        local-denials: false
        breaker: {error-rate: 0.25, min-calls: 40, window-ms: 30000, probes: 2}
        limits:
          m: {algorithm: fixed, window-ms: 60000, limit: 5}
      off: {limit: 3, breaker: {disabled: true}}
`
	log, logs := logger()
	s := load(t, doc, config.Options{Redis: redistest.Client(t), Logger: log}).RateLimit.Settings
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("unexpected warnings:\n%s", logs)
	}
	section := defaultRedis
	section.Timeout, section.Breaker.Failures, section.Breaker.CoolDown = 50*time.Millisecond, -1, 500*time.Millisecond
	login := section
	login.Timeout, login.LocalDenials = -time.Millisecond, false
	login.Breaker.ErrorRate, login.Breaker.MinCalls, login.Breaker.Window, login.Breaker.Probes = 0.25, 40, 30*time.Second, 2
	api := section
	api.JavaCompatible = true
	off := section
	off.Breaker.Disabled = true
	if !reflect.DeepEqual(s.Redis, section) {
		t.Errorf("section = %+v, want %+v", s.Redis, section)
	}
	for i, want := range []config.RedisLimiterSettings{api, login, off} {
		if got := s.Policies[i].Redis; !reflect.DeepEqual(got, want) {
			t.Errorf("policy %s = %+v\nwant %+v", s.Policies[i].Name, got, want)
		}
	}
	if got := s.Policies[1].Limits[0].Redis; !reflect.DeepEqual(got, login) {
		t.Errorf("login's limit m = %+v, want the policy's %+v", got, login)
	}
}

// defaultRedis are the Redis limiter keys of a section that sets none: redisbackend's
// defaults written out.
var defaultRedis = config.RedisLimiterSettings{
	Timeout: redisbackend.DefaultTimeout, LocalDenials: true,
	Breaker: redstream.BreakerOptions{Failures: 3, ErrorRate: 0.5, MinCalls: 20, Window: 10 * time.Second, CoolDown: time.Second, Probes: 1},
	Quota:   redisbackend.QuotaOptions{Duration: 100 * time.Millisecond, MaxShare: 0.1},
}

// TestRedisLimiterKeysReachTheEngine: on a real redis-server, breaker.failures: 1 opens the
// policy's breaker on the first failure of a killed server (the default needs 3),
// breaker.disabled keeps it closed, and java-compatible writes the Java layout's key.
func TestRedisLimiterKeysReachTheEngine(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    timeout-ms: 1000
    policies:
      one: {algorithm: fixed, limit: 10, breaker: {failures: 1, cool-down-ms: 60000}}
      default3: {algorithm: fixed, limit: 10}
      never: {algorithm: fixed, limit: 10, breaker: {disabled: true}}
      java: {algorithm: token-bucket, capacity: 5, rate-per-second: 1, java-compatible: true, key-prefix: jrl}
`
	log, _ := logger()
	rl := load(t, doc, config.Options{Redis: client, Logger: log}).RateLimit
	ctx := context.Background()
	get := func(name string) (redstream.Limiter, *redisbackend.Limiter) {
		t.Helper()
		l, err := rl.Registry.Get(name)
		if err != nil {
			t.Fatalf("policy %s: %v", name, err)
		}
		rb, ok := engine(t, l).(*redisbackend.Limiter)
		if !ok {
			t.Fatalf("%s engine = %T", name, engine(t, l))
		}
		return l, rb
	}
	java, jrb := get("java")
	if _, err := java.AllowN(ctx, "u", time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	if typ, err := client.Do(ctx, client.B().Type().Key("jrl:{u}:tb").Build()).ToString(); err != nil || typ != "hash" {
		t.Errorf("java-compatible: TYPE jrl:{u}:tb = %q, %v; want the Java layout's hash (engine keys %v)", typ, err, jrb.Keys("u"))
	}
	srv.Stop()
	for _, tt := range []struct {
		name  string
		calls int
		want  redstream.BreakerState
	}{{"one", 1, redstream.BreakerOpen}, {"default3", 2, redstream.BreakerClosed}, {"default3", 1, redstream.BreakerOpen}, {"never", 5, redstream.BreakerClosed}} {
		l, rb := get(tt.name)
		for range tt.calls {
			if _, err := l.AllowN(ctx, "k", time.Time{}, 1); err == nil {
				t.Fatalf("%s: a decision succeeded on a killed server", tt.name)
			}
		}
		if got := rb.BreakerState(); got != tt.want {
			t.Errorf("%s after %d more failures: breaker %v, want %v", tt.name, tt.calls, got, tt.want)
		}
	}
	l, _ := get("never")
	if _, err := l.AllowN(ctx, "k", time.Time{}, 1); errors.Is(err, redstream.ErrCircuitOpen) {
		t.Errorf("breaker.disabled: %v", err)
	}
}

// TestRedisLimiterKeysErrors: out-of-range values are errors naming the key and line in
// both modes; keys that do not apply are errors in strict mode and warnings in lenient.
func TestRedisLimiterKeysErrors(t *testing.T) {
	head := "redis-streaming:\n  ratelimit:\n    enabled: true\n    backend: redis\n"
	pol := head + "    policies:\n      api:\n"
	const p = "config: redis-streaming.ratelimit.policies.api."
	tests := []struct {
		name, doc, want string
		lenientOK       bool // lenient mode loads it, with the warning want
	}{
		{"timeout zero", pol + "        timeout-ms: 0\n", p + "timeout-ms (line 7): must be a number of milliseconds from 1 to 9223372036854, or -1", false},
		{"timeout negative", head + "    timeout-ms: -5\n", "config: redis-streaming.ratelimit.timeout-ms (line 5): must be a number of milliseconds", false},
		{"timeout text", pol + "        timeout-ms: fast\n", p + `timeout-ms (line 7): must be a duration such as 500ms, 2s or a whole number of ms, got "fast"`, false},
		{"failures zero", pol + "        breaker: {failures: 0}\n", p + "breaker.failures (line 7): must be at least 1 consecutive failure, or -1 to disable the rule; got 0", false},
		{"error rate", pol + "        breaker:\n          error-rate: 1.5\n", p + "breaker.error-rate (line 8): must be a fraction in (0, 1], or -1 to disable the rule; got 1.5", false},
		{"error rate zero", pol + "        breaker: {error-rate: 0}\n", p + "breaker.error-rate (line 7): must be a fraction in (0, 1]", false},
		{"min calls", pol + "        breaker: {min-calls: 0}\n", p + "breaker.min-calls (line 7): must be at least 1; got 0", false},
		{"window", pol + "        breaker: {window-ms: 0}\n", p + "breaker.window-ms (line 7): must be a number of milliseconds from 1 to", false},
		{"cool-down", pol + "        breaker:\n          coolDownMs: -1\n", p + "breaker.cool-down-ms (line 8): must be a number of milliseconds from 1 to", false},
		{"probes", pol + "        breaker: {probes: -3}\n", p + "breaker.probes (line 7): must be at least 1; got -3", false},
		{"unknown breaker key", pol + "        breaker: {failure: 2}\n", p + "breaker.failure (line 7)", true},
		{"disabled", pol + "        breaker: {failures: -1, error-rate: -1}\n", p + "breaker (line 7): failures and error-rate are both -1, so the breaker would never open", true},
		{"disabled with keys", pol + "        breaker:\n          disabled: true\n          failures: 5\n", p + "breaker.failures (line 9): does not apply: the breaker is disabled", true},
		{"java fixed", pol + "        algorithm: fixed\n        java-compatible: true\n", p + "java-compatible (line 8): the fixed algorithm has no Java layout (only sliding and token-bucket have one)", false},
		{"java inherited", head + "    java-compatible: true\n    policies:\n      api: {algorithm: leaky-bucket}\n",
			"config: redis-streaming.ratelimit.policies.api (line 7): java-compatible is true (set at redis-streaming.ratelimit.java-compatible, line 5) but the leaky-bucket algorithm has no Java layout", false},
		{"java limits", pol + "        java-compatible: true\n        limits:\n          m: {limit: 1}\n", p + "java-compatible (line 7): a policy with limits has no Java layout", false},
		{"memory policy", pol + "        backend: memory\n        timeout-ms: 20\n", p + `timeout-ms (line 8): does not apply to the memory backend (policy "api"); set backend: redis, or remove it`, true},
		{"memory section", "redis-streaming:\n  ratelimit:\n    enabled: true\n    local-denials: false\n",
			"config: redis-streaming.ratelimit.local-denials (line 4): does not apply: no limiter of the section uses the redis backend", true},
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
			if !errors.Is(err, redstream.ErrInvalidConfig) && !strings.HasPrefix(err.Error(), "config: ") {
				t.Errorf("error %v does not name the package", err)
			}
			log, logs := logger()
			opts.Lenient, opts.Logger = true, log
			_, err = config.Load([]byte(tt.doc), opts)
			switch {
			case tt.lenientOK && err != nil:
				t.Errorf("lenient: %v, want a warning", err)
			case tt.lenientOK && !strings.Contains(logs.String(), "level=WARN"):
				t.Errorf("lenient: no warning:\n%s", logs)
			case !tt.lenientOK && err == nil:
				t.Errorf("lenient: loaded; an out-of-range value must stay an error")
			}
		})
	}
}

// TestRedisLimiterKeysFromEnvironment: the keys are bound relaxed from the environment too,
// and a bad value there names the variable.
func TestRedisLimiterKeysFromEnvironment(t *testing.T) {
	doc := "redis-streaming:\n  ratelimit:\n    enabled: true\n    backend: redis\n    policies:\n      api: {limit: 5}\n"
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	log, _ := logger()
	c := load(t, doc, config.Options{Redis: redistest.Client(t), Logger: log, Getenv: env(map[string]string{
		"REDISSTREAMING_RATELIMIT_POLICIES_API_TIMEOUTMS":        "30",
		"REDISSTREAMING_RATELIMIT_POLICIES_API_BREAKER_FAILURES": "7",
	})})
	if r := c.RateLimit.Settings.Policies[0].Redis; r.Timeout != 30*time.Millisecond || r.Breaker.Failures != 7 {
		t.Errorf("from the environment: %+v, want timeout-ms 30 and failures 7", r)
	}
	_, err := config.Load([]byte(doc), config.Options{Redis: redistest.Client(t), Logger: log, Getenv: env(map[string]string{
		"REDISSTREAMING_RATELIMIT_POLICIES_API_TIMEOUTMS": "0",
	})})
	if want := "config: redis-streaming.ratelimit.policies.api.timeout-ms (environment REDISSTREAMING_RATELIMIT_POLICIES_API_TIMEOUTMS): must be a number of milliseconds"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v\nwant   %s", err, want)
	}
}

// TestJavaCompatiblePrefix: a java-compatible policy without its own key-prefix keys its state
// as the Java starter's policies do, under the section's key-prefix with no policy name
// (streaming:rl by default), so a decision of Java's state is seen by Go; a sliding and a
// token-bucket java-compatible policy share that prefix without colliding (Java's layouts
// differ); other policies keep "<key-prefix>:<name>".
func TestJavaCompatiblePrefix(t *testing.T) {
	client := redistest.Client(t)
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    default-name: api
    policies:
      api: {algorithm: token-bucket, capacity: 10, rate-per-second: 5, java-compatible: true}
      login: {algorithm: sliding, window-ms: 1000, limit: 3, java-compatible: true}
      plain: {algorithm: sliding, window-ms: 1000, limit: 3}
`
	rl := load(t, doc, config.Options{Redis: client, Logger: quiet.Logger}).RateLimit
	for name, want := range map[string]string{"api": "streaming:rl", "login": "streaming:rl", "plain": "streaming:rl:plain"} {
		if got := rl.Settings.Policies[slices.IndexFunc(rl.Settings.Policies, func(p config.PolicySettings) bool { return p.Name == name })].KeyPrefix; got != want {
			t.Errorf("policy %s: key-prefix %q, want %q", name, got, want)
		}
	}
	// Java's sliding-window state for user 1 (3 requests in the window) denies Go's next one.
	ctx := context.Background()
	now := time.Now()
	for i := 0; i < 3; i++ {
		ms := now.UnixMilli() - int64(i)
		if err := client.Do(ctx, client.B().Zadd().Key("streaming:rl:{user-1}").ScoreMember().ScoreMember(float64(ms), fmt.Sprintf("%d:%d", ms, i)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	login, _ := rl.Registry.Get("login")
	if d, err := login.AllowN(ctx, "user-1", now, 1); err != nil || d.Allowed {
		t.Errorf("Go's decision on Java's full window: %+v, %v; want denied", d, err)
	}
}
