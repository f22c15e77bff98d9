package stream_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redstream-go/redstream/stream"
)

// A worker's main: Run blocks until SIGINT or SIGTERM, then stops reading, lets the handler
// in flight finish (for up to Config.ShutdownTimeout), acknowledges it and returns.
func ExampleConsumer_Run() {
	client, stop := embedded() // in a program: a rueidis.Client you own
	defer stop()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	consumer, err := stream.NewConsumer(client, stream.Config{
		BlockTimeout:    100 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second, // drain time after the signal
	})
	if err != nil {
		panic(err)
	}
	err = stream.Register(consumer, stream.Handler[Order]{
		Topic:   "order-topic",
		Group:   "order-consumer-group",
		Timeout: 30 * time.Second, // a handler call taking longer is cancelled and retried
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error {
			fmt.Printf("order %d %s\n", msg.Body.ID, msg.Body.Status)
			cancel() // here: stop after the first message, as a SIGTERM would
			time.Sleep(50 * time.Millisecond)
			fmt.Println("finished while shutting down")
			return nil // acknowledged during the drain
		},
	})
	if err != nil {
		panic(err)
	}

	producer, _ := stream.NewProducer(client, stream.Config{})
	_, _ = producer.Send(context.Background(), "order-topic", stream.NewMessage(Order{ID: 1, Status: "CREATED"}))

	if err := consumer.Run(ctx); err != nil {
		fmt.Println("shutdown:", err)
		return
	}
	fmt.Println("drained")
	// Output:
	// order 1 CREATED
	// finished while shutting down
	// drained
}

// A readiness probe: Healthy fails before Start, after Close, when Redis does not answer or
// when a handler's reads fail.
func ExampleConsumer_Healthy() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	_ = stream.Register(consumer, stream.Handler[Order]{Topic: "order-topic", Group: "order-consumer-group",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error { return nil }})
	_ = consumer.Start(ctx)

	readyz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := consumer.Healthy(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	probe := func() {
		rec := httptest.NewRecorder()
		readyz.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Body.String())))
	}
	probe()
	_ = consumer.Close(ctx)
	probe()
	// Output:
	// 200
	// 503 stream: consumer closed
}
