package idempotency_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/idempotency"
	"github.com/redstream-go/redstream/stream"
)

type Shipment struct{ Order int }

func ExampleIdempotent_Stream() {
	srv, err := miniredis.Run() // in a program: your Redis
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	shipments, err := idempotency.NewRedis(client, idempotency.Options{Name: "shipments"})
	if err != nil {
		panic(err)
	}
	consumer, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	var deliveries atomic.Int64
	consumer.Use(func(next stream.HandleFunc) stream.HandleFunc { // counts what reaches the handler's chain
		return func(ctx context.Context, d *stream.Delivery) error { defer deliveries.Add(1); return next(ctx, d) }
	}, shipments.Stream(nil)) // once per message key, across redeliveries and repeated sends
	err = stream.Register(consumer, stream.Handler[Shipment]{
		Topic: "shipments", Group: "warehouse",
		Handle: func(ctx context.Context, msg *stream.Message[Shipment]) error {
			fmt.Println("shipping order", msg.Body.Order)
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
	for range 2 { // a producer retry sends the same key again
		msg := stream.NewMessage(Shipment{Order: 7})
		msg.Key = "order-7"
		if _, err := producer.Send(ctx, "shipments", msg); err != nil {
			panic(err)
		}
	}
	for deliveries.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("deliveries:", deliveries.Load())
	// Output:
	// shipping order 7
	// deliveries: 2
}
