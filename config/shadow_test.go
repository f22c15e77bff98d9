package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// TestShadowPolicies: shadow on the section is every policy's default, a policy overrides
// it, and a shadow policy (memory, a real redis-server, a real 3-master cluster; single
// and multi-limit) admits every request, counts what it would have denied and records
// in Redis exactly what an enforcing limiter would.
func TestShadowPolicies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend string
		client  func(testing.TB) rueidis.Client
	}{
		{"memory", "memory", nil},
		{"redis", "redis", redistest.Client},
		{"cluster", "redis", redistest.ClusterClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts config.Options
			if tc.client != nil {
				opts.Redis = tc.client(t)
			}
			prefix := "test:config:shadow:" + tc.name + ":" + time.Now().Format("150405.000000")
			timeout := "" // a loaded machine's Redis may answer later than the default 100 ms
			if tc.client != nil {
				timeout = "\n    timeout-ms: 5000"
			}
			doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: ` + tc.backend + `
    key-prefix: ` + prefix + timeout + `
    shadow: true
    default-name: trial
    policies:
      trial: {algorithm: fixed, window-ms: 3600000, limit: 3}
      multi:
        limits:
          small: {algorithm: sliding, window-ms: 3600000, limit: 2}
          big: {algorithm: token-bucket, capacity: 10, rate-per-second: 0.001}
      enforced: {algorithm: fixed, window-ms: 3600000, limit: 3, shadow: false}
`
			rl := load(t, doc, opts).RateLimit
			for name, wantShadow := range map[string]bool{"trial": true, "multi": true, "enforced": false} {
				i := policyIndex(rl.Settings, name)
				if rl.Settings.Policies[i].Shadow != wantShadow {
					t.Errorf("policy %s: Shadow %v, want %v", name, rl.Settings.Policies[i].Shadow, wantShadow)
				}
			}
			ctx := t.Context()
			now := time.Unix(1_700_000_000, 0)
			for name, want := range map[string]struct{ allowed, shadow int }{
				"trial": {5, 2}, "multi": {5, 3}, "enforced": {3, 0},
			} {
				lim, err := rl.Registry.Get(name)
				if err != nil {
					t.Fatal(err)
				}
				shadow := metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_shadow_denied_total", "name", name))
				before := shadow.Get()
				allowed, shadowed := 0, 0
				for range 5 {
					d, err := lim.AllowN(ctx, "user:1", now, 1)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						allowed++
					}
					if d.Shadow {
						shadowed++
					}
				}
				if allowed != want.allowed || shadowed != want.shadow || int(shadow.Get()-before) != want.shadow {
					t.Errorf("policy %s: %d admitted, %d shadow denials (counter +%d); want %d, %d",
						name, allowed, shadowed, shadow.Get()-before, want.allowed, want.shadow)
				}
			}
			if tc.client == nil {
				return
			}
			// The shadow policy's Redis state is the enforced limit's: 3 admitted, full.
			check, err := redisbackend.NewLimiter(opts.Redis, redstream.FixedWindow(time.Hour, 3), redisbackend.Options{Timeout: 5 * time.Second, KeyPrefix: prefix + ":trial"})
			if err != nil {
				t.Fatal(err)
			}
			if d, err := check.AllowN(ctx, "user:1", now, 1); err != nil || d.Allowed || d.Remaining != 0 {
				t.Errorf("the trial's key under an enforcing limiter: %+v, %v; want a denial", d, err)
			}
		})
	}
}

func policyIndex(s config.RateLimitSettings, name string) int {
	for i, p := range s.Policies {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// TestShadowInLimitIsRefused: shadow applies to a whole policy; a limit of a multi-limit
// policy cannot set it.
func TestShadowInLimitIsRefused(t *testing.T) {
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    policies:
      multi:
        limits:
          small: {algorithm: sliding, window-ms: 1000, limit: 2, shadow: true}
`
	_, err := config.Load([]byte(doc), config.Options{})
	if err == nil || !strings.Contains(err.Error(), "shadow") {
		t.Errorf("Load: %v, want an error naming shadow", err)
	}
}
