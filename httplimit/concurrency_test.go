package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

func newLeases(t *testing.T, limit int64, ttl time.Duration) *memory.ConcurrencyLimiter {
	t.Helper()
	l, err := memory.NewConcurrencyLimiter([]redstream.Spec{redstream.Concurrency(limit, ttl)}, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func keyed(key string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if key != "" {
		r.Header.Set("X-Key", key)
	}
	return r
}

// free reports whether the key's limit admits n more at once now (and gives them back).
func free(t *testing.T, l *memory.ConcurrencyLimiter, key string, n int64) bool {
	t.Helper()
	lease, err := l.Acquire(context.Background(), key, time.Time{}, n)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Allowed {
		if ok, err := l.Release(context.Background(), lease, time.Time{}); !ok || err != nil {
			t.Fatalf("release of a fresh lease: %v, %v", ok, err)
		}
	}
	return lease.Allowed
}

func TestConcurrencyReleasesOnReturnAndPanic(t *testing.T) {
	l := newLeases(t, 1, time.Hour)
	mw, err := NewConcurrency(ConcurrencyOptions{Limiter: l, Key: ByHeader("X-Key")})
	if err != nil {
		t.Fatal(err)
	}
	var inside bool
	ok := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inside = !free(t, l, "k", 1) }))
	w := httptest.NewRecorder()
	ok.ServeHTTP(w, keyed("k"))
	if w.Code != http.StatusOK || !inside {
		t.Fatalf("status %d, slot held inside the handler: %v; want 200 and held", w.Code, inside)
	}
	if !free(t, l, "k", 1) {
		t.Fatal("the slot is still held after the handler returned")
	}
	boom := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		boom.ServeHTTP(httptest.NewRecorder(), keyed("k"))
	}()
	if !free(t, l, "k", 1) {
		t.Fatal("the slot is still held after the handler panicked")
	}
}

func TestConcurrencyDeniesOverTheCap(t *testing.T) {
	l := newLeases(t, 2, 90*time.Second)
	mw, _ := NewConcurrency(ConcurrencyOptions{Limiter: l, Key: ByHeader("X-Key")})
	var codes []int
	var h http.Handler
	depth := 0
	h = mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		depth++
		if depth <= 2 { // nested requests of the same key while this one runs
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, keyed("k"))
			codes = append(codes, rec.Code)
			if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") != "90" {
				t.Errorf("Retry-After %q, want 90", rec.Header().Get("Retry-After"))
			}
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, keyed("k"))
	if rec.Code != http.StatusOK || len(codes) != 2 || codes[0] != http.StatusTooManyRequests || codes[1] != http.StatusOK {
		t.Fatalf("outer %d, nested %v; want 200 and [429 200] (the third request in progress is over the cap of 2)", rec.Code, codes)
	}
	if !free(t, l, "k", 2) {
		t.Fatal("slots still held after every request returned")
	}
}

func TestConcurrencyErrors(t *testing.T) {
	l := newLeases(t, 1, time.Second)
	if _, err := NewConcurrency(ConcurrencyOptions{Key: ByRemoteIP}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("nil Limiter: %v", err)
	}
	if _, err := NewConcurrency(ConcurrencyOptions{Limiter: l}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("nil Key: %v", err)
	}
	if _, err := NewConcurrency(ConcurrencyOptions{Limiter: l, Key: ByRemoteIP, ExtendEvery: -1}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("negative ExtendEvery: %v", err)
	}
	mw, _ := NewConcurrency(ConcurrencyOptions{Limiter: l, Key: ByHeader("X-Key")})
	rec := httptest.NewRecorder()
	mw.Wrap(http.NotFoundHandler()).ServeHTTP(rec, keyed(""))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("no key: %d, want 400", rec.Code)
	}
}

// TestConcurrencyHeartbeat: with ExtendEvery a request outlives its lease TTL and keeps its
// slot; without it the slot frees itself at the TTL while the request still runs.
func TestConcurrencyHeartbeat(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, every := range []time.Duration{0, ttl / 6} {
		l := newLeases(t, 1, ttl)
		mw, _ := NewConcurrency(ConcurrencyOptions{Limiter: l, Key: ByHeader("X-Key"), ExtendEvery: every})
		var heldLate bool
		mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3 * ttl)
			heldLate = !free(t, l, "k", 1)
		})).ServeHTTP(httptest.NewRecorder(), keyed("k"))
		if heldLate != (every > 0) {
			t.Errorf("ExtendEvery %v: slot held after 3 TTLs: %v, want %v", every, heldLate, every > 0)
		}
		if !free(t, l, "k", 1) {
			t.Errorf("ExtendEvery %v: slot still held after the request", every)
		}
	}
}
