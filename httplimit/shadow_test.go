package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httplimit"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// TestShadowMiddleware: on a real redis-server, a middleware whose limiter is in shadow
// mode passes every request through and writes no rate-limit field (a Redis limit on
// trial inside an enforced memory one: only the enforced limit is advertised), while its
// shadow denials are counted and its Redis state is the enforced limit's.
func TestShadowMiddleware(t *testing.T) {
	client := redistest.Client(t)
	spec := redstream.FixedWindow(time.Hour, 3)
	opts := redisbackend.Options{KeyPrefix: "test:httplimit:shadow:" + t.Name(), Timeout: 5 * time.Second}
	rl, err := redisbackend.NewLimiter(client, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	trial, err := metrics.Named("http-trial", redstream.Shadow(rl))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := httplimit.New(httplimit.Options{Limiter: trial, Key: byUser})
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 100), memory.Options{})
	enforced, _ := metrics.Named("http-enforced", mem)
	outer, err := httplimit.New(httplimit.Options{Limiter: enforced, Key: byUser})
	if err != nil {
		t.Fatal(err)
	}
	h := outer.Wrap(inner.Wrap(okHandler))
	for i := range 5 {
		rec := get(t, h, "u1")
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 (shadow mode admits)", i, rec.Code)
		}
		if got, want := rec.Header().Get("RateLimit-Policy"), `"http-enforced";q=100;w=3600`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want only the enforced policy %q", i, got, want)
		}
		if got := rec.Header().Values("RateLimit"); len(got) != 1 {
			t.Errorf("request %d: RateLimit %q, want the enforced limit's item alone", i, got)
		}
		if got := rec.Header().Get("Retry-After"); got != "" {
			t.Errorf("request %d: Retry-After %q on a shadow denial", i, got)
		}
	}
	shadow := metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_shadow_denied_total", "name", "http-trial"))
	if shadow.Get() != 2 {
		t.Errorf("shadow denials = %d, want 2 (5 requests, limit 3)", shadow.Get())
	}
	// The trial recorded what it admitted in Redis: an enforcing limiter of the same spec
	// and prefix sees the key full.
	if d, err := rl.AllowN(t.Context(), "u1", time.Time{}, 1); err != nil || d.Allowed {
		t.Errorf("enforcing limiter on the trial's key: %+v, %v; want a denial", d, err)
	}
}

// TestShadowDecisionWritesNoFields: a shadow denial coming from a limiter the middleware
// does not see as shadow (a wrapper without Unwrap) is still admitted without fields.
func TestShadowDecisionWritesNoFields(t *testing.T) {
	f := &fakeLimiter{d: redstream.Decision{Allowed: true, Shadow: true, Limit: 5, RetryAfter: time.Second}}
	m, err := httplimit.New(httplimit.Options{Limiter: f, Key: byUser})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, m.Wrap(okHandler), "u1")
	if rec.Code != http.StatusOK || len(rec.Header().Values("RateLimit")) != 0 || rec.Header().Get("Retry-After") != "" {
		t.Errorf("status %d, headers %v; want 200 without rate-limit fields", rec.Code, rec.Header())
	}
}
