package stream_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestHungServerBatchAndUnregister: with Redis hung (SIGSTOP), SendBatch (with and without
// middleware) returns at its deadline with an error for every message, and Unregister of
// a running handler returns in bounded time, leaving the other handler running.
func TestHungServerBatchAndUnregister(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	cfg := stream.Config{Metrics: vm.NewSet(), ShutdownTimeout: time.Second}
	topic, other := newTopic(t), newTopic(t)
	ok := func(context.Context, *stream.Message[order]) error { return nil }
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: other, Group: "g", Handle: ok}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Handle: ok}); err != nil {
		t.Fatal(err)
	}
	plain := newProducer(t, client, cfg)
	hooked := newProducer(t, client, cfg)
	hooked.Use(func(next stream.SendFunc) stream.SendFunc {
		return func(ctx context.Context, out *stream.Outgoing) (string, error) {
			out.Headers["x"] = "y"
			return next(ctx, out)
		}
	})
	time.Sleep(200 * time.Millisecond) // readers blocked in XREADGROUP
	pid := serverPID(t, client)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	msgs := []stream.Sendable{stream.NewMessage(order{ID: 1}), stream.NewMessage(order{ID: 2}), stream.NewMessage(order{ID: 3})}
	for name, p := range map[string]*stream.Producer{"plain": plain, "middleware": hooked} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		begin := time.Now()
		res, err := p.SendBatch(ctx, topic, msgs)
		took := time.Since(begin)
		cancel()
		if err == nil || len(res) != len(msgs) {
			t.Fatalf("%s: SendBatch on a hung server = %d results, %v; want 3 failed results", name, len(res), err)
		}
		for i, r := range res {
			if r.Err == nil {
				t.Errorf("%s: result %d = %+v, want an error", name, i, r)
			}
		}
		if took > 5*time.Second {
			t.Errorf("%s: SendBatch took %v with a 1 s deadline", name, took)
		}
		t.Logf("%s: SendBatch returned after %v: %v", name, took.Round(time.Millisecond), err)
	}

	begin := time.Now()
	err := c.Unregister(context.Background(), topic, "g")
	took := time.Since(begin)
	t.Logf("Unregister on a hung server returned after %v: %v", took.Round(time.Millisecond), err)
	if took > 10*time.Second {
		t.Fatalf("Unregister took %v on a hung server, want < 10 s", took)
	}
	if !c.Stats().Running || len(c.Stats().Handlers) != 1 {
		t.Fatalf("after Unregister: running %v, %d handlers; want running with 1", c.Stats().Running, len(c.Stats().Handlers))
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
}
