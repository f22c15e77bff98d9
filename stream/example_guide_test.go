package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

// ExampleHandler_dedup skips business duplicates: a message whose key was handled before is
// acknowledged without calling Handle.
func ExampleHandler_dedup() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	handled := make(chan string)
	handle := func(ctx context.Context, msg *stream.Message[Order]) error {
		handled <- fmt.Sprintf("%s: order %d", msg.Key, msg.Body.ID)
		return nil
	}

	seen, _ := redisbackend.NewDeduplicator(client, "orders-seen", redstream.DedupSpec{Strategy: redstream.DedupSet}, redisbackend.DedupOptions{SetTTL: 24 * time.Hour})
	err := stream.Register(consumer, stream.Handler[Order]{Topic: "orders", Group: "billing", Dedup: seen, Handle: handle})
	if err != nil {
		panic(err)
	}
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, stream.Config{})
	for i, key := range []string{"event-1", "event-1", "event-2"} { // event-1 sent twice
		_, _ = producer.Send(ctx, "orders", stream.Message[Order]{Key: key, Body: Order{ID: int64(i)}})
	}
	fmt.Println(<-handled)
	fmt.Println(<-handled)
	// Output:
	// event-1: order 0
	// event-2: order 2
}

// ExampleHandler_deleteOnAck runs a work queue: each entry is deleted from the stream as it
// is acknowledged (the topic has one group), and trimming also drops entries older than a
// week.
func ExampleHandler_deleteOnAck() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	done := make(chan struct{})
	handle := func(ctx context.Context, msg *stream.Message[Order]) error {
		if msg.Body.ID == 3 {
			close(done)
		}
		return nil
	}

	cfg := stream.Config{Trim: stream.TrimConfig{MaxAge: 7 * 24 * time.Hour}} // YAML trim.max-age-ms: 604800000
	cfg.BlockTimeout = 50 * time.Millisecond
	consumer, _ := stream.NewConsumer(client, cfg)
	err := stream.Register(consumer, stream.Handler[Order]{Topic: "jobs", Group: "workers", DeleteOnAck: true, Handle: handle})
	if err != nil {
		panic(err)
	}
	_ = consumer.Start(ctx)

	producer, _ := stream.NewProducer(client, cfg)
	for i := range 4 {
		_, _ = producer.Send(ctx, "jobs", stream.NewMessage(Order{ID: int64(i)}))
	}
	<-done
	_ = consumer.Close(ctx) // acknowledges (and deletes) what was handled
	n, _ := client.Do(ctx, client.B().Xlen().Key("jobs").Build()).AsInt64()
	fmt.Println("entries left in the stream:", n)
	// Output: entries left in the stream: 0
}
