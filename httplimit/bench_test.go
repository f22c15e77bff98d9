package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httplimit"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
)

var noop = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})

func serveLoop(b *testing.B, h http.Handler) {
	b.Helper()
	b.ReportAllocs()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-User", "u")
	w := &discard{h: http.Header{}}
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// discard is a ResponseWriter that keeps nothing but its header map.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkBaseline serves the bare handler; the middleware benchmarks serve the same handler
// behind the middleware, so the difference is the middleware's overhead per request.
func BenchmarkBaseline(b *testing.B) { serveLoop(b, noop) }

// BenchmarkMiddlewareFake uses a limiter that does nothing: the middleware alone.
func BenchmarkMiddlewareFake(b *testing.B) {
	f := &fakeLimiter{d: redstream.Decision{Allowed: true, Limit: 100, Remaining: 50, ResetAfter: time.Second}}
	m, _ := httplimit.New(httplimit.Options{Limiter: f, Key: byUser,
		Policies: []httplimit.Policy{{Name: "api", Quota: 100, Window: time.Minute}}})
	serveLoop(b, m.Wrap(noop))
}

// BenchmarkMiddlewareMemory adds a real in-process limiter (token bucket, hot key).
func BenchmarkMiddlewareMemory(b *testing.B) {
	mem, _ := memory.NewLimiter(redstream.TokenBucket(1e9, 1e6), memory.Options{})
	named, _ := metrics.Named("bench-http", mem)
	m, _ := httplimit.New(httplimit.Options{Limiter: named, Key: byUser})
	serveLoop(b, m.Wrap(noop))
}
