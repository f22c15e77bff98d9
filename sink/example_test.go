package sink_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/sink"
)

func ExampleLimiting() {
	limiter, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 2), memory.Options{})
	print := sink.Func[string](func(ctx context.Context, msg string) error {
		fmt.Println("delivered", msg)
		return nil
	})
	bySender := func(msg string) string { return "user:1" }

	drop, _ := sink.NewLimiting(limiter, bySender, print, sink.DenyDrop)
	for _, msg := range []string{"msg-1", "msg-2", "msg-3"} {
		if err := drop.Invoke(context.Background(), msg); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println("dropped:", drop.Dropped())

	throw, _ := sink.NewLimiting(limiter, bySender, print, sink.DenyThrow)
	err := throw.Invoke(context.Background(), "msg-4")
	fmt.Println(errors.Is(err, sink.ErrRateLimited))
	// Output:
	// delivered msg-1
	// delivered msg-2
	// dropped: 1
	// true
}
