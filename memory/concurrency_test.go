package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

func TestNewConcurrencyLimiterErrors(t *testing.T) {
	c := redstream.Concurrency(2, time.Second)
	for name, specs := range map[string][]redstream.Spec{
		"none":           nil,
		"no concurrency": {redstream.FixedWindow(time.Second, 3)},
		"two":            {c, c},
		"bad limit":      {redstream.Concurrency(0, time.Second)},
		"bad ttl":        {redstream.Concurrency(2, 0)},
		"over 65536":     {redstream.Concurrency(1<<16+1, time.Second)},
	} {
		if _, err := NewConcurrencyLimiter(specs, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestConcurrencySweep: keys whose leases all expired are forgotten once the map holds its
// mark of keys; a key holding a live lease is kept, and its lease still releases.
func TestConcurrencySweep(t *testing.T) {
	l, err := NewConcurrencyLimiter([]redstream.Spec{redstream.Concurrency(1, time.Second)}, Options{SweepThreshold: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held, _ := l.Acquire(ctx, "held", t0, 1)
	for _, k := range []string{"a", "b", "c"} {
		if lease, err := l.Acquire(ctx, k, t0, 1); err != nil || !lease.Allowed {
			t.Fatalf("acquire %s: %+v, %v", k, lease, err)
		}
	}
	later := t0.Add(1500 * time.Millisecond)
	if held, err = l.Extend(ctx, held, t0.Add(900*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "d", later, 1); err != nil {
		t.Fatal(err)
	}
	if n := l.leases.TrackedKeys(); n != 2 {
		t.Fatalf("%d keys after the sweep, want 2 (the extended lease's and the new one)", n)
	}
	if ok, err := l.Release(ctx, held, later); !ok || err != nil {
		t.Fatalf("release of the extended lease after the sweep: %v, %v", ok, err)
	}
	if _, err := l.Extend(ctx, held, later); !errors.Is(err, redstream.ErrLeaseLost) {
		t.Fatalf("extend after release: %v, want ErrLeaseLost", err)
	}
}
