package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestSoak: 10,000 messages, 3 consumers, random handler failures (10%), and one consumer
// crashing mid-run (its client is closed under it, so its unsent acks are lost, then its
// handlers are cut off). At the end every message was handled successfully or sits in the
// dead-letter stream; none is lost; duplicate successes are counted, and each comes from a
// redelivery, as at-least-once delivery allows.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const total = 10_000
	addr := redistest.Addr(t)
	ctx := context.Background()
	cfg := fastConfig()
	cfg.ReadCount = 50
	cfg.MaxDeliveries = 3
	topic := newTopic(t)

	var mu sync.Mutex
	successes := make([][]int64, total) // delivery counts of successful handlings, per message
	var handledTotal atomic.Int64
	var failures atomic.Int64
	var hang atomic.Bool
	crashNow := make(chan struct{})
	var crashOnce sync.Once

	handler := func(name int) func(context.Context, *stream.Message[order]) error {
		return func(ctx context.Context, m *stream.Message[order]) error {
			if name == 2 && hang.Load() {
				<-ctx.Done() // the crashed consumer never finishes
				return ctx.Err()
			}
			if rand.IntN(10) == 0 {
				failures.Add(1)
				return errors.New("random failure")
			}
			mu.Lock()
			successes[m.Body.ID] = append(successes[m.Body.ID], m.DeliveryCount)
			mu.Unlock()
			if handledTotal.Add(1) == total/3 {
				crashOnce.Do(func() { close(crashNow) })
			}
			return nil
		}
	}
	var consumers []*stream.Consumer
	doomedClient := redistest.NewClient(t, addr)
	for i := 0; i < 3; i++ {
		client := redistest.NewClient(t, addr)
		if i == 2 {
			client = doomedClient
		}
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2, Handle: handler(i)}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	defer func() {
		for _, c := range consumers[:2] {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := c.Close(cctx); err != nil {
				t.Errorf("Close: %v", err)
			}
			cancel()
		}
	}()

	p := newProducer(t, redistest.NewClient(t, addr), cfg)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 8 {
				if _, err := p.Send(ctx, topic, stream.NewMessage(order{i, "soak"})); err != nil {
					t.Errorf("Send: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()

	<-crashNow
	hang.Store(true)
	doomedClient.Close() // acks not yet sent are lost, as in a crash
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_ = consumers[2].Close(cctx) // cuts the hanging handlers off; errors expected
	cancel()

	client := redistest.Client(t)
	dls, _ := stream.NewDeadLetters(client, cfg)
	deadLettered := func() map[int]int {
		out := map[int]int{}
		list, err := dls.List(ctx, topic, stream.ListOptions{Count: total})
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range list {
			b, _ := dl.Body()
			var o order
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatalf("dead letter body %s: %v", b, err)
			}
			out[o.ID]++
		}
		return out
	}
	var dead map[int]int
	eventually(t, 90*time.Second, "every message handled or dead-lettered", func() bool {
		if pending(t, client, topic, "g") != 0 {
			return false
		}
		dead = deadLettered()
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < total; i++ {
			if len(successes[i]) == 0 && dead[i] == 0 {
				return false
			}
		}
		return true
	})

	mu.Lock()
	defer mu.Unlock()
	dups, both := 0, 0
	for i := 0; i < total; i++ {
		s := successes[i]
		if len(s) > 1 {
			dups += len(s) - 1
			redelivered := false
			for _, n := range s {
				redelivered = redelivered || n > 1
			}
			if !redelivered {
				t.Errorf("message %d handled %d times, all on a first delivery: %v", i, len(s), s)
			}
		}
		if len(s) > 0 && dead[i] > 0 {
			both++
		}
		if dead[i] > 1 {
			t.Errorf("message %d dead-lettered %d times", i, dead[i])
		}
	}
	if failures.Load() == 0 || len(dead) == 0 {
		t.Errorf("failures %d, dead letters %d: the retry path was not exercised", failures.Load(), len(dead))
	}
	t.Logf("%d messages: %d handler failures, %d dead-lettered, %d duplicate successes, %d both handled and dead-lettered",
		total, failures.Load(), len(dead), dups, both)
}
