package redstream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
)

func ExampleShadow() {
	mem, err := memory.NewLimiter(redstream.SlidingWindow(time.Minute, 2), memory.Options{})
	if err != nil {
		panic(err)
	}
	// A new limit on trial: decided and counted, never enforced.
	trial, err := metrics.Named("example-trial", redstream.Shadow(mem))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	for range 3 {
		d, _ := trial.AllowN(ctx, "user:1", now, 1)
		fmt.Println(d.Allowed, d.Shadow, d.RetryAfter)
	}
	allowed, denied, _ := metrics.RateLimitCounters("example-trial")
	shadow := metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_shadow_denied_total", "name", "example-trial"))
	fmt.Println("allowed:", allowed.Get(), "denied:", denied.Get(), "shadow denied:", shadow.Get())
	// Output:
	// true false 0s
	// true false 0s
	// true true 1m0s
	// allowed: 3 denied: 0 shadow denied: 1
}
