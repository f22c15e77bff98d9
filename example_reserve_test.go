package redstream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// An LLM token budget of 10,000 tokens a minute: each call reserves its worst case (its
// max_output), then settles what it used, so the unused tokens go back to the budget at
// once instead of blocking other calls for the rest of the minute.
func ExampleReserve() {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	limiter, err := memory.NewLimiter(redstream.FixedWindow(time.Minute, 10_000),
		memory.Options{Clock: func() time.Time { return start }})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, err := redstream.Reserve(ctx, limiter, "tenant:1", 4_000)
	if err != nil {
		panic(err)
	}
	fmt.Printf("reserved: allowed=%v remaining=%d settle by %v\n", res.Allowed, res.Remaining, res.Deadline.Sub(start))
	// ... the call runs and reports 1,250 tokens used ...
	if err := res.Settle(ctx, 1_250); err != nil {
		panic(err)
	}
	d, _ := limiter.PeekN(ctx, "tenant:1", time.Time{}, 1)
	fmt.Println("after settling:", d.Remaining+1, "left")
	// A second settlement changes nothing.
	fmt.Println(res.Settle(ctx, 0))
	// A request that failed before it ran gives everything back.
	res, _ = redstream.Reserve(ctx, limiter, "tenant:1", 4_000)
	_ = res.Cancel(ctx)
	d, _ = limiter.PeekN(ctx, "tenant:1", time.Time{}, 1)
	fmt.Println("after a cancelled call:", d.Remaining+1, "left")
	// Output:
	// reserved: allowed=true remaining=6000 settle by 1m0s
	// after settling: 8750 left
	// redstream: reservation already settled, denied or past its deadline
	// after a cancelled call: 8750 left
}

// Wait blocks until the limiter admits the request, sleeping exactly the RetryAfter each
// denial names (plus a little jitter), and gives up at once when ctx's deadline comes
// first.
func ExampleWait() {
	limiter, err := memory.NewLimiter(redstream.TokenBucket(1, 50), memory.Options{}) // one every 20 ms
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		d, err := redstream.Wait(ctx, limiter, "worker", 1)
		fmt.Println("admitted:", d.Allowed, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	_, err = redstream.Wait(short, limiter, "worker", 1)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// admitted: true <nil>
	// admitted: true <nil>
	// admitted: true <nil>
	// true
}
