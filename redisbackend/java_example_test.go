package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// A Go service joins Java instances of the original framework on the same limit: the
// Java sliding window's sorted set is read and written as the Java side does.
func ExampleOptions_javaCompatible() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	// What a Java RedisSlidingWindowRateLimiter(redisson, "streaming:rl", 1000, 3) left
	// after admitting two requests for "user:1" 100 ms ago.
	ms := now.Add(-100 * time.Millisecond).UnixMilli()
	client.Do(ctx, client.B().Zadd().Key("streaming:rl:{user:1}").ScoreMember().
		ScoreMember(float64(ms), fmt.Sprintf("%d:1", ms)).ScoreMember(float64(ms), fmt.Sprintf("%d:2", ms)).Build())
	client.Do(ctx, client.B().Set().Key("streaming:rl:{user:1}:seq").Value("2").Build())

	shared, err := redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Second, 3),
		redisbackend.Options{JavaCompatible: true})
	if err != nil {
		panic(err)
	}
	own, _ := redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Second, 3), redisbackend.Options{})
	for i := 0; i < 2; i++ {
		d, _ := shared.AllowN(ctx, "user:1", now, 1)
		fmt.Printf("shared: allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := own.AllowN(ctx, "user:1", now, 1)
	fmt.Printf("own:    allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	fmt.Println(shared.Keys("user:1"), own.Keys("user:1"))
	// Output:
	// shared: allowed=true remaining=0 retry-after=0s
	// shared: allowed=false remaining=0 retry-after=900ms
	// own:    allowed=true remaining=2
	// [streaming:rl:{user:1} streaming:rl:{user:1}:seq] [streaming:rl:{user:1}:sliding.1000000.3]
}

// Limiters of different specs on the same user key never share state: each key carries its
// spec's fingerprint (the algorithm and its parameters in core units).
func ExampleLimiter_Keys() {
	client, stop := embedded()
	defer stop()
	tenPerMinute, _ := redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Minute, 10), redisbackend.Options{})
	burst, _ := redisbackend.NewLimiter(client, redstream.TokenBucket(10, 5), redisbackend.Options{})
	fmt.Println(tenPerMinute.Keys("user:1"))
	fmt.Println(burst.Keys("user:1"))
	// Output:
	// [streaming:rl:{user:1}:sliding.60000000.10]
	// [streaming:rl:{user:1}:token-bucket.200000.2000000.10]
}
