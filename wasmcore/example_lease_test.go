package wasmcore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/wasmcore"
)

// Two jobs per account at once, decided in the module: a third waits for a release, and a
// holder that dies frees its slot when its lease expires.
func ExampleNewConcurrencyLimiter() {
	leases, err := wasmcore.NewConcurrencyLimiter([]redstream.Spec{redstream.Concurrency(2, 30*time.Second)}, wasmcore.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, _ := leases.Acquire(ctx, "account:7", t0, 1)
	b, _ := leases.Acquire(ctx, "account:7", t0, 1)
	c, _ := leases.Acquire(ctx, "account:7", t0, 1)
	fmt.Printf("a=%v b=%v c=%v (retry after %v)\n", a.Allowed, b.Allowed, c.Allowed, c.RetryAfter)
	released, _ := leases.Release(ctx, a, t0.Add(time.Second))
	again, _ := leases.Release(ctx, a, t0.Add(time.Second))
	fmt.Println("released:", released, "released again:", again)
	c, _ = leases.Acquire(ctx, "account:7", t0.Add(time.Second), 1)
	fmt.Println("c:", c.Allowed, "expires", c.Expiry.Sub(t0))
	// Output:
	// a=true b=true c=false (retry after 30s)
	// released: true released again: false
	// c: true expires 31s
}

// A fixed window raised from 10 to 20 per minute without giving every key a fresh window:
// what a key consumed stays consumed (core.CarryAsIs), seeded in the module.
func ExampleLimiter_Successor() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old, err := wasmcore.NewLimiter(redstream.FixedWindow(time.Minute, 10), wasmcore.Options{})
	if err != nil {
		panic(err)
	}
	for range 10 {
		old.AllowN(ctx, "user:1", now, 1)
	}
	raised, err := old.Successor(core.CarryAsIs, redstream.FixedWindow(time.Minute, 20))
	if err != nil {
		panic(err)
	}
	admitted := 0
	for range 30 {
		if d, _ := raised.AllowN(ctx, "user:1", now, 1); d.Allowed {
			admitted++
		}
	}
	fmt.Println("admitted after the change:", admitted)
	// Output:
	// admitted after the change: 10
}
