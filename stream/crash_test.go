package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
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
	if got := xlen(t, client, streamwire.DeadLetterStreamName(topic)); got != 0 {
		t.Errorf("dead letters = %d, want 0", got)
	}
}

// TestCrashSoakChild is one consumer process of TestCrashSoak: it handles the topic with 20%
// random failures, records every success in the hash soak:<topic>:done before returning
// nil, and runs until it is killed.
func TestCrashSoakChild(t *testing.T) {
	topic := os.Getenv("REDSTREAM_SOAK_TOPIC")
	if topic == "" {
		t.Skip("run by TestCrashSoak")
	}
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ReadCount = 20
	cfg.Autoclaim.MinIdle = 500 * time.Millisecond
	cfg.Autoclaim.Interval = 200 * time.Millisecond
	cfg.ConsumerTimeout = 2 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	done := "soak:" + topic + ":done"
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4,
		RetryPolicy: stream.FixedRetryPolicy{Max: 3, Backoff: 100 * time.Millisecond},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			if rand.IntN(5) == 0 {
				return errors.New("random failure")
			}
			return client.Do(ctx, client.B().Hincrby().Key(done).Field(strconv.Itoa(m.Body.ID)).Increment(1).Build()).Error()
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("started\n")
	select {}
}

// TestCrashSoak: 3 consumer processes share a group; one of them is killed (SIGKILL) every
// 1-2.5 s and replaced while 3000 messages are sent (over about 25 s), and once more right
// after the last send; 20% of handler calls fail and are
// retried (3 deliveries, then a dead letter). At the end every message was handled or
// dead-lettered (none lost) and nothing is pending; duplicate handlings (a kill between the
// handler's success and its ack) are counted and reported.
func TestCrashSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const total = 3000
	addr := redistest.Addr(t)
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	ctx := context.Background()
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	children := map[int]*exec.Cmd{}
	spawn := func(slot int) {
		cmd := startChild(t, "TestCrashSoakChild", nil, "REDSTREAM_SOAK_TOPIC="+topic, "REDSTREAM_REDIS_ADDR="+addr)
		mu.Lock()
		children[slot] = cmd
		mu.Unlock()
	}
	kill := func(slot int) {
		mu.Lock()
		cmd := children[slot]
		mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	for i := 0; i < 3; i++ {
		spawn(i)
	}
	defer func() {
		for i := 0; i < 3; i++ {
			kill(i)
		}
	}()

	p := newProducer(t, client, cfg)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < total; i++ {
			if _, err := p.Send(ctx, topic, stream.NewMessage(order{i, "soak"})); err != nil {
				t.Errorf("Send: %v", err)
				return
			}
			time.Sleep(8 * time.Millisecond) // about 25 s of sends, through about 15 kills
		}
	}()
	kills := 0
	for sending := true; sending; {
		select {
		case <-sent:
			sending = false
			continue
		case <-time.After(time.Duration(1000+rand.IntN(1500)) * time.Millisecond):
		}
		slot := rand.IntN(3)
		kill(slot)
		kills++
		spawn(slot)
	}
	// The last kill takes a process that holds the last entries sent.
	slot := rand.IntN(3)
	kill(slot)
	lastKill := time.Now()
	kills++
	spawn(slot)

	dls, _ := stream.NewDeadLetters(client, cfg)
	var dead map[int]int
	var doneCounts map[string]string
	eventually(t, 120*time.Second, "every message handled or dead-lettered, none pending", func() bool {
		if pending(t, client, topic, "g") != 0 {
			return false
		}
		var err error
		doneCounts, err = client.Do(ctx, client.B().Hgetall().Key("soak:"+topic+":done").Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		list, err := dls.List(ctx, topic, stream.ListOptions{Count: total})
		if err != nil {
			t.Fatal(err)
		}
		dead = map[int]int{}
		for _, dl := range list {
			b, _ := dl.Body()
			var o order
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatalf("dead letter body %s: %v", b, err)
			}
			dead[o.ID]++
		}
		for i := 0; i < total; i++ {
			if _, ok := doneCounts[strconv.Itoa(i)]; !ok && dead[i] == 0 {
				return false
			}
		}
		return true
	})
	settled := time.Since(lastKill)
	dups, both, lost := 0, 0, 0
	for i := 0; i < total; i++ {
		n, _ := strconv.Atoi(doneCounts[strconv.Itoa(i)])
		if n > 1 {
			dups += n - 1
		}
		if n > 0 && dead[i] > 0 {
			both++
		}
		if n == 0 && dead[i] == 0 {
			lost++
		}
		if dead[i] > 1 {
			t.Errorf("message %d dead-lettered %d times", i, dead[i])
		}
	}
	if lost != 0 {
		t.Errorf("%d messages lost", lost)
	}
	if len(dead) == 0 {
		t.Error("no dead letter: the retry path was not exercised")
	}
	names := consumerNames(t, client, topic, "g")
	t.Logf("%d messages, 3 processes, %d SIGKILLs: 0 lost, %d dead-lettered, %d duplicate successes, %d both handled and dead-lettered, %d consumer names left; settled %v after the last kill",
		total, kills, len(dead), dups, both, len(names), settled.Round(time.Millisecond))
	// Recovery runs at the speed of the handlers: what the killed processes held is taken
	// over once min-idle (500 ms) has passed, and retries follow their 100 ms backoff.
	if settled > 5*time.Second {
		t.Errorf("settled %v after the last kill, want within 5 s", settled.Round(time.Millisecond))
	}
}
