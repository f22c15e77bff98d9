package redisbackend_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// embedded starts an in-process Redis (miniredis) and a rueidis client to it. Against a
// real server, use rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}}).
func embedded() (rueidis.Client, func()) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return c, func() { c.Close(); m.Close() }
}

func ExampleNewLimiter() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// A token bucket: bursts of 3, refilled at 1 token per second; keys under the default
	// "streaming:rl" prefix.
	limiter, err := redisbackend.NewLimiter(client, redstream.TokenBucket(3, 1), redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // explicit times; Allow uses Redis TIME
	for i := 0; i < 4; i++ {
		d, err := limiter.AllowN(ctx, "user:1", now, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	fmt.Println(limiter.Keys("user:1"))
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1s
	// [streaming:rl:{user:1}:token-bucket.1000000.3000000.3]
}

func ExampleNewLimiter_slidingWindow() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// The Java starter's Redis sliding window: 2 requests per 1000 ms, keys
	// "streaming:rl:{key}:sliding.1000000.2".
	limiter, err := redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Second, 2), redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond, time.Second} {
		d, _ := limiter.AllowN(ctx, "203.0.113.7", start.Add(at), 1)
		fmt.Printf("+%v allowed=%v retry-after=%v\n", at, d.Allowed, d.RetryAfter)
	}
	// Output:
	// +0s allowed=true retry-after=0s
	// +300ms allowed=true retry-after=0s
	// +600ms allowed=false retry-after=400ms
	// +1s allowed=true retry-after=0s
}

func ExampleNewMultiLimiter() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// 2 per second AND 3 per minute on every key, all-or-nothing, one script per decision.
	limiter, err := redisbackend.NewMultiLimiter(client, []redstream.Spec{
		redstream.SlidingWindow(time.Second, 2),
		redstream.FixedWindow(time.Minute, 3),
	}, redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 0, 2 * time.Second, 3 * time.Second} {
		d, _ := limiter.AllowN(ctx, "user:1", start.Add(at), 1)
		fmt.Printf("+%v allowed=%v limit=%d remaining=%d retry-after=%v\n", at, d.Allowed, d.Limit, d.Remaining, d.RetryAfter)
	}
	// Output:
	// +0s allowed=true limit=2 remaining=1 retry-after=0s
	// +0s allowed=true limit=2 remaining=0 retry-after=0s
	// +0s allowed=false limit=2 remaining=0 retry-after=1s
	// +2s allowed=true limit=3 remaining=0 retry-after=0s
	// +3s allowed=false limit=3 remaining=0 retry-after=57s
}

func ExampleLimiter_AllowBatch() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	limiter, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Minute, 1), redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Many keys, one pipelined round trip.
	ds, err := limiter.AllowBatch(ctx, []string{"a", "b", "a", "c"}, now, 1)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Print(d.Allowed, " ")
	}
	fmt.Println()
	// Output:
	// true true false true
}

// Example_failurePolicy wraps a Redis limiter in redstream.WithFailurePolicy: while Redis
// fails, an in-process limiter of the same spec decides (a nil fallback asks the Redis
// limiter for one, NewLocal).
func Example_failurePolicy() {
	client, stop := embedded()
	ctx := context.Background()
	spec := redstream.TokenBucket(2, 1)

	redis, err := redisbackend.NewLimiter(client, spec, redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	limiter, err := redstream.WithFailurePolicy(redis, redstream.FailFallback, nil)
	if err != nil {
		panic(err)
	}
	stop() // Redis goes away
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		d, err := limiter.AllowN(ctx, "user:1", now, 1)
		fmt.Println(d.Allowed, err)
	}
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
}

func ExampleNewDeduplicator() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// The seed's windowDedup("dedup:orders", 1 hour).
	d, err := redisbackend.NewDeduplicator(client, "dedup:orders",
		redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}, redisbackend.DedupOptions{})
	if err != nil {
		panic(err)
	}
	w := d.(redstream.TimedDeduplicator) // the windowed strategy takes explicit times too
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 30 * time.Minute, 90 * time.Minute, 151 * time.Minute} {
		dup, _ := w.CheckAndMarkAt(ctx, "order-1", start.Add(at))
		fmt.Printf("+%v duplicate=%v\n", at, dup)
	}
	// Output:
	// +0s duplicate=false
	// +30m0s duplicate=true
	// +1h30m0s duplicate=false
	// +2h31m0s duplicate=false
}

// A Bloom filter of a million expected elements at a 3% false-positive rate; the Redis
// deduplicators decide many elements in one round trip.
func ExampleNewDeduplicator_bloom() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	spec := redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: 1_000_000, FPRate: 0.03}
	d, err := redisbackend.NewDeduplicator(client, "seen-ids", spec, redisbackend.DedupOptions{})
	if err != nil {
		panic(err)
	}
	p, _ := spec.BloomParams()
	fmt.Printf("k=%d, %.1f bits per element\n", p.K, float64(p.Bits)/float64(spec.Insertions))
	batch := d.(interface {
		CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error)
	})
	dups, _ := batch.CheckAndMarkBatch(ctx, []string{"id-1", "id-2", "id-1"})
	fmt.Println(dups)
	n, _ := d.UniqueCount(ctx)
	fmt.Println(n)
	// Output:
	// k=5, 7.3 bits per element
	// [false false true]
	// 2
}

// ExampleConnect starts a service while Redis is down: the limiter answers from its
// in-process fallback until the Connector has made its client, then from Redis.
func ExampleConnect() {
	l, err := net.Listen("tcp", "127.0.0.1:0") // an address where no Redis runs yet
	if err != nil {
		panic(err)
	}
	addr := l.Addr().String()
	l.Close()

	conn, err := redisbackend.Connect(func(context.Context) (rueidis.Client, error) {
		return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	}, redisbackend.ConnectOptions{MinBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer conn.Close() // closes the client it made
	redis, err := conn.NewLimiter(redstream.FixedWindow(time.Hour, 5), redisbackend.Options{})
	if err != nil {
		panic(err)
	}
	limiter, err := redstream.WithFailurePolicy(redis, redstream.FailFallback, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, err := limiter.AllowN(ctx, "user:1", time.Time{}, 1)
	fmt.Println("before Redis:", d.Allowed, err, d.Remaining)

	m := miniredis.NewMiniRedis() // Redis starts
	if err := m.StartAddr(addr); err != nil {
		panic(err)
	}
	defer m.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := conn.Wait(wctx); err != nil {
		panic(err)
	}
	for i := 0; i < 2; i++ {
		d, err = limiter.AllowN(ctx, "user:1", time.Time{}, 1)
		fmt.Println("in Redis:", d.Allowed, err, d.Remaining)
	}
	// Output:
	// before Redis: true <nil> 4
	// in Redis: true <nil> 4
	// in Redis: true <nil> 3
}
