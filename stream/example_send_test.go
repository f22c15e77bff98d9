package stream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/stream"
)

// Retrying a send safely: the message carries an idempotency key chosen before the first
// attempt, and every retry uses the same key, so an attempt that failed but was written
// after all is not written again. A retry returns the first attempt's entry id.
func ExampleWithIdempotencyKey() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	producer, err := stream.NewProducer(client, stream.Config{SendTimeout: time.Second})
	if err != nil {
		panic(err)
	}
	order := Order{ID: 42, Status: "CREATED"}
	key := fmt.Sprintf("order-%d-created", order.ID) // the same for every attempt
	var id string
	for attempt := 1; ; attempt++ {
		id, err = producer.Send(ctx, "orders", stream.NewMessage(order), stream.WithIdempotencyKey(key))
		if err == nil || attempt == 5 {
			break
		}
		// errors.Is(err, stream.ErrOutcomeUnknown): the message may have been written;
		// with the key, trying again cannot write it twice.
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
	if err != nil {
		fmt.Println("not sent:", err, errors.Is(err, stream.ErrOutcomeUnknown))
		return
	}
	// A later retry (a restart, another instance) with the same key writes nothing.
	again, _ := producer.Send(ctx, "orders", stream.NewMessage(order), stream.WithIdempotencyKey(key))
	n, _ := client.Do(ctx, client.B().Xlen().Key("orders").Build()).AsInt64()
	fmt.Println(again == id, n)
	// Output: true 1
}

// Sending a job at most once while it waits: a second send of the same id, before every
// group has acknowledged the first message, writes nothing and reports the first one.
func ExampleWithUnique() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		panic(err)
	}
	job := Order{ID: 7, Status: "REINDEX"}
	first, err := producer.Send(ctx, "jobs", stream.NewMessage(job), stream.WithUnique("reindex-7", stream.Unique{}))
	if err != nil {
		panic(err)
	}
	again, err := producer.Send(ctx, "jobs", stream.NewMessage(job), stream.WithUnique("reindex-7", stream.Unique{}))
	fmt.Println(errors.Is(err, stream.ErrDuplicate), again == first)

	// Debounce: while the scheduled message waits, a later send replaces it and moves its
	// due time; Send returns the same schedule id.
	debounce := stream.WithUnique("rebuild-search", stream.Unique{Debounce: true})
	s1, _ := producer.Send(ctx, "jobs", stream.NewMessage(Order{ID: 1}), debounce, stream.WithDelay(time.Minute))
	s2, err := producer.Send(ctx, "jobs", stream.NewMessage(Order{ID: 2}), debounce, stream.WithDelay(time.Minute))
	n, _ := producer.Scheduled(ctx, "jobs")
	fmt.Println(err, s1 == s2, n)
	// Output:
	// true true
	// <nil> true 1
}
