package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/stream"
)

// A topic of three priority levels: level 2 is handled four times as often as level 0
// while both wait (the default weights 1, 2, 4), and no level is starved.
func ExampleWithPriority() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond, Priorities: map[string]int{"emails": 3}}

	producer, _ := stream.NewProducer(client, cfg)
	_, _ = producer.Send(ctx, "emails", stream.NewMessage(Order{ID: 1}))                         // level 0
	_, _ = producer.Send(ctx, "emails", stream.NewMessage(Order{ID: 2}), stream.WithPriority(2)) // urgent

	consumer, _ := stream.NewConsumer(client, cfg)
	handled := make(chan int64, 2)
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "emails", Group: "mailer", Concurrency: 8, // 8 goroutines shared by the levels
		// PriorityWeights: []int{1, 3, 10}, // or StrictPriority: true
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			handled <- msg.Body.ID
			return nil
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)
	fmt.Println(<-handled+<-handled, "handled")
	// Output:
	// 3 handled
}

// Two topics share 4 handler goroutines: while both have messages waiting, payments get
// three of every four.
func ExampleNewPool() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	pool, _ := stream.NewPool(4, false)
	handle := func(ctx context.Context, msg *stream.Message[Order]) error { return nil }
	_ = stream.Register(consumer, stream.Handler[Order]{Topic: "payments", Group: "worker", Pool: pool, Weight: 3, Handle: handle})
	_ = stream.Register(consumer, stream.Handler[Order]{Topic: "reports", Group: "worker", Pool: pool, Weight: 1, Handle: handle})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)
	fmt.Println("serving")
	// Output:
	// serving
}
