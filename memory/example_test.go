package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// A sliding window of 5 requests per second: the 6th request is denied until the first
// one is a full window old. Explicit times make the example reproducible; Allow uses the
// limiter's clock instead.
func ExampleNewLimiter() {
	limiter, err := memory.NewLimiter(redstream.SlidingWindow(time.Second, 5), memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 6; i++ {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		d, _ := limiter.AllowN(ctx, "user:1", at, 1)
		fmt.Printf("t+%v allowed=%v remaining=%d retryAfter=%v\n", at.Sub(start), d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := limiter.AllowN(ctx, "user:1", start.Add(time.Second), 1)
	fmt.Printf("t+1s allowed=%v\n", d.Allowed)
	// Output:
	// t+0s allowed=true remaining=4 retryAfter=0s
	// t+100ms allowed=true remaining=3 retryAfter=0s
	// t+200ms allowed=true remaining=2 retryAfter=0s
	// t+300ms allowed=true remaining=1 retryAfter=0s
	// t+400ms allowed=true remaining=0 retryAfter=0s
	// t+500ms allowed=false remaining=0 retryAfter=500ms
	// t+1s allowed=true
}

// A token bucket of capacity 10 refilling 5 tokens per second: a new key admits a burst of
// 10, then one request every 200 ms.
func ExampleNewLimiter_tokenBucket() {
	limiter, err := memory.NewLimiter(redstream.TokenBucket(10, 5), memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted := 0
	for i := 0; i < 15; i++ {
		if d, _ := limiter.AllowN(ctx, "user:1", start, 1); d.Allowed {
			admitted++
		}
	}
	fmt.Println("burst admitted:", admitted)
	d, _ := limiter.AllowN(ctx, "user:1", start, 1)
	fmt.Println("next one in:", d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "user:1", start.Add(200*time.Millisecond), 1)
	fmt.Println("after 200ms allowed:", d.Allowed)
	// Output:
	// burst admitted: 10
	// next one in: 200ms
	// after 200ms allowed: true
}

// A leaky bucket of capacity 2 leaking 1 per second admits 2 at once and denies the 3rd;
// Delay tells each admitted request how long to wait so that requests leave 1 s apart.
func ExampleNewLimiter_leakyBucket() {
	limiter, err := memory.NewLimiter(redstream.LeakyBucket(2, 1), memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 0, time.Second} {
		d, _ := limiter.AllowN(ctx, "queue", start.Add(at), 1)
		fmt.Printf("t+%v allowed=%v delay=%v retryAfter=%v\n", at, d.Allowed, d.Delay, d.RetryAfter)
	}
	// Output:
	// t+0s allowed=true delay=0s retryAfter=0s
	// t+0s allowed=true delay=1s retryAfter=0s
	// t+0s allowed=false delay=0s retryAfter=1s
	// t+1s allowed=true delay=1s retryAfter=0s
}

// An injected clock drives Allow; tests move it by hand.
func ExampleOptions_clock() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limiter, err := memory.NewLimiter(redstream.FixedWindow(time.Minute, 1), memory.Options{
		Clock: func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d1, _ := limiter.AllowN(ctx, "user:1", time.Time{}, 1)
	d2, _ := limiter.AllowN(ctx, "user:1", time.Time{}, 1)
	now = now.Add(time.Minute)
	d3, _ := limiter.AllowN(ctx, "user:1", time.Time{}, 1)
	fmt.Println(d1.Allowed, d2.Allowed, d3.Allowed)
	// Output:
	// true false true
}

// Two limits on one key, all-or-nothing: 2 per second and 3 per minute. A request the
// per-minute limit denies is not recorded by the per-second one either.
func ExampleNewMultiLimiter() {
	limiter, err := memory.NewMultiLimiter([]redstream.Spec{
		redstream.SlidingWindow(time.Second, 2),
		redstream.SlidingWindow(time.Minute, 3),
	}, memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 0, time.Second, time.Second, 2 * time.Second} {
		d, _ := limiter.AllowN(ctx, "user:1", start.Add(at), 1)
		fmt.Printf("t+%v allowed=%v remaining=%d retryAfter=%v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t+0s allowed=true remaining=1 retryAfter=0s
	// t+0s allowed=true remaining=0 retryAfter=0s
	// t+0s allowed=false remaining=0 retryAfter=1s
	// t+1s allowed=true remaining=0 retryAfter=0s
	// t+1s allowed=false remaining=0 retryAfter=59s
	// t+2s allowed=false remaining=0 retryAfter=58s
}

// The factory builds a deduplicator by strategy; CheckAndMark reports false exactly once
// per new element.
func ExampleNewDeduplicator() {
	dedup, err := memory.NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupSet}, memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, order := range []string{"order-1", "order-2", "order-1"} {
		dup, _ := dedup.CheckAndMark(ctx, order)
		if dup {
			fmt.Println(order, "duplicate, skipped")
			continue
		}
		fmt.Println(order, "processed")
	}
	n, _ := dedup.UniqueCount(ctx)
	fmt.Println("unique:", n)
	// Output:
	// order-1 processed
	// order-2 processed
	// order-1 duplicate, skipped
	// unique: 2
}

// A windowed deduplicator forgets an element one window after it was last seen; exactly
// one window later it is new again.
func ExampleNewDeduplicator_windowed() {
	d, err := memory.NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}, memory.Options{})
	if err != nil {
		panic(err)
	}
	dedup := d.(redstream.TimedDeduplicator) // the windowed strategy takes explicit times too
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 59 * time.Minute, 59*time.Minute + time.Hour} {
		dup, _ := dedup.CheckAndMarkAt(ctx, "order-1", start.Add(at))
		fmt.Printf("t+%v duplicate=%v\n", at, dup)
	}
	// Output:
	// t+0s duplicate=false
	// t+59m0s duplicate=true
	// t+1h59m0s duplicate=false
}

// A Bloom filter sized for a million elements at a 1% false-positive rate takes about
// 1.2 MB; it never forgets an element.
func ExampleNewDeduplicator_bloom() {
	spec := redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: 1_000_000, FPRate: 0.01}
	dedup, err := memory.NewDeduplicator(spec, memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	p, _ := spec.BloomParams()
	fmt.Printf("%d bits, %d hash functions\n", p.Bits, p.K)
	for i := 0; i < 1000; i++ {
		dedup.MarkSeen(ctx, fmt.Sprintf("event-%d", i))
	}
	dup, _ := dedup.IsDuplicate(ctx, "event-42")
	added, _ := dedup.UniqueCount(ctx)
	fmt.Println("event-42 seen:", dup, "added:", added)
	// Output:
	// 9585059 bits, 7 hash functions
	// event-42 seen: true added: 1000
}
