package redstream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
)

func ExampleNamed() {
	mem, err := memory.NewLimiter(redstream.SlidingWindow(time.Second, 2), memory.Options{})
	if err != nil {
		panic(err)
	}
	api, err := metrics.Named("example-api", mem) // counts redis_streaming_rl_*{name="example-api"}
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	for range 3 {
		d, _ := api.AllowN(ctx, "user:1", now, 1)
		fmt.Println(d.Allowed)
	}
	allowed, denied, _ := metrics.RateLimitCounters("example-api")
	fmt.Println("allowed:", allowed.Get(), "denied:", denied.Get())
	// Output:
	// true
	// true
	// false
	// allowed: 2 denied: 1
}

func ExampleRegistry() {
	api1, _ := memory.NewLimiter(redstream.SlidingWindow(time.Second, 10), memory.Options{})
	api2, _ := memory.NewLimiter(redstream.TokenBucket(100, 50), memory.Options{})
	reg, err := redstream.NewRegistry(map[string]redstream.Limiter{"api1": api1, "api2": api2})
	if err != nil {
		panic(err)
	}
	for _, name := range reg.Names() {
		fmt.Println(name)
	}
	if _, err := reg.Get("api3"); errors.Is(err, redstream.ErrNotFound) {
		fmt.Println(err)
	}
	// Output:
	// api1
	// api2
	// redstream: not found: limiter "api3"
}

func ExampleMulti() {
	limiter, err := redstream.Multi(
		func(specs []redstream.Spec) (redstream.Limiter, error) {
			return memory.NewMultiLimiter(specs, memory.Options{})
		},
		redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(2, 1)},
		redstream.Rule{Name: "daily", Spec: redstream.FixedWindow(24*time.Hour, 3)},
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 0, time.Minute, 2 * time.Minute} {
		d, _ := limiter.AllowN(ctx, "user:1", day.Add(at), 1)
		fmt.Printf("+%v allowed=%v remaining=%d\n", at, d.Allowed, d.Remaining)
	}
	// Output:
	// +0s allowed=true remaining=1
	// +0s allowed=true remaining=0
	// +0s allowed=false remaining=0
	// +1m0s allowed=true remaining=0
	// +2m0s allowed=false remaining=0
}

// unreachable stands for a limiter whose backend is down: every call fails.
type unreachable struct{}

func (unreachable) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return redstream.Decision{}, errors.New("redis: connection refused")
}

func ExampleWithFailurePolicy() {
	var broken redstream.Limiter = unreachable{} // e.g. a Redis limiter whose server is down
	local, _ := memory.NewLimiter(redstream.FixedWindow(time.Minute, 1), memory.Options{})

	open, _ := redstream.WithFailurePolicy(broken, redstream.FailOpen, nil)
	fallback, _ := redstream.WithFailurePolicy(broken, redstream.FailFallback, local)
	ctx := context.Background()
	for range 2 {
		o, _ := redstream.Allow(ctx, open, "k")
		f, _ := redstream.Allow(ctx, fallback, "k")
		_, err := redstream.Allow(ctx, broken, "k")
		fmt.Println("fail-open:", o.Allowed, "fallback:", f.Allowed, "fail-closed:", err)
	}
	// Output:
	// fail-open: true fallback: true fail-closed: redis: connection refused
	// fail-open: true fallback: false fail-closed: redis: connection refused
}
