package config_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// TestQuotaKeys: quota.* set on the section are every Redis policy's defaults, each key
// overridden on its own by a policy; on a real redis-server a policy with quota enabled
// decides a hot key's requests with a few script calls (counted by the server and by the
// leased-quota metrics), and one without makes one call per request.
func TestQuotaKeys(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    default-name: hot
    quota:
      duration-ms: 200
      max-share: 0.05
    policies:
      hot:
        algorithm: fixed
        window-ms: 3600000
        limit: 100000
        quota: {enabled: true}
      bucket:
        algorithm: token-bucket
        capacity: 100000
        rate-per-second: 100000
        quota:
          enabled: true
          duration-ms: 1s
          maxShare: 0.5
      plain: {algorithm: sliding-counter, window-ms: 3600000, limit: 100000}
`
	log, logs := logger()
	rl := load(t, doc, config.Options{Redis: client, Logger: log}).RateLimit
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("unexpected warnings:\n%s", logs)
	}
	want := map[string]redisbackend.QuotaOptions{
		"hot":    {Enabled: true, Duration: 200 * time.Millisecond, MaxShare: 0.05},
		"bucket": {Enabled: true, Duration: time.Second, MaxShare: 0.5},
		"plain":  {Duration: 200 * time.Millisecond, MaxShare: 0.05},
	}
	if got := rl.Settings.Redis.Quota; got != want["plain"] {
		t.Errorf("section quota = %+v, want %+v", got, want["plain"])
	}
	for _, p := range rl.Settings.Policies {
		if p.Redis.Quota != want[p.Name] {
			t.Errorf("policy %s: quota = %+v, want %+v", p.Name, p.Redis.Quota, want[p.Name])
		}
	}
	const requests = 2000
	for _, tc := range []struct {
		name     string
		maxCalls int64
	}{{"hot", requests / 50}, {"bucket", requests / 50}, {"plain", requests}} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := rl.Registry.Get(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			rb := engine(t, l).(*redisbackend.Limiter)
			before := evalCalls(t, client)
			// 2000 requests 100 µs apart: 10,000 a second, under every policy's limit.
			at := time.UnixMicro(1_767_225_600_000_000).Add(time.Minute)
			for i := range requests {
				d, err := l.AllowN(context.Background(), "tenant", at.Add(time.Duration(i)*100*time.Microsecond), 1)
				if err != nil || !d.Allowed {
					t.Fatalf("request %d: %+v, %v; want admitted", i, d, err)
				}
			}
			// A script's first call on the server is an EVALSHA that fails (NOSCRIPT), then
			// the EVAL: one call more.
			calls := evalCalls(t, client) - before
			q := metrics.LeasedQuotaCounters(rb.KeyPrefix())
			t.Logf("%s: %d requests, %d script calls; quota calls %d, granted %d, local %d", tc.name, requests, calls, q.Calls.Get(), q.Granted.Get(), q.LocalAllowed.Get())
			if tc.maxCalls == requests {
				if calls < requests || calls > requests+1 || q.Calls.Get() != 0 {
					t.Errorf("without quota: %d script calls (%d for quota), want one per request", calls, q.Calls.Get())
				}
				return
			}
			if qc := int64(q.Calls.Get()); calls > tc.maxCalls || calls < qc || calls > qc+1 || q.Calls.Get()+q.LocalAllowed.Get() != requests {
				t.Errorf("with quota: %d script calls (quota calls %d, local %d), want at most %d, all of them quota's, and calls + local = %d",
					calls, q.Calls.Get(), q.LocalAllowed.Get(), tc.maxCalls, requests)
			}
		})
	}
}

// evalCalls returns the number of script calls the server ran (INFO commandstats).
func evalCalls(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// TestQuotaFromEnvironment: the quota keys are bound relaxed from the environment too, and a
// refusal of what the environment enabled names the variable.
func TestQuotaFromEnvironment(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	client := redistest.Client(t)
	doc := "redis-streaming:\n  ratelimit:\n    enabled: true\n    backend: redis\n    policies:\n      api: {algorithm: fixed, limit: 5}\n"
	log, _ := logger()
	c := load(t, doc, config.Options{Redis: client, Logger: log, Getenv: env(map[string]string{
		"REDISSTREAMING_RATELIMIT_POLICIES_API_QUOTA_ENABLED":  "true",
		"REDISSTREAMING_RATELIMIT_POLICIES_API_QUOTA_MAXSHARE": "0.5",
	})})
	if q := c.RateLimit.Settings.Policies[0].Redis.Quota; !q.Enabled || q.MaxShare != 0.5 || q.Duration != redisbackend.DefaultQuotaDuration {
		t.Errorf("from the environment: %+v, want enabled, max-share 0.5, the default duration", q)
	}
	leaky := strings.Replace(doc, "{algorithm: fixed, limit: 5}", "{algorithm: leaky-bucket}", 1)
	_, err := config.Load([]byte(leaky), config.Options{Redis: client, Logger: log, Getenv: env(map[string]string{
		"REDISSTREAMING_RATELIMIT_POLICIES_API_QUOTA_ENABLED": "true",
	})})
	if want := `config: redis-streaming.ratelimit.policies.api.quota.enabled (environment REDISSTREAMING_RATELIMIT_POLICIES_API_QUOTA_ENABLED): policy "api": the leaky-bucket algorithm has no leased quota`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v\nwant   %s", err, want)
	}
	_, err = config.Load([]byte(leaky), config.Options{Redis: client, Logger: log, Getenv: env(map[string]string{
		"REDISSTREAMING_RATELIMIT_QUOTA_ENABLED": "true",
	})})
	if want := `config: redis-streaming.ratelimit.policies.api (line 6): quota.enabled is true (set by the environment variable REDISSTREAMING_RATELIMIT_QUOTA_ENABLED) but policy "api"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v\nwant   %s", err, want)
	}
}

// TestQuotaErrors: quota where the engine has no leases is an error naming the policy in
// both modes (set on the policy, or inherited from the section); out-of-range values are
// errors naming the key and line in both modes; unknown keys inside quota, quota on the
// memory backend and keys beside enabled: false are errors in strict mode and warnings in
// lenient.
func TestQuotaErrors(t *testing.T) {
	head := "redis-streaming:\n  ratelimit:\n    enabled: true\n    backend: redis\n"
	pol := head + "    policies:\n      api:\n"
	fixed := pol + "        algorithm: fixed\n"
	const p = "config: redis-streaming.ratelimit.policies.api"
	tests := []struct {
		name, doc, want string
		lenientOK       bool // lenient mode loads it, with the warning want
	}{
		{"leaky bucket", pol + "        algorithm: leaky-bucket\n        quota: {enabled: true}\n",
			p + `.quota.enabled (line 8): policy "api": the leaky-bucket algorithm has no leased quota: its decisions carry a shaping delay`, false},
		{"sliding log", pol + "        limit: 10\n        quota:\n          enabled: true\n",
			p + `.quota.enabled (line 9): policy "api": the sliding algorithm (an exact log) has no leased quota`, false},
		{"limits", pol + "        quota: {enabled: true}\n        limits:\n          m: {algorithm: fixed, limit: 1}\n",
			p + `.quota.enabled (line 7): policy "api": a policy with limits (a multi-limit) has no leased quota`, false},
		{"java-compatible", pol + "        algorithm: token-bucket\n        java-compatible: true\n        quota: {enabled: true}\n",
			p + `.quota.enabled (line 9): policy "api": a java-compatible policy has no leased quota`, false},
		{"previous", fixed + "        limit: 10\n        previous: {limit: 5}\n        quota: {enabled: true}\n",
			p + `.quota.enabled (line 10): policy "api": a policy with previous`, false},
		{"inherited", head + "    quota:\n      enabled: true\n    policies:\n      api: {algorithm: leaky-bucket}\n",
			p + ` (line 8): quota.enabled is true (set at redis-streaming.ratelimit.quota.enabled, line 6) but policy "api": the leaky-bucket algorithm has no leased quota`, false},
		{"single limiter", head + "    quota: {enabled: true}\n",
			`config: redis-streaming.ratelimit.quota.enabled (line 5): the section's single limiter (no policies): the sliding algorithm (an exact log) has no leased quota`, false},
		{"duration zero", fixed + "        quota: {enabled: true, duration-ms: 0}\n",
			p + ".quota.duration-ms (line 8): must be a number of milliseconds from 1 to 60000 (a lease's longest life); got 0", false},
		{"duration long", head + "    quota:\n      duration-ms: 2m\n",
			"config: redis-streaming.ratelimit.quota.duration-ms (line 6): must be a number of milliseconds from 1 to 60000", false},
		{"duration text", fixed + "        quota: {enabled: true, duration-ms: soon}\n",
			p + `.quota.duration-ms (line 8): must be a duration such as 500ms, 2s or a whole number of ms, got "soon"`, false},
		{"share zero", fixed + "        quota: {enabled: true, max-share: 0}\n",
			p + ".quota.max-share (line 8): must be a fraction in (0, 1] (the largest part of the limit one lease takes); got 0", false},
		{"share above 1", fixed + "        quota:\n          enabled: true\n          max-share: 1.5\n",
			p + ".quota.max-share (line 10): must be a fraction in (0, 1]", false},
		{"not a mapping", fixed + "        quota: true\n", p + ".quota (line 8): must be a mapping", false},
		{"unknown key", fixed + "        quota: {enabled: true, max-shares: 0.2}\n", p + `.quota.max-shares (line 8): unknown key (did you mean max-share?)`, true},
		{"keys beside disabled", fixed + "        quota:\n          max-share: 0.2\n",
			p + ".quota.max-share (line 9): does not apply: quota is not enabled (set quota.enabled: true)", true},
		{"section keys unused", head + "    quota: {duration-ms: 50}\n    policies:\n      api: {algorithm: fixed}\n",
			"config: redis-streaming.ratelimit.quota.duration-ms (line 5): does not apply: quota is enabled neither here nor on any Redis policy", true},
		{"memory policy", fixed + "        backend: memory\n        quota: {enabled: true}\n",
			p + `.quota (line 9): does not apply to the memory backend (policy "api"); set backend: redis, or remove it`, true},
		{"memory section", "redis-streaming:\n  ratelimit:\n    enabled: true\n    quota: {enabled: true}\n    policies:\n      api: {algorithm: fixed}\n",
			"config: redis-streaming.ratelimit.quota (line 4): does not apply: no limiter of the section uses the redis backend", true},
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
				t.Errorf("lenient: loaded; the engine refuses it, so it must stay an error")
			}
		})
	}
}

// TestQuotaRefusalsMatchEngine: for every algorithm of core's registry, a Redis policy with
// quota enabled loads exactly when redisbackend.NewLimiter accepts Options.Quota for its
// spec, so the file's check (made without a Redis client too) and the engine agree.
func TestQuotaRefusalsMatchEngine(t *testing.T) {
	client := redistest.Client(t)
	for _, a := range core.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			var params string
			var spec redstream.Spec
			switch a.Shape {
			case core.Window:
				params = "window-ms: 1000, limit: 10"
				spec = redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Window: time.Second, Limit: 10}
			case core.Bucket:
				params = "capacity: 10, rate-per-second: 1"
				spec = redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Capacity: 10, Rate: 1}
			default:
				t.Fatalf("%s: shape %v, which no rate-limit policy takes", a.Name, a.Shape)
			}
			doc := fmt.Sprintf("redis-streaming.ratelimit:\n  enabled: true\n  backend: redis\n  policies:\n    api: {algorithm: %s, %s, quota: {enabled: true}}\n", a.Name, params)
			_, cerr := config.Load([]byte(doc), config.Options{Redis: client})
			if cerr != nil && strings.Contains(cerr.Error(), "unknown algorithm") {
				t.Logf("%s: the section takes no such algorithm (%v)", a.Name, cerr)
				return
			}
			_, eerr := redisbackend.NewLimiter(client, spec, redisbackend.Options{Quota: redisbackend.QuotaOptions{Enabled: true}})
			if (cerr == nil) != (eerr == nil) {
				t.Errorf("config: %v; redisbackend: %v; want both to accept or both to refuse", cerr, eerr)
			}
			if cerr != nil && !strings.Contains(cerr.Error(), `policy "api"`) {
				t.Errorf("config: %v, want the policy named", cerr)
			}
		})
	}
}
