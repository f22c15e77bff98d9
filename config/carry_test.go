package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/redisbackend"
)

// TestPreviousPolicy: a Redis policy with previous (keys not set: the policy's own) seeds
// each key once from its state under the previous spec, by carry (default as-is), on a
// real redis-server.
func TestPreviousPolicy(t *testing.T) {
	client := redistest.Client(t)
	prefix := "test:config:previous:" + time.Now().Format("150405.000000")
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    key-prefix: ` + prefix + `
    timeout-ms: 5000
    policies:
      api:
        algorithm: fixed
        window-ms: 3600000
        limit: 20
        previous: {limit: 10}
      bucket:
        algorithm: token-bucket
        capacity: 40
        rate-per-second: 0.001
        previous: {capacity: 20}
        carry: proportional
`
	rl := load(t, doc, config.Options{Redis: client}).RateLimit
	api, bucket := rl.Settings.Policies[0], rl.Settings.Policies[1]
	if api.Previous != redstream.FixedWindow(time.Hour, 10) || api.Carry != core.CarryAsIs {
		t.Errorf("api: previous %+v carry %v, want the fixed window of 10 and as-is", api.Previous, api.Carry)
	}
	if bucket.Previous != redstream.TokenBucket(20, 0.001) || bucket.Carry != core.CarryProportional {
		t.Errorf("bucket: previous %+v carry %v", bucket.Previous, bucket.Carry)
	}
	now := time.Unix(1_900_000_000, 0)
	for _, tc := range []struct {
		policy    string
		old       redstream.Spec
		used      int
		wantAfter int
	}{
		{"api", redstream.FixedWindow(time.Hour, 10), 8, 12}, // as-is: 8 of 20 consumed
		{"bucket", redstream.TokenBucket(20, 0.001), 5, 30},  // proportional: 10 of 40
	} {
		old, err := redisbackend.NewLimiter(client, tc.old, redisbackend.Options{KeyPrefix: prefix + ":" + tc.policy, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if got := admitted(t, old, "user:1", now, tc.used); got != tc.used {
			t.Fatalf("%s: the previous spec admitted %d of %d", tc.policy, got, tc.used)
		}
		lim, _ := rl.Registry.Get(tc.policy)
		if got := admitted(t, lim, "user:1", now, 60); got != tc.wantAfter {
			t.Errorf("%s: %d admitted after the change, want %d", tc.policy, got, tc.wantAfter)
		}
	}
}

// TestPreviousErrors: previous and carry where they cannot apply are errors at their key.
func TestPreviousErrors(t *testing.T) {
	head := "redis-streaming:\n  ratelimit:\n    enabled: true\n    backend: redis\n    policies:\n      api:\n"
	for _, tc := range []struct{ name, policy, want string }{
		{"window change", "        algorithm: fixed\n        window-ms: 60000\n        previous: {window-ms: 1000}\n", "change of window can only reset"},
		{"algorithm change", "        algorithm: fixed\n        previous: {algorithm: token-bucket}\n", "change of algorithm can only reset"},
		{"sliding log", "        algorithm: sliding\n        limit: 5\n        previous: {limit: 10}\n", "carries no state"},
		{"carry alone", "        algorithm: fixed\n        carry: as-is\n", "carry"},
		{"bad carry", "        algorithm: fixed\n        previous: {limit: 10}\n        carry: additive\n", "as-is, proportional or reset"},
		{"bad previous value", "        algorithm: fixed\n        previous: {limit: 0}\n", "limit"},
		{"memory", "        backend: memory\n        algorithm: fixed\n        previous: {limit: 10}\n", "memory backend"},
		{"multi", "        previous: {limit: 10}\n        limits:\n          a: {algorithm: fixed, limit: 5}\n", "single-limit policy"},
		{"unknown key", "        algorithm: fixed\n        previous: {limt: 10}\n", "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load([]byte(head+tc.policy), config.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
