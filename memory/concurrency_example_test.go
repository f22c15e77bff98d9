package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// At most 2 jobs of a tenant at once, each lease freeing itself 30 s after it was taken or
// last extended: a third job waits for a release, or for the oldest lease to expire (a
// crashed worker's).
func ExampleNewConcurrencyLimiter() {
	leases, err := memory.NewConcurrencyLimiter([]redstream.Spec{redstream.Concurrency(2, 30*time.Second)}, memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // explicit times; the zero time reads the clock
	a, _ := leases.Acquire(ctx, "tenant:1", now, 1)
	b, _ := leases.Acquire(ctx, "tenant:1", now.Add(time.Second), 1)
	c, _ := leases.Acquire(ctx, "tenant:1", now.Add(2*time.Second), 1)
	fmt.Printf("a=%v b=%v c=%v (retry after %v)\n", a.Allowed, b.Allowed, c.Allowed, c.RetryAfter)

	a, _ = leases.Extend(ctx, a, now.Add(10*time.Second)) // a heartbeat: a now expires at t+40s
	fmt.Println("a expires at", a.Expiry.Sub(now))
	released, _ := leases.Release(ctx, b, now.Add(11*time.Second))
	again, _ := leases.Release(ctx, b, now.Add(12*time.Second)) // a second release changes nothing
	fmt.Printf("released b: %v, again: %v\n", released, again)
	c, _ = leases.Acquire(ctx, "tenant:1", now.Add(12*time.Second), 1)
	fmt.Println("c:", c.Allowed)
	// Output:
	// a=true b=true c=false (retry after 28s)
	// a expires at 40s
	// released b: true, again: false
	// c: true
}

// A concurrency limit composed with a rate limit on the same key, all-or-nothing: a job
// needs a free slot and a token; a denial by either takes nothing from the other.
func ExampleNewConcurrencyLimiter_withRate() {
	leases, err := memory.NewConcurrencyLimiter([]redstream.Spec{
		redstream.Concurrency(5, time.Minute),
		redstream.TokenBucket(2, 1), // bursts of 2, then 1 job per second
	}, memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		l, _ := leases.Acquire(ctx, "tenant:1", now, 1)
		fmt.Printf("job %d: allowed=%v retry-after=%v\n", i, l.Allowed, l.RetryAfter)
		if l.Allowed {
			_, _ = leases.Release(ctx, l, now) // the slot comes back; the token does not
		}
	}
	// Output:
	// job 0: allowed=true retry-after=0s
	// job 1: allowed=true retry-after=0s
	// job 2: allowed=false retry-after=1s
}
