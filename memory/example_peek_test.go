package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// PeekN answers what a request of cost n would get now without recording it: here whether
// a request of cost 3 would pass after two of cost 1.
func ExampleLimiter_PeekN() {
	limiter, err := memory.NewLimiter(redstream.SlidingWindow(time.Second, 5), memory.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limiter.AllowN(ctx, "user:1", now, 1)
	limiter.AllowN(ctx, "user:1", now.Add(100*time.Millisecond), 1)
	at := now.Add(200 * time.Millisecond)
	d, _ := limiter.PeekN(ctx, "user:1", at, 3)
	fmt.Printf("cost 3: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	d, _ = limiter.PeekN(ctx, "user:1", at, 4)
	fmt.Printf("cost 4: allowed=%v retry-after=%v\n", d.Allowed, d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "user:1", at, 1)
	fmt.Printf("a request of cost 1 then: remaining=%d\n", d.Remaining)
	// Output:
	// cost 3: allowed=true remaining=0
	// cost 4: allowed=false retry-after=800ms
	// a request of cost 1 then: remaining=2
}
