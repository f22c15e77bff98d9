package idempotency

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestStreamMiddleware: a redelivery of a completed key is acknowledged unhandled; one in
// flight fails with ErrInFlight; a failure releases the key; keys are scoped per group.
func TestStreamMiddleware(t *testing.T) {
	forEngines(t, Options{}, func(t *testing.T, i *Idempotent) {
		ctx := context.Background()
		var runs atomic.Int64
		block := make(chan struct{})
		fail := errors.New("handler failed")
		h := i.Stream(nil)(func(ctx context.Context, d *stream.Delivery) error {
			runs.Add(1)
			switch d.Tag {
			case "block":
				<-block
			case "fail":
				return fail
			}
			return nil
		})
		d := &stream.Delivery{ID: "1-0", Topic: "orders", Group: "billing", Key: "order-7", DeliveryCount: 1}
		if err := h(ctx, d); err != nil || runs.Load() != 1 {
			t.Fatalf("first delivery: %v, %d runs", err, runs.Load())
		}
		redelivered := *d
		redelivered.DeliveryCount = 2
		if err := h(ctx, &redelivered); err != nil || runs.Load() != 1 {
			t.Fatalf("redelivery: %v, %d runs; want acknowledged without running", err, runs.Load())
		}
		other := *d
		other.Group = "shipping"
		if err := h(ctx, &other); err != nil || runs.Load() != 2 {
			t.Fatalf("other group: %v, %d runs; want a run", err, runs.Load())
		}
		// A failure releases: the redelivery runs again.
		f := &stream.Delivery{ID: "2-0", Topic: "orders", Group: "billing", Key: "order-8", Tag: "fail"}
		if err := h(ctx, f); !errors.Is(err, fail) {
			t.Fatalf("failing handler: %v", err)
		}
		f.Tag = ""
		if err := h(ctx, f); err != nil || runs.Load() != 4 {
			t.Fatalf("after the failure: %v, %d runs", err, runs.Load())
		}
		// In flight on another consumer: the delivery fails, to be retried.
		b := &stream.Delivery{ID: "3-0", Topic: "orders", Group: "billing", Key: "order-9", Tag: "block"}
		done := make(chan error)
		go func() { done <- h(ctx, b) }()
		for runs.Load() != 5 {
			time.Sleep(time.Millisecond)
		}
		if err := h(ctx, &stream.Delivery{ID: "3-0", Topic: "orders", Group: "billing", Key: "order-9"}); !errors.Is(err, ErrInFlight) {
			t.Fatalf("in flight elsewhere: %v, want ErrInFlight", err)
		}
		close(block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Without a key function or a key, the entry ID keys the delivery.
		n := &stream.Delivery{ID: "4-0", Topic: "orders", Group: "billing"}
		_ = h(ctx, n)
		_ = h(ctx, n)
		if runs.Load() != 6 {
			t.Fatalf("by ID: %d runs, want 6", runs.Load())
		}
	})
}

type order struct{ ID int }

// TestStreamConsumerDuplicateSend: a producer that sends one key twice (a retried send)
// gets one side effect, on a real consumer; both entries are acknowledged.
func TestStreamConsumerDuplicateSend(t *testing.T) {
	client := redistest.Client(t)
	i, err := NewRedis(client, Options{Name: "stream-dup"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	consumer, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var effects, handled atomic.Int64
	consumer.Use(func(next stream.HandleFunc) stream.HandleFunc {
		return func(ctx context.Context, d *stream.Delivery) error {
			err := next(ctx, d)
			handled.Add(1)
			return err
		}
	}, i.Stream(nil))
	err = stream.Register(consumer, stream.Handler[order]{
		Topic: "idem-dup", Group: "billing",
		Handle: func(ctx context.Context, msg *stream.Message[order]) error {
			effects.Add(1)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(ctx)
	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m := stream.NewMessage(order{ID: 1})
		m.Key = "order-1"
		if _, err := producer.Send(ctx, "idem-dup", m); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for handled.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if handled.Load() != 2 || effects.Load() != 1 {
		t.Fatalf("handled %d deliveries with %d side effects, want 2 and 1", handled.Load(), effects.Load())
	}
}
