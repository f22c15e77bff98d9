package redstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
)

// TestShadowAdmitsAndRecords: a limiter in shadow mode admits every request, marks exactly
// the requests the limit denies, and leaves the limit's state as enforcement would (a
// shadow denial consumes nothing), for every algorithm.
func TestShadowAdmitsAndRecords(t *testing.T) {
	specs := map[string]redstream.Spec{
		"token-bucket":    redstream.TokenBucket(3, 1),
		"leaky-bucket":    redstream.LeakyBucket(3, 1),
		"sliding":         redstream.SlidingWindow(time.Minute, 3),
		"sliding-counter": redstream.SlidingCounter(time.Minute, 3),
		"fixed":           redstream.FixedWindow(time.Minute, 3),
	}
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			enforced, err := memory.NewLimiter(spec, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			inner, _ := memory.NewLimiter(spec, memory.Options{})
			shadow := redstream.Shadow(inner)
			for i := range 8 {
				at := now.Add(time.Duration(i) * 100 * time.Millisecond)
				want, err := enforced.AllowN(ctx, "k", at, 1)
				if err != nil {
					t.Fatal(err)
				}
				got, err := shadow.AllowN(ctx, "k", at, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Allowed || got.Shadow != !want.Allowed {
					t.Fatalf("request %d: got Allowed %v Shadow %v, enforced Allowed %v", i, got.Allowed, got.Shadow, want.Allowed)
				}
				got.Allowed, got.Shadow = want.Allowed, false
				if got != want {
					t.Fatalf("request %d: shadow decision %+v, enforced %+v", i, got, want)
				}
			}
		})
	}
}

// TestShadowErrors: errors are the wrapped limiter's, never admitted.
func TestShadowErrors(t *testing.T) {
	mem, _ := memory.NewLimiter(redstream.SlidingWindow(time.Second, 1), memory.Options{})
	s := redstream.Shadow(mem)
	ctx := context.Background()
	if d, err := s.AllowN(ctx, "", time.Time{}, 1); !errors.Is(err, redstream.ErrEmptyKey) || d.Allowed || d.Shadow {
		t.Errorf("empty key: %+v, %v; want a denied zero decision and ErrEmptyKey", d, err)
	}
	if _, err := s.AllowN(ctx, "k", time.Time{}, 2); !errors.Is(err, redstream.ErrCostTooLarge) {
		t.Errorf("cost 2 of limit 1: %v, want ErrCostTooLarge", err)
	}
	backend := errors.New("backend down")
	if _, err := redstream.Shadow(&fakeLimiter{err: backend}).AllowN(ctx, "k", time.Time{}, 1); !errors.Is(err, backend) {
		t.Errorf("backend failure: %v, want it unchanged", err)
	}
}

// TestShadowBatch: AllowBatch through a shadow limiter admits what the limit denies and
// leaves the failed keys of a BatchError as they were.
func TestShadowBatch(t *testing.T) {
	mem, _ := memory.NewLimiter(redstream.FixedWindow(time.Minute, 1), memory.Options{})
	s := redstream.Shadow(mem)
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	ds, err := redstream.AllowBatch(ctx, s, []string{"a", "b", "a", "a"}, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantShadow := []bool{false, false, true, true}
	for i, d := range ds {
		if !d.Allowed || d.Shadow != wantShadow[i] {
			t.Errorf("key %d: Allowed %v Shadow %v, want true %v", i, d.Allowed, d.Shadow, wantShadow[i])
		}
	}
	be := &redstream.BatchError{Errs: []error{nil, errors.New("down")}}
	ds, err = redstream.AllowBatch(ctx, redstream.Shadow(&deniedBatch{n: 2, err: be}), []string{"x", "y"}, time.Time{}, 1)
	if !errors.As(err, &be) || !ds[0].Allowed || !ds[0].Shadow || ds[1].Allowed || ds[1].Shadow {
		t.Errorf("batch error: %+v, %v; want key 0 a shadow denial and key 1 a failed zero decision", ds, err)
	}
}

// deniedBatch batches, denying its n keys and returning err.
type deniedBatch struct {
	fakeLimiter
	n   int
	err error
}

func (b *deniedBatch) AllowBatch(context.Context, []string, time.Time, int64) ([]redstream.Decision, error) {
	return make([]redstream.Decision, b.n), b.err
}

// TestShadowCounted: metrics.Named counts a shadow denial as allowed and shadow-denied,
// and a failure policy inside the shadow limiter still reports its fallbacks to Named.
func TestShadowCounted(t *testing.T) {
	ctx := context.Background()
	failing := &fakeLimiter{err: errors.New("redisbackend: connection refused")}
	open, err := redstream.WithFailurePolicy(failing, redstream.FailOpen, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := metrics.Named("shadow-test-fallback", redstream.Shadow(open))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := n.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed || d.Shadow {
		t.Fatalf("fail-open under shadow: %+v, %v; want an admission that is no shadow denial", d, err)
	}
	_, _, errs := metrics.RateLimitCounters("shadow-test-fallback")
	if errs.Get() != 1 {
		t.Errorf("errors_total = %d, want 1 (the failure the policy answered)", errs.Get())
	}

	mem, _ := memory.NewLimiter(redstream.FixedWindow(time.Minute, 2), memory.Options{})
	n, _ = metrics.Named("shadow-test-count", redstream.Shadow(mem))
	for range 5 {
		if _, err := n.AllowN(ctx, "k", time.Unix(1_700_000_000, 0), 1); err != nil {
			t.Fatal(err)
		}
	}
	allowed, denied, _ := metrics.RateLimitCounters("shadow-test-count")
	shadow := metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_shadow_denied_total", "name", "shadow-test-count"))
	if allowed.Get() != 5 || denied.Get() != 0 || shadow.Get() != 3 {
		t.Errorf("allowed %d denied %d shadow denied %d, want 5 0 3", allowed.Get(), denied.Get(), shadow.Get())
	}
}

// TestShadowNil: Shadow of nil is a programmer's error.
func TestShadowNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Shadow(nil) did not panic")
		}
	}()
	redstream.Shadow(nil)
}
