package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/redisbackend"
)

func ExampleOptions_previous() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	// Yesterday's deploy: 10 per minute.
	before := redstream.FixedWindow(time.Minute, 10)
	old, err := redisbackend.NewLimiter(client, before, redisbackend.Options{KeyPrefix: "api"})
	if err != nil {
		panic(err)
	}
	for range 6 {
		old.AllowN(ctx, "user:1", now, 1)
	}
	// Today's: 20 per minute, each key seeded once from its state under the old spec,
	// keeping the fraction consumed (6 of 10 becomes 12 of 20).
	limiter, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Minute, 20), redisbackend.Options{
		KeyPrefix: "api", Previous: []redstream.Spec{before}, Carry: core.CarryProportional,
	})
	if err != nil {
		panic(err)
	}
	d, err := limiter.AllowN(ctx, "user:1", now, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed:", d.Allowed, "remaining:", d.Remaining)
	// Output:
	// allowed: true remaining: 7
}
