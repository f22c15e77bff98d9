package stream_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestCrashChild is the crashing consumer of TestCrash, run in a child process: it handles
// the topic's message, announces "handling <id>" and blocks until it is killed.
func TestCrashChild(t *testing.T) {
	topic := os.Getenv("REDSTREAM_CRASH_TOPIC")
	if topic == "" {
		t.Skip("run by TestCrash")
	}
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ConsumerName = "doomed"
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			os.Stdout.WriteString("handling " + m.ID + "\n")
			select {} // killed mid-handler
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {}
}

// TestCrash kills (SIGKILL) a consumer process in the middle of its handler; after min-idle
// another consumer of the group takes the message over.
func TestCrash(t *testing.T) {
	addr := redistest.Addr(t)
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REDSTREAM_CRASH_TOPIC="+topic, "REDSTREAM_REDIS_ADDR="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	id := send(t, newProducer(t, client, cfg), topic, order{1, "crash"})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "handling ") {
				lines <- strings.TrimPrefix(sc.Text(), "handling ")
			}
		}
		close(lines)
	}()
	select {
	case got := <-lines:
		if got != id {
			t.Fatalf("child handles %s, want %s", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the child never started handling")
	}
	killedAt := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	for range lines {
	}

	var mu sync.Mutex
	var got []*stream.Message[order]
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	eventually(t, 10*time.Second, "the takeover", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	mu.Lock()
	m := got[0]
	mu.Unlock()
	if m.ID != id || m.DeliveryCount != 2 || m.Body.ID != 1 {
		t.Errorf("took over %s (delivery %d, body %+v), want %s as delivery 2", m.ID, m.DeliveryCount, m.Body, id)
	}
	if since := time.Since(killedAt); since < cfg.Autoclaim.MinIdle {
		t.Errorf("taken over %v after the crash, before min-idle", since)
	}
	eventually(t, 5*time.Second, "the ack", func() bool { return pending(t, client, topic, "g") == 0 })
}

// TestRedisRestart restarts the server (losing the stream and its groups); the consumer
// reconnects, recreates its group and handles what is sent afterwards.
func TestRedisRestart(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	cfg := fastConfig()
	topic := newTopic(t)
	var errs sync.Map
	cfg.OnError = func(err error) { errs.Store(err.Error(), true) }
	got := make(chan int, 16)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error { got <- m.Body.ID; return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	send(t, p, topic, order{1, "before"})
	if id := <-got; id != 1 {
		t.Fatalf("got %d, want 1", id)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Sending may fail while the client reconnects.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := p.Send(context.Background(), topic, stream.NewMessage(order{2, "after"}))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("send after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case id := <-got:
		if id != 2 {
			t.Fatalf("got %d, want 2", id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no message handled after the restart")
	}
	groups, err := client.Do(context.Background(), client.B().XinfoGroups().Key(topic).Build()).ToArray()
	if err != nil || len(groups) != 1 {
		t.Errorf("groups after restart: %d, %v; want the recreated group", len(groups), err)
	}
}

// TestCloseUnderLoad closes a consumer while a producer keeps sending: every message whose
// handler succeeded is acknowledged, the rest stay pending, and no goroutine is left (the
// package's TestMain checks leaks).
func TestCloseUnderLoad(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ReadCount = 50
	topic := newTopic(t)
	var mu sync.Mutex
	done := map[string]bool{}
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			time.Sleep(time.Millisecond)
			mu.Lock()
			done[m.ID] = true
			mu.Unlock()
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, client, cfg)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := p.Send(ctx, topic, stream.NewMessage(order{i, "load"})); err != nil && ctx.Err() == nil {
				t.Errorf("Send: %v", err)
				return
			}
		}
	}()
	eventually(t, 10*time.Second, "200 handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(done) >= 200 })
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	stop()
	wg.Wait()
	if err := c.Close(cctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	res, err := client.Do(context.Background(), client.B().Xpending().Key(topic).Group("g").Start("-").End("+").Count(100000).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range res {
		e, _ := r.ToArray()
		id, _ := e[0].ToString()
		if done[id] {
			t.Errorf("entry %s was handled but is still pending after Close", id)
		}
	}
	t.Logf("handled %d, pending after close %d", len(done), len(res))
}

// TestCloseDeadline: a handler that outlives Close's deadline gets its context cancelled;
// Close reports the deadline and the entry stays pending.
func TestCloseDeadline(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	started := make(chan struct{})
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	send(t, newProducer(t, client, cfg), topic, order{1, "slow"})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want DeadlineExceeded", err)
	}
	if got := pending(t, client, topic, "g"); got != 1 {
		t.Errorf("pending = %d, want 1 (the cut-short entry)", got)
	}
	if got := xlen(t, client, stream.DeadLetterStreamName(topic)); got != 0 {
		t.Errorf("dead letters = %d, want 0", got)
	}
}
