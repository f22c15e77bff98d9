package redstream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

// Payment is the body of the quick start's messages.
type Payment struct {
	ID    int   `json:"id"`
	Cents int64 `json:"cents"`
}

// Example_quickStart composes the three parts of a service on one Redis: a rate limiter
// per customer, a stream handler whose failures are retried and then dead-lettered, and a
// cache-aside read inside the handler. It runs on the embedded Redis of the examples.
func Example_quickStart() {
	srv, err := miniredis.Run() // an embedded Redis, so that the example runs anywhere
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	addr := srv.Addr() // your Redis: "127.0.0.1:6379"
	ctx := context.Background()

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close() // yours: nothing below closes it
	// 3 payments per customer per minute, counted in Redis for every replica; each decision
	// waits for Redis at most Timeout (default 100 ms), then fails.
	limiter, _ := redisbackend.NewLimiter(client, redstream.SlidingWindow(time.Minute, 3), redisbackend.Options{Timeout: time.Second})
	// Cache-aside: a customer's name is loaded once, then read from Redis.
	names, _ := cache.New(client, cache.DefaultConfig())
	defer names.Close()
	loadName := func(ctx context.Context) (string, error) { return "Ada", nil } // your database
	// A handler whose failures are delivered again 50 ms later, 3 deliveries in all, then dead-lettered.
	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 50 * time.Millisecond})
	dead := make(chan string)
	_ = stream.Register(consumer, stream.Handler[Payment]{
		Topic: "payments", Group: "billing",
		RetryPolicy: stream.FixedRetryPolicy{Max: 3, Backoff: 50 * time.Millisecond},
		Handle: func(ctx context.Context, msg *stream.Message[Payment]) error {
			name, err := cache.GetOrLoad(ctx, names, "name:"+msg.Key, cache.DefaultTTL, loadName)
			if err == nil && msg.Body.Cents > 10_000 {
				err = errors.New("card declined") // delivered again after the backoff
			}
			if err == nil {
				fmt.Println("charged", name, msg.Body.Cents)
			}
			return err
		},
		OnFailure: func(ctx context.Context, msg *stream.Message[Payment], body []byte, err error) {
			dead <- fmt.Sprintf("dead letter: payment %d after %d deliveries", msg.Body.ID, msg.DeliveryCount)
		},
	})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, stream.Config{})
	var limited []int
	for id, cents := range []int64{3_000, 7_000, 50_000, 2_000} {
		d, err := redstream.Allow(ctx, limiter, "customer-7")
		if err != nil { // Redis unreachable, or slower than Timeout
			fmt.Println("limiter:", err)
			continue
		}
		if !d.Allowed {
			limited = append(limited, id) // d.RetryAfter says when to try again
			continue
		}
		_, _ = producer.Send(ctx, "payments", stream.Message[Payment]{Key: "customer-7", Body: Payment{ID: id, Cents: cents}})
	}
	select {
	case m := <-dead:
		fmt.Println(m)
	case <-time.After(10 * time.Second): // a second run within the minute: every payment was limited
		fmt.Println("no dead letter")
	}
	fmt.Println("rate limited:", limited)
	// Output:
	// charged Ada 3000
	// charged Ada 7000
	// dead letter: payment 2 after 3 deliveries
	// rate limited: [3]
}
