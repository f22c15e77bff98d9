package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// A hot key under its limit: with leases, the limiter takes a slice of the key's budget in
// one script call and admits the next requests from it in process. Peek reads Redis, where
// the slices taken count as spent until they are used or given back.
func ExampleQuotaOptions() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// 10,000 requests a minute per key; leases of at most 100 ms and 10% of the limit.
	limiter, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Minute, 10_000), redisbackend.Options{
		KeyPrefix: "example:lease",
		Quota:     redisbackend.QuotaOptions{Enabled: true, Duration: 100 * time.Millisecond, MaxShare: 0.1},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted := 0
	for i := 0; i < 5000; i++ { // 10,000 requests per second for half a second
		d, err := limiter.AllowN(ctx, "hot", now.Add(time.Duration(i)*100*time.Microsecond), 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	fmt.Println("admitted:", admitted)
	peek, err := limiter.PeekN(ctx, "hot", now.Add(500*time.Millisecond), 1)
	if err != nil {
		panic(err)
	}
	// 10,000 - 5,000 admitted - 502 the current lease holds and has not admitted yet.
	fmt.Println("remaining in Redis:", peek.Remaining)
	// Output:
	// admitted: 5000
	// remaining in Redis: 4498
}
