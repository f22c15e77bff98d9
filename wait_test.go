package redstream_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// countingLimiter counts the decisions it passes on.
type countingLimiter struct {
	redstream.Limiter
	calls atomic.Int64
}

func (c *countingLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	c.calls.Add(1)
	return c.Limiter.AllowN(ctx, key, now, n)
}

func newCounting(t *testing.T, spec redstream.Spec) *countingLimiter {
	t.Helper()
	l, err := memory.NewLimiter(spec, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &countingLimiter{Limiter: l}
}

func TestWaitSleepsRetryAfter(t *testing.T) {
	ctx := context.Background()
	l := newCounting(t, redstream.TokenBucket(1, 20)) // one token every 50 ms
	if d, _ := redstream.Allow(ctx, l, "k"); !d.Allowed {
		t.Fatal("the first request is denied")
	}
	start := time.Now()
	d, err := redstream.Wait(ctx, l, "k", 1)
	if err != nil || !d.Allowed {
		t.Fatalf("Wait = %+v, %v", d, err)
	}
	if el := time.Since(start); el < 45*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the token was earned back (50 ms)", el)
	}
	// Allow, one denial, then (sleeping at least RetryAfter) the admission; the clocks'
	// microsecond truncation may cost one more denial of a microsecond.
	if got := l.calls.Load(); got < 3 || got > 4 {
		t.Fatalf("%d decisions, want 3 (Allow, the denial, the admission) or 4", got)
	}
}

func TestWaitDeadlineBeforeRetryAfter(t *testing.T) {
	l := newCounting(t, redstream.TokenBucket(1, 0.1)) // one token every 10 s
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	redstream.Allow(ctx, l, "k")
	start := time.Now()
	d, err := redstream.Wait(ctx, l, "k", 1)
	if !errors.Is(err, context.DeadlineExceeded) || d.Allowed || d.RetryAfter < 9*time.Second {
		t.Fatalf("Wait = %+v, %v; want the denial and context.DeadlineExceeded", d, err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("Wait took %v; it must return at once", el)
	}
	if got := l.calls.Load(); got != 2 {
		t.Fatalf("%d decisions, want 2", got)
	}
}

func TestWaitCancelled(t *testing.T) {
	l := newCounting(t, redstream.TokenBucket(1, 1)) // one token a second
	ctx, cancel := context.WithCancel(context.Background())
	redstream.Allow(ctx, l, "k")
	time.AfterFunc(20*time.Millisecond, cancel)
	d, err := redstream.Wait(ctx, l, "k", 1)
	if !errors.Is(err, context.Canceled) || d.Allowed {
		t.Fatalf("Wait = %+v, %v; want context.Canceled", d, err)
	}
}

func TestWaitBadInput(t *testing.T) {
	l := newCounting(t, redstream.FixedWindow(time.Second, 3))
	if _, err := redstream.Wait(context.Background(), l, "k", 4); !errors.Is(err, redstream.ErrCostTooLarge) {
		t.Fatalf("Wait(4) = %v, want ErrCostTooLarge", err)
	}
	if _, err := redstream.Wait(context.Background(), l, "", 1); !errors.Is(err, redstream.ErrEmptyKey) {
		t.Fatalf("Wait on an empty key = %v, want ErrEmptyKey", err)
	}
}

// TestWaitHerd: waiters denied together are all admitted, each exactly once, and their
// retries stay few: the jitter spreads them, and none asks before its RetryAfter.
func TestWaitHerd(t *testing.T) {
	l := newCounting(t, redstream.TokenBucket(1, 200)) // one token every 5 ms
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	redstream.Allow(ctx, l, "k")
	const waiters = 10
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, err := redstream.Wait(ctx, l, "k", 1); err != nil || !d.Allowed {
				t.Errorf("Wait = %+v, %v", d, err)
				return
			}
			admitted.Add(1)
		}()
	}
	wg.Wait()
	if admitted.Load() != waiters {
		t.Fatalf("%d admitted, want %d", admitted.Load(), waiters)
	}
	// Each admission is preceded by denials of the waiters still waiting; a herd with no
	// jitter and early wake-ups would make thousands.
	if got := l.calls.Load(); got > 1+waiters*waiters*3 {
		t.Fatalf("%d decisions for %d waiters", got, waiters)
	}
}
