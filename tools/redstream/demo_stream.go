package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

func init() {
	registerDemo(demo{
		name:    "stream",
		summary: "Redis Streams: produce -> a handler fails -> retries -> dead letter -> replay -> handled",
		order:   40,
		run:     demoStream,
	})
}

type demoOrder struct {
	ID     int64  `json:"orderId"`
	Status string `json:"status"`
}

// demoStream runs a producer and a consumer on the embedded Redis. Order 2 fails until the
// "downstream service" is repaired: it is retried, dead-lettered after 3 deliveries, then
// replayed and handled.
func demoStream(ctx context.Context, out io.Writer) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return err
	}
	defer mr.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		return err
	}
	defer client.Close()

	cfg := stream.Config{
		BlockTimeout:  50 * time.Millisecond,
		MaxDeliveries: 3,                                                                                        // the Java starter's default: 3 deliveries
		Autoclaim:     stream.AutoclaimConfig{MinIdle: 200 * time.Millisecond, Interval: 50 * time.Millisecond}, // retry after 200 ms (seed: 60 s)
	}
	var mu sync.Mutex
	repaired := false
	var lines []string
	say := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	handled := make(chan int64, 8)
	gaveUp := make(chan struct{}, 1)
	consumer, err := stream.NewConsumer(client, cfg)
	if err != nil {
		return err
	}
	err = stream.Register(consumer, stream.Handler[demoOrder]{
		Topic: "order-topic",
		Group: "billing",
		Handle: func(ctx context.Context, m *stream.Message[demoOrder]) error {
			mu.Lock()
			ok := repaired || m.Body.ID != 2
			mu.Unlock()
			if !ok {
				say("  order %d: delivery %d failed (billing service down)", m.Body.ID, m.DeliveryCount)
				return errors.New("billing service down")
			}
			say("  order %d: handled on delivery %d", m.Body.ID, m.DeliveryCount)
			handled <- m.Body.ID
			return nil
		},
		OnFailure: func(ctx context.Context, m *stream.Message[demoOrder], body []byte, err error) {
			say("  order %d: given up and dead-lettered: %v", m.Body.ID, err)
			gaveUp <- struct{}{}
		},
	})
	if err != nil {
		return err
	}
	if err := consumer.Start(ctx); err != nil {
		return err
	}
	defer consumer.Close(ctx)

	producer, err := stream.NewProducer(client, cfg)
	if err != nil {
		return err
	}
	for i := int64(1); i <= 3; i++ {
		msg := stream.Message[demoOrder]{Key: fmt.Sprintf("order-%d", i), Body: demoOrder{ID: i, Status: "CREATED"}}
		if _, err := producer.Send(ctx, "order-topic", msg); err != nil {
			return err
		}
	}
	fields, err := client.Do(ctx, client.B().Xrange().Key("order-topic").Start("-").End("+").Count(1).Build()).ToArray()
	if err == nil && len(fields) == 1 {
		e, _ := fields[0].AsXRangeSlice()
		fmt.Fprint(out, "sent 3 orders to stream order-topic; the first entry's fields:")
		for _, f := range e.FieldValues {
			v := f.Value
			if f.Field == "ts" {
				v = "…" // time-dependent
			}
			fmt.Fprintf(out, " %s=%s", f.Field, v)
		}
		fmt.Fprintln(out)
	}
	wait := func(what string, ch <-chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("timed out waiting for %s", what)
		}
	}
	if err := wait("the dead letter", gaveUp); err != nil {
		return err
	}
	flush := func() {
		mu.Lock()
		// Deliveries of different orders interleave; sort for a stable transcript.
		sortLines(lines)
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
		lines = nil
		mu.Unlock()
	}
	for len(handled) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	<-handled
	<-handled
	flush()

	dlq, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		return err
	}
	letters, err := dlq.List(ctx, "order-topic", stream.ListOptions{})
	if err != nil || len(letters) != 1 {
		return fmt.Errorf("dead letters: %d, %v", len(letters), err)
	}
	dl := letters[0]
	body, _ := dl.Body()
	fmt.Fprintf(out, "dead-letter stream %s: 1 entry: group=%s deliveries=%d body=%s\n",
		streamwire.DeadLetterStreamName("order-topic"), dl.Group, dl.Deliveries, body)

	mu.Lock()
	repaired = true
	mu.Unlock()
	fmt.Fprintln(out, "billing service repaired; replaying the dead letter (`redstream dlq replay` does the same)")
	if _, err := dlq.Replay(ctx, "order-topic", dl.ID); err != nil {
		return err
	}
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		return errors.New("the replayed order was not handled")
	}
	flush()
	n, err := dlq.Len(ctx, "order-topic")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "dead letters left: %d; every order was handled, none lost\n", n)
	return nil
}

// sortLines sorts demo transcript lines by order id, keeping each order's lines in order.
func sortLines(lines []string) {
	for i := 1; i < len(lines); i++ {
		for j := i; j > 0 && orderOf(lines[j]) < orderOf(lines[j-1]); j-- {
			lines[j], lines[j-1] = lines[j-1], lines[j]
		}
	}
}

func orderOf(line string) int {
	var n int
	_, _ = fmt.Sscanf(line, "  order %d:", &n)
	return n
}
