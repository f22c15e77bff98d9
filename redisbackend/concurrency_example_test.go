package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// Leases shared by every process on the same Redis: at most 2 exports of an account run at
// once, a crashed worker's slot returning when its lease expires.
func ExampleNewConcurrencyLimiter() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	leases, err := redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(2, time.Minute)}, redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // explicit times; the zero time reads Redis TIME
	a, _ := leases.Acquire(ctx, "account:7", now, 1)
	b, _ := leases.Acquire(ctx, "account:7", now, 1)
	c, _ := leases.Acquire(ctx, "account:7", now, 1)
	fmt.Printf("a=%v b=%v c=%v (retry after %v)\n", a.Allowed, b.Allowed, c.Allowed, c.RetryAfter)

	if _, err := leases.Release(ctx, a, now.Add(time.Second)); err != nil {
		panic(err)
	}
	c, _ = leases.Acquire(ctx, "account:7", now.Add(time.Second), 1)
	fmt.Printf("c=%v, expires at t+%v\n", c.Allowed, c.Expiry.Sub(now))
	fmt.Println(leases.Keys("account:7"))
	// Output:
	// a=true b=true c=false (retry after 1m0s)
	// c=true, expires at t+1m1s
	// [streaming:rl:{account:7}:m0.concurrency.60000000.2]
}
