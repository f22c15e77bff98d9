package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redstream-go/redstream/stream"
)

func ExampleMessage_Guard() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	shipped := make(chan error, 1)
	// The guarded write runs only while this delivery is current: a handler that stalled
	// past its lease, while another consumer took the order over, writes nothing.
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "orders", Group: "shipping",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			_, err := msg.Guard(ctx, "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])",
				[]string{"{orders}:status"}, strconv.FormatInt(msg.Body.ID, 10), "SHIPPED")
			if errors.Is(err, stream.ErrStaleDelivery) {
				return nil // the delivery that took over does the work; this ack is refused too
			}
			shipped <- err
			return err
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, stream.Config{})
	_, _ = producer.Send(ctx, "orders", stream.NewMessage(Order{ID: 7}))
	fmt.Println("guarded write:", <-shipped)
	status, _ := client.Do(ctx, client.B().Hget().Key("{orders}:status").Field("7").Build()).ToString()
	fmt.Println("order 7:", status)
	// Output:
	// guarded write: <nil>
	// order 7: SHIPPED
}
