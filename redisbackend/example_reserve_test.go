package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// A reservation on a multi-limiter takes its estimate from every limit, or nothing when
// one of them denies; Settle then gives each limit back what the request did not use.
func ExampleLimiter_ReserveN() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	limiter, err := redisbackend.NewMultiLimiter(client, []redstream.Spec{
		redstream.TokenBucket(100, 1),           // bursts of 100 units, 1 a second
		redstream.FixedWindow(time.Hour, 1_000), // and 1,000 an hour
	}, redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := limiter.ReserveN(ctx, "tenant:1", now, 80)
	if err != nil {
		panic(err)
	}
	fmt.Printf("reserved 80: allowed=%v remaining=%d\n", res.Allowed, res.Remaining)
	// 30 more do not fit the bucket: denied, and the hourly window keeps its 920.
	denied, _ := limiter.ReserveN(ctx, "tenant:1", now, 30)
	fmt.Println("reserve 30 more: allowed =", denied.Allowed)
	if err := res.Settle(ctx, 20); err != nil {
		panic(err)
	}
	each, _ := limiter.PeekEach(ctx, "tenant:1", now, 1)
	fmt.Printf("after settling 20: bucket %d left, window %d left\n", each[0].Remaining+1, each[1].Remaining+1)
	// Output:
	// reserved 80: allowed=true remaining=20
	// reserve 30 more: allowed = false
	// after settling 20: bucket 80 left, window 980 left
}
