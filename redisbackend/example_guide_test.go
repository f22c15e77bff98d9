package redisbackend_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// ExampleNewLimiter_recommended is the setup the guides recommend, with everything visible:
// a Redis limiter with its default timeout (100 ms) and circuit breaker, an in-process
// fallback of the same spec while Redis fails, and its decisions counted by name.
func ExampleNewLimiter_recommended() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	spec := redstream.SlidingWindow(time.Minute, 2)

	redis, _ := redisbackend.NewLimiter(client, spec, redisbackend.Options{}) // 100 ms, default breaker
	policy, _ := redstream.WithFailurePolicy(redis, redstream.FailFallback, nil)
	limiter, _ := metrics.Named("example-recommended", policy)

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 3 {
		d, err := limiter.AllowN(ctx, "user:1", now, 1)
		fmt.Println(d.Allowed, err)
	}
	allowed, denied, _ := metrics.RateLimitCounters("example-recommended")
	fmt.Println("allowed:", allowed.Get(), "denied:", denied.Get())
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
	// allowed: 2 denied: 1
}

// ExampleOptions_logger gives a limiter its own logger. An outage logs two lines, however
// many decisions fail: a Warn when the circuit breaker opens (here) and an Info when it
// closes again.
func ExampleOptions_logger() {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	spec := redstream.TokenBucket(100, 50)
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { // level and message only, for a stable output
			if a.Key != slog.LevelKey && a.Key != slog.MessageKey && a.Key != "component" {
				return slog.Attr{}
			}
			return a
		},
	}))

	l, err := redisbackend.NewLimiter(client, spec, redisbackend.Options{
		Logger: logger.With("component", "ratelimit"),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	m.Close() // Redis goes away: the third failure opens the breaker, and logs it once
	for range 10 {
		redstream.Allow(ctx, l, "user:1")
	}
	fmt.Println(l.BreakerState())
	// Output:
	// level=WARN msg="redisbackend: limiter: backend failing, circuit breaker open; decisions fail at once (redstream.ErrCircuitOpen) and follow the failure policy" component=ratelimit
	// open
}
