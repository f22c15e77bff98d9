package redstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/failure"
	"github.com/redstream-go/redstream/memory"
)

// batchFake is a batching limiter whose keys listed in down fail with their error; the
// others are admitted.
type batchFake struct {
	fakeLimiter
	down  map[string]error
	calls int
	local redstream.Limiter // offered as the in-process fallback (NewLocal), if set
}

func (b *batchFake) AllowN(_ context.Context, key string, _ time.Time, _ int64) (redstream.Decision, error) {
	if key == "" {
		return redstream.Decision{}, fmt.Errorf("fake: %w", redstream.ErrEmptyKey)
	}
	if err := b.down[key]; err != nil {
		return redstream.Decision{}, err
	}
	return redstream.Decision{Allowed: true, Limit: 10, Remaining: 9}, nil
}

func (b *batchFake) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]redstream.Decision, error) {
	b.calls++
	for i, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("fake: batch key %d: %w", i, redstream.ErrEmptyKey)
		}
	}
	ds := make([]redstream.Decision, len(keys))
	var errs []error
	for i, k := range keys {
		d, err := b.AllowN(ctx, k, now, n)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(keys))
			}
			errs[i] = err
		}
		ds[i] = d
	}
	if errs != nil {
		return ds, &redstream.BatchError{Errs: errs}
	}
	return ds, nil
}

func (b *batchFake) NewLocal() (redstream.Limiter, error) {
	if b.local == nil {
		return nil, errors.New("no local")
	}
	return b.local, nil
}

// recorder is a FailureObserver that keeps what it is told.
type recorder struct {
	mu sync.Mutex
	fs []failure.Failure
}

func (r *recorder) ObserveFailure(f failure.Failure) {
	r.mu.Lock()
	r.fs = append(r.fs, f)
	r.mu.Unlock()
}

func (r *recorder) reasons() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, f := range r.fs {
		s = append(s, string(f.Reason))
	}
	return strings.Join(s, ",")
}

// observed wraps a limiter and is a FailureObserver, as metrics.Named is.
type observed struct {
	redstream.Limiter
	recorder
}

func (o *observed) Unwrap() redstream.Limiter { return o.Limiter }

var (
	errTimeout = fmt.Errorf("engine: %w", context.DeadlineExceeded)
	errOpen    = fmt.Errorf("engine: %w", redstream.ErrCircuitOpen)
	errDown    = errors.New("engine: connection refused")
)

func TestPolicyBatchPerKey(t *testing.T) {
	ctx := context.Background()
	eng := &batchFake{down: map[string]error{"b": errTimeout, "d": errOpen}}
	local, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 1), memory.Options{})
	for _, tc := range []struct {
		policy   redstream.FailurePolicy
		fallback redstream.Limiter
		want     []bool
	}{
		{redstream.FailOpen, nil, []bool{true, true, true, true}},
		{redstream.FailFallback, local, []bool{true, true, true, true}}, // the fallback admits the first of each key
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			inner := &observed{Limiter: eng}
			p, err := redstream.WithFailurePolicy(inner, tc.policy, tc.fallback)
			if err != nil {
				t.Fatal(err)
			}
			outer := &recorder{}
			v, ok := failure.View(p, outer)
			if !ok {
				t.Fatalf("failure.View(%T) found no policy", p)
			}
			view := v.(redstream.Limiter)
			eng.calls = 0
			ds, err := redstream.AllowBatch(ctx, view, []string{"a", "b", "c", "d"}, time.Time{}, 1)
			if err != nil {
				t.Fatalf("AllowBatch = %v, want the policy to answer the failed keys", err)
			}
			if eng.calls != 0 {
				t.Fatalf("the wrapper did not forward the batch to %T (it called AllowN)", inner)
			}
			for i, d := range ds {
				if d.Allowed != tc.want[i] {
					t.Errorf("decision %d = %+v, want allowed %v", i, d, tc.want[i])
				}
			}
			if ds[0].Remaining != 9 || ds[2].Remaining != 9 {
				t.Errorf("the backend's decisions were not kept: %+v", ds)
			}
			if got := outer.reasons(); got != "timeout,breaker_open" {
				t.Errorf("outer observer told %q, want timeout,breaker_open", got)
			}
			if got := inner.reasons(); got != "timeout,breaker_open" {
				t.Errorf("observer inside the policy told %q, want timeout,breaker_open", got)
			}
		})
	}
}

func TestPolicyBatchFallbackDecides(t *testing.T) {
	ctx := context.Background()
	eng := &batchFake{down: map[string]error{"x": errDown}}
	local, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 1), memory.Options{})
	p, err := redstream.WithFailurePolicy(eng, redstream.FailFallback, local)
	if err != nil {
		t.Fatal(err)
	}
	// "x" fails twice in one batch: the fallback admits the first, denies the second.
	ds, err := redstream.AllowBatch(ctx, p, []string{"x", "ok", "x"}, time.Time{}, 1)
	if err != nil || !ds[0].Allowed || !ds[1].Allowed || ds[2].Allowed || ds[2].Limit != 1 {
		t.Fatalf("batch = %+v, %v; want the fallback's admission, the backend's, the fallback's denial", ds, err)
	}
	// Bad input is never subject to the policy, in a batch either.
	if _, err := redstream.AllowBatch(ctx, p, []string{"ok", ""}, time.Time{}, 1); !errors.Is(err, redstream.ErrEmptyKey) {
		t.Errorf("bad key in a batch = %v, want ErrEmptyKey", err)
	}
	// A whole-batch failure (not a BatchError) sends every key to the policy.
	whole := &fakeLimiter{err: errDown}
	po, _ := redstream.WithFailurePolicy(whole, redstream.FailOpen, nil)
	ds, err = redstream.AllowBatch(ctx, po, []string{"a", "b"}, time.Time{}, 1)
	if err != nil || !ds[0].Allowed || !ds[1].Allowed {
		t.Errorf("per-key fallback of a non-batching limiter = %+v, %v", ds, err)
	}
}

func TestAllowBatchHelper(t *testing.T) {
	ds, err := redstream.AllowBatch(context.Background(), &fakeLimiter{}, nil, time.Time{}, 1)
	if ds != nil || err != nil {
		t.Errorf("empty batch = %v, %v", ds, err)
	}
	// A limiter that does not batch is asked key by key; failures come back per key.
	one := &fakeLimiter{err: errDown}
	ds, err = redstream.AllowBatch(context.Background(), one, []string{"a", "b"}, time.Time{}, 1)
	var be *redstream.BatchError
	if !errors.As(err, &be) || len(be.Unwrap()) != 2 || len(ds) != 2 || !errors.Is(err, errDown) {
		t.Fatalf("AllowBatch over a failing limiter = %v, %v", ds, err)
	}
	if !strings.Contains(err.Error(), "2 of 2 decisions failed") {
		t.Errorf("error %q", err)
	}
}

func TestDefaultFallback(t *testing.T) {
	local, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 1), memory.Options{})
	eng := &batchFake{down: map[string]error{"k": errDown}, local: local}
	// The engine offers its in-process limiter through the Unwrap chain.
	p, err := redstream.WithFailurePolicy(&observed{Limiter: eng}, redstream.FailFallback, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		if d, err := p.AllowN(ctx, "k", time.Time{}, 1); err != nil || d.Allowed != want {
			t.Errorf("decision %d = %+v, %v; want the local limiter's %v", i, d, err, want)
		}
	}
	if fb := p.(interface{ Fallback() redstream.Limiter }).Fallback(); fb != local {
		t.Errorf("Fallback() = %v, want the engine's local limiter", fb)
	}
	// No engine offering one: a clear error.
	if _, err := redstream.WithFailurePolicy(&fakeLimiter{}, redstream.FailFallback, nil); !errors.Is(err, redstream.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "needs a fallback limiter") {
		t.Errorf("FailFallback without a fallback = %v", err)
	}
	if _, err := redstream.WithFailurePolicy(&batchFake{}, redstream.FailFallback, nil); err == nil || !strings.Contains(err.Error(), "no local") {
		t.Errorf("the engine's NewLocal error = %v, want it returned", err)
	}
	if _, err := redstream.WithFailurePolicy(&fakeLimiter{}, redstream.FailOpen, local); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("a fallback with FailOpen = %v, want ErrInvalidConfig", err)
	}
}

func TestMultiForwardsPolicy(t *testing.T) {
	eng := &batchFake{down: map[string]error{"k": errOpen}}
	m, err := redstream.Multi(func([]redstream.Spec) (redstream.Limiter, error) {
		return redstream.WithFailurePolicy(eng, redstream.FailOpen, nil)
	}, redstream.Rule{Name: "a", Spec: redstream.FixedWindow(time.Second, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	v, ok := failure.View(m, rec)
	view, isMulti := v.(interface {
		redstream.Limiter
		Rules() []redstream.Rule
	})
	if !ok || !isMulti {
		t.Fatalf("failure.View returned %T, %v; want a multi-limiter", v, ok)
	}
	if d, err := view.AllowN(context.Background(), "k", time.Time{}, 1); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if ds, err := redstream.AllowBatch(context.Background(), m, []string{"k"}, time.Time{}, 1); err != nil || !ds[0].Allowed {
		t.Fatal(ds, err)
	}
	if got := rec.reasons(); got != "breaker_open" {
		t.Errorf("observer through Multi told %q, want breaker_open (once: the batch went through m, not the view)", got)
	}
}

func TestBreakerStateString(t *testing.T) {
	for s, want := range map[redstream.BreakerState]string{redstream.BreakerClosed: "closed", redstream.BreakerHalfOpen: "half-open", redstream.BreakerOpen: "open", 7: "BreakerState(7)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}
