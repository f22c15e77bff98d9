package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/memory"
)

func ExampleLimiter_Successor() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old, err := memory.NewLimiter(redstream.FixedWindow(time.Minute, 10), memory.Options{})
	if err != nil {
		panic(err)
	}
	for range 10 {
		old.AllowN(ctx, "user:1", now, 1) // user:1 has used its 10 for this minute
	}
	// Raise the limit to 20 per minute: what user:1 consumed stays consumed.
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
