package wasmcore_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/wasmcore"
)

// A token bucket of 3 tokens refilling 1 per second, decided by the wasm core. The zero
// Options use the process-wide default Runtime (one instance per CPU).
func ExampleNewLimiter() {
	l, err := wasmcore.NewLimiter(redstream.TokenBucket(3, 1), wasmcore.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 4; i++ {
		d, _ := l.AllowN(ctx, "alice", t0, 1)
		fmt.Printf("allowed=%v remaining=%d retryAfter=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := l.AllowN(ctx, "alice", t0.Add(time.Second), 1)
	fmt.Printf("one second later: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// allowed=true remaining=2 retryAfter=0s
	// allowed=true remaining=1 retryAfter=0s
	// allowed=true remaining=0 retryAfter=0s
	// allowed=false remaining=0 retryAfter=1s
	// one second later: allowed=true remaining=0
}

// An all-or-nothing pair of limits on one key: 2 per second and 3 per minute.
func ExampleNewMultiLimiter() {
	l, err := wasmcore.NewMultiLimiter([]redstream.Spec{
		redstream.FixedWindow(time.Second, 2),
		redstream.SlidingWindow(time.Minute, 3),
	}, wasmcore.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
		d, _ := l.AllowN(ctx, "bob", t0.Add(at), 1)
		fmt.Printf("t=%v allowed=%v remaining=%d retryAfter=%v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t=0s allowed=true remaining=1 retryAfter=0s
	// t=0s allowed=true remaining=0 retryAfter=0s
	// t=0s allowed=false remaining=0 retryAfter=1s
	// t=1s allowed=true remaining=0 retryAfter=0s
	// t=2s allowed=false remaining=0 retryAfter=58s
}

// A windowed deduplicator: an element is a duplicate for one minute after it was last seen
// (CheckAndMark refreshes the time; exactly one minute later it is new again).
func ExampleNewDeduplicator() {
	d, err := wasmcore.NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Minute}, wasmcore.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 30 * time.Second, 89 * time.Second, 149 * time.Second} {
		dup, _ := d.CheckAndMarkAt(ctx, "order-42", t0.Add(at))
		fmt.Printf("t=%v duplicate=%v\n", at, dup)
	}
	// Output:
	// t=0s duplicate=false
	// t=30s duplicate=true
	// t=1m29s duplicate=true
	// t=2m29s duplicate=false
}

// A Runtime of its own, with a fixed pool of 2 instances, shared by the engines given it.
func ExampleNewRuntime() {
	ctx := context.Background()
	rt, err := wasmcore.NewRuntime(ctx, wasmcore.Config{Instances: 2})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	l, err := wasmcore.NewLimiter(redstream.SlidingWindow(time.Second, 10), wasmcore.Options{Runtime: rt})
	if err != nil {
		panic(err)
	}
	d, _ := l.AllowN(ctx, "k", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 4)
	fmt.Println(rt.Instances(), d.Allowed, d.Remaining)
	// Output: 2 true 6
}

// Module returns the WebAssembly module, for embedding the cores in another runtime.
func ExampleModule() {
	wasm := wasmcore.Module()
	fmt.Println(bytes.HasPrefix(wasm, []byte("\x00asm")), len(wasm) > 1<<20, wasmcore.ABIVersion)
	// Output: true true 2
}
