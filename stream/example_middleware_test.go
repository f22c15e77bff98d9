package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redstream-go/redstream/stream"
)

type requestIDKey struct{}

func ExampleMessage_headers() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	consumer, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	err = stream.Register(consumer, stream.Handler[Order]{
		Topic: "orders", Group: "billing",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			fmt.Println("order", msg.Body.ID, "tenant", msg.Headers["tenant"])
			close(done)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.Start(ctx); err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)

	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		panic(err)
	}
	msg := stream.NewMessage(Order{ID: 7, Status: "CREATED"})
	msg.Headers = map[string]string{"tenant": "acme"} // written as the field "h:tenant"
	if _, err := producer.Send(ctx, "orders", msg); err != nil {
		panic(err)
	}
	<-done
	// Output: order 7 tenant acme
}

func ExampleMiddleware() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// Producer side: copy a request id from the context into every message's headers.
	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		panic(err)
	}
	producer.Use(func(next stream.SendFunc) stream.SendFunc {
		return func(ctx context.Context, out *stream.Outgoing) (string, error) {
			if id, ok := ctx.Value(requestIDKey{}).(string); ok {
				out.Headers["x-request-id"] = id
			}
			return next(ctx, out)
		}
	})

	// Consumer side: logging outside recover (so panics are logged as failures), then a
	// per-call timeout, then the handler.
	consumer, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	consumer.Use(stream.Logging(logger), stream.Recover())
	done := make(chan struct{})
	err = stream.Register(consumer, stream.Handler[Order]{
		Topic: "orders", Group: "billing",
		Middleware: []stream.Middleware{stream.Timeout(5 * time.Second)},
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			fmt.Println("order", msg.Body.ID, "request", msg.Headers["x-request-id"], "delivery", msg.DeliveryCount)
			close(done)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.Start(ctx); err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)

	reqCtx := context.WithValue(ctx, requestIDKey{}, "req-1")
	if _, err := producer.Send(reqCtx, "orders", stream.NewMessage(Order{ID: 8})); err != nil {
		panic(err)
	}
	<-done
	// Output: order 8 request req-1 delivery 1
}

func ExampleProducer_SendBatch() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		panic(err)
	}
	bad := stream.NewMessage(Order{ID: 3})
	bad.Headers = map[string]string{"": "no name"}
	results, err := producer.SendBatch(ctx, "orders", []stream.Sendable{
		stream.NewMessage(Order{ID: 1}), stream.NewMessage(Order{ID: 2}), bad,
	}) // one round trip
	for i, r := range results {
		fmt.Println(i, r.ID != "", r.Err)
	}
	fmt.Println(err)
	// Output:
	// 0 true <nil>
	// 1 true <nil>
	// 2 false stream: invalid header: empty name
	// stream: SendBatch to "orders": 1 of 3 messages failed; message 2: stream: invalid header: empty name
}

func ExampleConsumer_Unregister() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	consumer, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	if err := consumer.Start(ctx); err != nil { // no handler yet
		panic(err)
	}
	defer consumer.Close(ctx)

	done := make(chan struct{})
	err = stream.Register(consumer, stream.Handler[Order]{ // running: starts now
		Topic: "refunds", Group: "billing",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			fmt.Println("refund", msg.Body.ID)
			close(done)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	producer, _ := stream.NewProducer(client, stream.Config{})
	if _, err := producer.Send(ctx, "refunds", stream.NewMessage(Order{ID: 5})); err != nil {
		panic(err)
	}
	<-done
	fmt.Println(consumer.Unregister(ctx, "refunds", "billing")) // drains that handler only
	// Output:
	// refund 5
	// <nil>
}
