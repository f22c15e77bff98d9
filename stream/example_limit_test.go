package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

// A topic consumed at most 2 messages per 300 ms per customer, by every consumer together
// (the limiter's state is in Redis): the third message of customer-7 waits, parked and
// uncounted, for the next window, and is then handled on its first delivery.
func ExampleLimit() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond}

	perCustomer, _ := redisbackend.NewLimiter(client, redstream.FixedWindow(300*time.Millisecond, 2), redisbackend.Options{KeyPrefix: "api"})
	consumer, _ := stream.NewConsumer(client, cfg)
	handled := make(chan string, 3)
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "orders", Group: "billing", Concurrency: 4,
		Limit: &stream.Limit[Order]{
			Rate: perCustomer, // keyed by the message's Key; Key: func(msg) string sets another
		},
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			handled <- fmt.Sprintf("order %d, delivery %d", msg.Body.ID, msg.DeliveryCount)
			return nil
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, cfg)
	for id := int64(1); id <= 3; id++ {
		msg := stream.NewMessage(Order{ID: id})
		msg.Key = "customer-7"
		_, _ = producer.Send(ctx, "orders", msg)
	}
	late := ""
	for range 3 {
		late = <-handled // the last one handled waited for the next window
	}
	fmt.Println("last:", late[len(late)-10:])
	// Output:
	// last: delivery 1
}
