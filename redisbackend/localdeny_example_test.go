package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// A client hammering one key far over its limit: after Redis's first denial, the limiter
// answers the next requests in process, with the decisions Redis would give, and counts them.
func ExampleOptions_localDenials() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// 2 requests per second per key; local denials are on by default.
	limiter, err := redisbackend.NewLimiter(client, redstream.TokenBucket(2, 2), redisbackend.Options{KeyPrefix: "example:local"})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 6; i++ {
		at := now.Add(time.Duration(i) * 100 * time.Millisecond)
		d, err := limiter.AllowN(ctx, "abuser", at, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("+%v allowed=%v retry-after=%v\n", at.Sub(now), d.Allowed, d.RetryAfter)
	}
	fmt.Println("answered without Redis:", metrics.LocalDeniedCounter("example:local").Get())
	// Output:
	// +0s allowed=true retry-after=0s
	// +100ms allowed=true retry-after=0s
	// +200ms allowed=false retry-after=300ms
	// +300ms allowed=false retry-after=200ms
	// +400ms allowed=false retry-after=100ms
	// +500ms allowed=true retry-after=0s
	// answered without Redis: 2
}
