package stream_test

import (
	"fmt"
	"time"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/stream"
)

// Every zero field of a Config means its default; WithDefaults shows the values a Config
// runs with.
func ExampleConfig_WithDefaults() {
	cfg := stream.Config{BlockTimeout: 30 * time.Second}.WithDefaults()
	fmt.Println(cfg.ReadCount, cfg.MaxDeliveries, cfg.Autoclaim.MinIdle, cfg.Trim.Mode)
	fmt.Println(cfg.BlockTimeout, cfg.ConsumerTimeout) // ConsumerTimeout: at least 3 × BlockTimeout
	// Output:
	// 10 3 1m0s safe
	// 30s 10m0s
}

// A handler's retry policy: four deliveries, the backoff doubling from 100 ms.
func ExampleNewExponentialRetryPolicy() {
	policy, err := stream.NewExponentialRetryPolicy(4, 100*time.Millisecond, time.Second, 2, core.JitterNone)
	if err != nil {
		panic(err)
	}
	for n := int64(1); n < int64(policy.MaxDeliveries()); n++ {
		fmt.Println("after delivery", n, "wait", policy.NextBackoff(n))
	}
	_ = stream.Handler[string]{Topic: "orders", Group: "billing", RetryPolicy: policy}
	// Output:
	// after delivery 1 wait 100ms
	// after delivery 2 wait 200ms
	// after delivery 3 wait 400ms
}
