package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// PeekN answers what the next request would get (a read-only script: nothing is recorded),
// so two peeks agree and the request then gets exactly that decision. PeekEach gives the
// same spec by spec for a multi-limiter.
func ExampleLimiter_PeekN() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	limiter, err := redisbackend.NewMultiLimiter(client, []redstream.Spec{
		redstream.TokenBucket(3, 1),            // bursts of 3, 1 per second
		redstream.FixedWindow(time.Minute, 10), // and 10 a minute
	}, redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		if _, err := limiter.AllowN(ctx, "user:1", now, 1); err != nil {
			panic(err)
		}
	}
	p1, _ := limiter.PeekN(ctx, "user:1", now, 1)
	p2, _ := limiter.PeekN(ctx, "user:1", now, 1)
	fmt.Printf("peek: allowed=%v remaining=%d retry-after=%v (again: %v)\n", p1.Allowed, p1.Remaining, p1.RetryAfter, p1 == p2)
	each, _ := limiter.PeekEach(ctx, "user:1", now, 1)
	for i, d := range each {
		fmt.Printf("limit %d: allowed=%v remaining=%d\n", i, d.Allowed, d.Remaining)
	}
	d, _ := limiter.AllowN(ctx, "user:1", now, 1)
	fmt.Println("the request gets the peeked decision:", d == p1)
	// Output:
	// peek: allowed=false remaining=0 retry-after=1s (again: true)
	// limit 0: allowed=false remaining=0
	// limit 1: allowed=true remaining=6
	// the request gets the peeked decision: true
}
