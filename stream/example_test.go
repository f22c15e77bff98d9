package stream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/stream"
)

// embedded starts an in-process Redis (miniredis) and a client to it.
func embedded() (rueidis.Client, func()) {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return client, func() { client.Close(); srv.Close() }
}

type Order struct {
	ID     int64  `json:"orderId"`
	Status string `json:"status"`
}

func Example() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// Consume: one typed handler per topic and group.
	consumer, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	err = stream.Register(consumer, stream.Handler[Order]{
		Topic: "order-topic",
		Group: "order-consumer-group",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			fmt.Printf("order %d %s, tag %s\n", msg.Body.ID, msg.Body.Status, msg.Tag)
			close(done)
			return nil // acknowledged
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.Start(ctx); err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)

	// Produce.
	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		panic(err)
	}
	msg := stream.NewMessage(Order{ID: 1, Status: "CREATED"})
	msg.Tag = "node-1"
	if _, err := producer.Send(ctx, "order-topic", msg, stream.WithGzip()); err != nil {
		panic(err)
	}
	<-done
	// Output: order 1 CREATED, tag node-1
}

func ExampleDeadLetters_Replay() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	cfg := stream.Config{
		BlockTimeout:  50 * time.Millisecond,
		MaxDeliveries: 2,                                                                                        // two deliveries, then a dead letter
		Autoclaim:     stream.AutoclaimConfig{MinIdle: 100 * time.Millisecond, Interval: 50 * time.Millisecond}, // retry after 100 ms
	}
	healthy := make(chan bool, 1)
	healthy <- false
	handled, gaveUp := make(chan string), make(chan string, 1)
	consumer, _ := stream.NewConsumer(client, cfg)
	_ = stream.Register(consumer, stream.Handler[Order]{
		Topic: "payments", Group: "billing",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			ok := <-healthy
			healthy <- ok
			if !ok {
				return errors.New("billing is down")
			}
			handled <- fmt.Sprintf("order %d handled on delivery %d", msg.Body.ID, msg.DeliveryCount)
			return nil
		},
		OnFailure: func(ctx context.Context, msg *stream.Message[Order], body []byte, err error) {
			gaveUp <- fmt.Sprintf("gave up on order %d: %v", msg.Body.ID, errors.Is(err, stream.ErrMaxRetryExceeded))
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, cfg)
	_, _ = producer.Send(ctx, "payments", stream.NewMessage(Order{ID: 7, Status: "PAID"}))

	fmt.Println(<-gaveUp) // OnFailure runs on the consumer's goroutine once the entry is dead-lettered
	dlq, _ := stream.NewDeadLetters(client, cfg)
	for n, _ := dlq.Len(ctx, "payments"); n == 0; n, _ = dlq.Len(ctx, "payments") {
		time.Sleep(10 * time.Millisecond)
	}
	letters, _ := dlq.List(ctx, "payments", stream.ListOptions{})
	fmt.Printf("dead letter: group %s, %d deliveries\n", letters[0].Group, letters[0].Deliveries)

	<-healthy
	healthy <- true
	if _, err := dlq.Replay(ctx, "payments", letters[0].ID); err != nil {
		panic(err)
	}
	fmt.Println(<-handled)
	// Output:
	// gave up on order 7: true
	// dead letter: group billing, 2 deliveries
	// order 7 handled on delivery 1
}

func ExampleCheckpointedListSink() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	sink, _ := stream.NewCheckpointedListSink(client, "report", time.Hour)
	for _, r := range []stream.Record{{"order-1", "a"}, {"order-2", "b"}, {"order-1", "a (redelivered)"}} {
		_ = sink.Invoke(ctx, r)
	}
	n, _ := sink.Checkpoint(ctx)
	fmt.Println("written:", n)
	vals, _ := client.Do(ctx, client.B().Lrange().Key("report").Start(0).Stop(-1).Build()).AsStrSlice()
	fmt.Println(vals)
	// Output:
	// written: 2
	// [a b]
}
