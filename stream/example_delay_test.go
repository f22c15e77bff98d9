package stream_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redstream-go/redstream/stream"
)

func ExampleWithDelay() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	done := make(chan struct{})
	sent := time.Now()
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "reminders", Group: "mailer",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			fmt.Println("reminder for order", msg.Body.ID, "after 500ms:", time.Since(sent) >= 500*time.Millisecond)
			close(done)
			return nil
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, stream.Config{})
	// Scheduled, not yet in the stream: Send returns the schedule id.
	id, err := producer.Send(ctx, "reminders", stream.NewMessage(Order{ID: 42}), stream.WithDelay(500*time.Millisecond))
	fmt.Println(len(id), err)
	// Or at a fixed time: stream.WithDeliverAt(time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC)).
	// Until it is due, producer.CancelScheduled(ctx, "reminders", id) takes it back.
	<-done
	// Output:
	// 24 <nil>
	// reminder for order 42 after 500ms: true
}

func ExampleHandler_orderedByKey() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	var mu sync.Mutex
	last := map[string]int64{}
	done := make(chan struct{})
	handled := 0
	apply := func(ctx context.Context, msg *stream.Message[Order]) error {
		mu.Lock()
		defer mu.Unlock()
		if msg.Body.ID < last[msg.Key] {
			fmt.Println("out of order:", msg.Key, msg.Body.ID)
		}
		last[msg.Key] = msg.Body.ID
		if handled++; handled == 40 {
			close(done)
		}
		return nil
	}
	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "accounts", Group: "ledger", Concurrency: 8, OrderedByKey: true,
		Handle: apply, // the messages of one account (msg.Key) never run at once, and in order
	})
	producer, _ := stream.NewProducer(client, stream.Config{})
	for i := range 40 {
		_, _ = producer.Send(ctx, "accounts", stream.Message[Order]{Key: fmt.Sprintf("account-%d", i%4), Body: Order{ID: int64(i)}})
	}
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)
	<-done
	fmt.Println("accounts:", len(last))
	// Output: accounts: 4
}
