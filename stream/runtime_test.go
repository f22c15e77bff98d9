package stream_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestRegisterAndUnregisterAtRuntime, on a real server: a handler registered after Start
// runs; Unregister waits for its messages in hand (successes acknowledged, a failure left
// pending), stops it without touching the other handler, and registering the pair again
// picks up the failure and what was sent meanwhile.
func TestRegisterAndUnregisterAtRuntime(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	other, topic := newTopic(t), newTopic(t)
	p := newProducer(t, client, cfg)
	c := newConsumer(t, client, cfg)
	otherGot := make(chan int, 16)
	if err := stream.Register(c, stream.Handler[order]{Topic: other, Group: "g", Handle: func(_ context.Context, m *stream.Message[order]) error {
		otherGot <- m.Body.ID
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)

	release := make(chan struct{})
	var started, calls atomic.Int64
	var mu sync.Mutex
	handled := map[int]int{}
	h := stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4, Handle: func(_ context.Context, m *stream.Message[order]) error {
		calls.Add(1)
		if m.DeliveryCount == 1 && m.Body.ID < 4 {
			started.Add(1)
			<-release // held in hand while Unregister runs
		}
		mu.Lock()
		handled[m.Body.ID]++
		mu.Unlock()
		if m.Body.ID == 3 && m.DeliveryCount == 1 {
			return errors.New("fails once")
		}
		return nil
	}}
	if err := stream.Register(c, h); err != nil {
		t.Fatalf("Register after Start: %v", err)
	}
	for i := 0; i < 4; i++ {
		send(t, p, topic, order{ID: i})
	}
	eventually(t, 10*time.Second, "4 messages in hand", func() bool { return started.Load() == 4 })

	unregistered := make(chan error, 1)
	go func() { unregistered <- c.Unregister(context.Background(), topic, "g") }()
	select {
	case err := <-unregistered:
		t.Fatalf("Unregister returned %v with 4 messages in hand", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-unregistered:
		if err != nil {
			t.Fatalf("Unregister: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Unregister did not return after the handlers finished")
	}
	if n := pending(t, client, topic, "g"); n != 1 {
		t.Fatalf("pending after Unregister = %d, want 1 (the failure)", n)
	}
	before := calls.Load()
	send(t, p, topic, order{ID: 10})
	send(t, p, other, order{ID: 20})
	select {
	case id := <-otherGot:
		if id != 20 {
			t.Fatalf("other handler got %d, want 20", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other handler stopped too")
	}
	time.Sleep(300 * time.Millisecond) // two scan intervals and more
	if got := calls.Load(); got != before {
		t.Fatalf("%d Handle calls after Unregister returned, want 0", got-before)
	}
	if err := c.Unregister(context.Background(), topic, "g"); !errors.Is(err, redstream.ErrNotFound) {
		t.Fatalf("second Unregister = %v, want redstream.ErrNotFound", err)
	}

	if err := stream.Register(c, h); err != nil {
		t.Fatalf("Register again: %v", err)
	}
	eventually(t, 10*time.Second, "the failure retried and the new message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled[3] == 2 && handled[10] == 1
	})
	eventually(t, 10*time.Second, "nothing pending", func() bool { return pending(t, client, topic, "g") == 0 })
	mu.Lock()
	defer mu.Unlock()
	for id := 0; id < 3; id++ {
		if handled[id] != 1 {
			t.Errorf("message %d handled %d times, want 1", id, handled[id])
		}
	}
}

// TestUnregisterTimeout: a handler that outlives ShutdownTimeout is cancelled; Unregister
// returns ErrShutdownTimeout and the entry stays pending.
func TestUnregisterTimeout(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ShutdownTimeout = 200 * time.Millisecond
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	c := newConsumer(t, client, cfg)
	startConsumer(t, c)
	in := make(chan struct{}, 1)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Handle: func(ctx context.Context, _ *stream.Message[order]) error {
		in <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}}); err != nil {
		t.Fatal(err)
	}
	send(t, p, topic, order{ID: 1})
	select {
	case <-in:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	start := time.Now()
	err := c.Unregister(context.Background(), topic, "g")
	if !errors.Is(err, stream.ErrShutdownTimeout) {
		t.Fatalf("Unregister = %v, want ErrShutdownTimeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Unregister took %v, want about 200ms", el)
	}
	if n := pending(t, client, topic, "g"); n != 1 {
		t.Fatalf("pending = %d, want 1", n)
	}
	if !c.Stats().Running {
		t.Fatal("consumer stopped with its last handler")
	}
}
