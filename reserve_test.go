package redstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// TestReserveUnwraps: Reserve reaches the engine through the wrappers with an Unwrap()
// Limiter method, and refuses a limiter with no engine that reserves.
func TestReserveUnwraps(t *testing.T) {
	ctx := context.Background()
	m, err := redstream.Multi(func(specs []redstream.Spec) (redstream.Limiter, error) {
		return memory.NewMultiLimiter(specs, memory.Options{})
	}, redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(5, 0.01)}, redstream.Rule{Name: "hour", Spec: redstream.FixedWindow(time.Hour, 8)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := redstream.WithFailurePolicy(m, redstream.FailOpen, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := redstream.Reserve(ctx, p, "k", 5)
	if err != nil || !res.Allowed {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	if d, _ := p.AllowN(ctx, "k", time.Time{}, 1); d.Allowed {
		t.Fatalf("the bucket is empty after the reservation, yet %+v", d)
	}
	if err := res.Settle(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if d, _ := p.AllowN(ctx, "k", time.Time{}, 3); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after settling 2 of 5, AllowN(3) = %+v; want admitted, 0 remaining", d)
	}
	if _, err := redstream.Reserve(ctx, countingOnly{}, "k", 1); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Fatalf("Reserve on a limiter that cannot reserve = %v, want ErrInvalidConfig", err)
	}
}

// countingOnly is a limiter that cannot reserve.
type countingOnly struct{}

func (countingOnly) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return redstream.Decision{Allowed: true}, nil
}
