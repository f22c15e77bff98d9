package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/failure"
	"github.com/redstream-go/redstream/metrics"
)

func fallbackCount(t testing.TB, name string, reason failure.Reason) uint64 {
	t.Helper()
	return metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_fallback_total", "name", name, "reason", string(reason))).Get()
}

// breakerFake is an engine with a circuit breaker.
type breakerFake struct {
	fakeLimiter
	state redstream.BreakerState
}

func (b *breakerFake) BreakerState() redstream.BreakerState { return b.state }

// TestNamedCountsPolicyAnswers: Named outside WithFailurePolicy counts the failures the
// policy hides from it; inside, it counts the errors it sees and the policy's answers.
func TestNamedCountsPolicyAnswers(t *testing.T) {
	ctx := context.Background()
	down := &fakeLimiter{err: fmt.Errorf("engine: %w", context.DeadlineExceeded)}

	outer := "degraded-outer"
	p, err := redstream.WithFailurePolicy(down, redstream.FailOpen, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := metrics.Named(outer, p)
	for i := 0; i < 3; i++ {
		if d, err := n.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	if n.Unwrap() != p {
		t.Error("Unwrap does not return the limiter given to Named")
	}
	if e, a, f := counter(t, "redis_streaming_rl_errors_total", outer), counter(t, "redis_streaming_rl_allowed_total", outer), fallbackCount(t, outer, failure.Timeout); e != 3 || a != 3 || f != 3 {
		t.Errorf("outside: errors %d, allowed %d, fallback{timeout} %d; want 3, 3, 3", e, a, f)
	}

	inner := "degraded-inner"
	ni, _ := metrics.Named(inner, down)
	pi, _ := redstream.WithFailurePolicy(ni, redstream.FailOpen, nil)
	for i := 0; i < 2; i++ {
		if d, err := pi.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	if e, a, f := counter(t, "redis_streaming_rl_errors_total", inner), counter(t, "redis_streaming_rl_allowed_total", inner), fallbackCount(t, inner, failure.Timeout); e != 2 || a != 0 || f != 2 {
		t.Errorf("inside: errors %d, allowed %d, fallback{timeout} %d; want 2, 0, 2", e, a, f)
	}

	// A batch: every key counted once.
	ds, err := n.AllowBatch(ctx, []string{"a", "b"}, time.Time{}, 1)
	if err != nil || len(ds) != 2 {
		t.Fatal(ds, err)
	}
	if e, f := counter(t, "redis_streaming_rl_errors_total", outer), fallbackCount(t, outer, failure.Timeout); e != 5 || f != 5 {
		t.Errorf("after a batch of 2: errors %d, fallback %d; want 5, 5", e, f)
	}
	// Fail-closed batch: errors per key.
	closed := "degraded-closed"
	nc, _ := metrics.Named(closed, down)
	if _, err := nc.AllowBatch(ctx, []string{"a", "b", "c"}, time.Time{}, 1); err == nil {
		t.Fatal("fail-closed batch without an error")
	}
	if e := counter(t, "redis_streaming_rl_errors_total", closed); e != 3 {
		t.Errorf("fail-closed batch: errors %d, want 3", e)
	}
}

func TestNamedObserveForwards(t *testing.T) {
	down := &fakeLimiter{err: fmt.Errorf("engine: %w", redstream.ErrCircuitOpen)}
	p, _ := redstream.WithFailurePolicy(down, redstream.FailOpen, nil)
	inner, _ := metrics.Named("degraded-fwd-inner", p)
	outer, _ := metrics.Named("degraded-fwd-outer", inner) // Named(Named(policy))
	if _, err := outer.AllowN(context.Background(), "k", time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"degraded-fwd-inner", "degraded-fwd-outer"} {
		if e, f := counter(t, "redis_streaming_rl_errors_total", name), fallbackCount(t, name, failure.BreakerOpen); e != 1 || f != 1 {
			t.Errorf("%s: errors %d, fallback{breaker_open} %d; want 1, 1", name, e, f)
		}
	}
	plain, _ := metrics.Named("degraded-fwd-plain", &fakeLimiter{})
	if v, ok := failure.View(plain, nil); ok || v != plain {
		t.Error("failure.View without a policy inside should return the NamedLimiter itself and false")
	}
}

func TestNamedBreakerGauge(t *testing.T) {
	eng := &breakerFake{state: redstream.BreakerOpen}
	p, _ := redstream.WithFailurePolicy(eng, redstream.FailOpen, nil)
	if _, err := metrics.Named("degraded-gauge", p); err != nil {
		t.Fatal(err)
	}
	g := metrics.RateLimit.GetOrCreateGauge(metrics.Name("redis_streaming_rl_breaker_state", "name", "degraded-gauge"), nil)
	if g.Get() != 2 {
		t.Errorf("gauge = %v, want 2 (open)", g.Get())
	}
	eng.state = redstream.BreakerClosed
	if g.Get() != 0 {
		t.Errorf("gauge = %v, want 0 (closed)", g.Get())
	}
	// A new limiter under the same name: the gauge reads it.
	eng2 := &breakerFake{state: redstream.BreakerHalfOpen}
	if _, err := metrics.Named("degraded-gauge", eng2); err != nil {
		t.Fatal(err)
	}
	if g.Get() != 1 {
		t.Errorf("gauge = %v after re-creating the limiter, want 1 (half-open)", g.Get())
	}
}

// TestNamedPolicyAllocs: counting through a failure policy allocates nothing, healthy
// or failing.
func TestNamedPolicyAllocs(t *testing.T) {
	ctx := context.Background()
	for name, inner := range map[string]*fakeLimiter{
		"healthy": {d: redstream.Decision{Allowed: true}},
		"failing": {err: errors.New("down")},
	} {
		p, _ := redstream.WithFailurePolicy(inner, redstream.FailOpen, nil)
		n, _ := metrics.Named("degraded-allocs-"+name, p)
		if a := testing.AllocsPerRun(1000, func() { n.AllowN(ctx, "k", time.Time{}, 1) }); a != 0 {
			t.Errorf("%s: Named(WithFailurePolicy).Allow allocates %v per call, want 0", name, a)
		}
	}
}
