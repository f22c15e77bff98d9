package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/stream"
)

func ExampleRegisterDeadLetters() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "payments", Group: "billing",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			if msg.Body.Status == "" {
				return msg.DeadLetter(ctx, "no status") // explicit: no retry will fix it
			}
			return nil
		},
	})
	alerts := make(chan string)
	_ = stream.RegisterDeadLetters(consumer, stream.DeadLetterHandler[Order]{
		Topic: "payments", Group: "alerts",
		Handle: func(ctx context.Context, dl *stream.DeadLetterMessage[Order]) error {
			alerts <- fmt.Sprintf("order %d failed in %s after %d delivery: %s", dl.Message.Body.ID, dl.Group, dl.Deliveries, dl.Error)
			return nil
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, stream.Config{})
	_, _ = producer.Send(ctx, "payments", stream.NewMessage(Order{ID: 9}))
	fmt.Println(<-alerts)

	// Replay it with a repaired body; a replay handler may also drop a dead letter.
	dlq, _ := stream.NewDeadLetters(client, stream.Config{})
	n, err := dlq.ReplayAll(ctx, "payments", 0, stream.WithReplayHandler(func(ctx context.Context, dl *stream.DeadLetter) (bool, error) {
		body, err := dl.Body()
		if err != nil {
			return false, nil // drop what cannot be repaired
		}
		var o Order
		if err := json.Unmarshal(body, &o); err != nil {
			return false, err
		}
		o.Status = "REPAIRED"
		fixed, _ := json.Marshal(o)
		dl.Fields["enc"], dl.Fields["body"] = "plain", string(fixed) // the entry fields of stream/WIRE.md
		return true, nil
	}))
	fmt.Println("replayed:", n, err)
	// Output:
	// order 9 failed in billing after 1 delivery: no status
	// replayed: 1 <nil>
}
