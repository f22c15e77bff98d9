package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// TestLeaseSlowHandler: a handler that takes 3 s with min-idle 1 s runs exactly once, with a
// second consumer of the group scanning every 100 ms for entries to take over.
func TestLeaseSlowHandler(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = time.Second
	cfg.Autoclaim.Interval = 100 * time.Millisecond
	topic := newTopic(t)
	var calls atomic.Int64
	done := make(chan struct{})
	for i := 0; i < 2; i++ {
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
			Handle: func(ctx context.Context, m *stream.Message[order]) error {
				if calls.Add(1) == 1 {
					defer close(done)
				}
				time.Sleep(3 * time.Second)
				return nil
			}}); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
	}
	send(t, newProducer(t, client, cfg), topic, order{1, "slow"})
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the message was not handled")
	}
	eventually(t, 10*time.Second, "the ack", func() bool { return pending(t, client, topic, "g") == 0 })
	time.Sleep(1500 * time.Millisecond) // more than min-idle after the ack: a late takeover would show
	if n := calls.Load(); n != 1 {
		t.Errorf("Handle called %d times for one message, want 1", n)
	}
}

// TestReadAheadNoDuplicates: 150 messages queued behind a 100 ms handler (read-count 10,
// concurrency 1, min-idle 1 s) are each handled once, by one consumer and by two of one
// group.
func TestReadAheadNoDuplicates(t *testing.T) {
	for _, consumers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d consumers", consumers), func(t *testing.T) {
			client := redistest.Client(t)
			cfg := fastConfig()
			cfg.ReadCount = 10
			cfg.Autoclaim.MinIdle = time.Second
			cfg.Autoclaim.Interval = 100 * time.Millisecond
			topic := newTopic(t)
			const total = 150
			p := newProducer(t, client, cfg)
			for i := 0; i < total; i++ {
				send(t, p, topic, order{i, "queued"})
			}
			var mu sync.Mutex
			calls := map[int]int{}
			var handled atomic.Int64
			for i := 0; i < consumers; i++ {
				c := newConsumer(t, client, cfg)
				if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 1,
					Handle: func(ctx context.Context, m *stream.Message[order]) error {
						mu.Lock()
						calls[m.Body.ID]++
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
						handled.Add(1)
						return nil
					}}); err != nil {
					t.Fatal(err)
				}
				startConsumer(t, c)
			}
			eventually(t, 60*time.Second, "every message handled", func() bool { return handled.Load() >= total })
			eventually(t, 10*time.Second, "the acks", func() bool { return pending(t, client, topic, "g") == 0 })
			time.Sleep(1500 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			dups := 0
			for i := 0; i < total; i++ {
				switch n := calls[i]; {
				case n == 0:
					t.Errorf("message %d never handled", i)
				case n > 1:
					dups += n - 1
				}
			}
			if dups != 0 {
				t.Errorf("%d duplicate handlings of %d messages, want 0", dups, total)
			}
		})
	}
}

// TestRetryFollowsBackoff: with the default scan settings (min-idle 60 s, scan every 5 s), a
// 500 ms backoff retries a failed message about 500 ms after the failure.
func TestRetryFollowsBackoff(t *testing.T) {
	client := redistest.Client(t)
	cfg := stream.Config{BlockTimeout: 100 * time.Millisecond, Metrics: vm.NewSet()}
	topic := newTopic(t)
	var mu sync.Mutex
	var at []time.Time
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		RetryPolicy: stream.FixedRetryPolicy{Max: 3, Backoff: 500 * time.Millisecond},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) == 1 {
				return errors.New("first delivery fails")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	time.Sleep(200 * time.Millisecond) // the first scan has run: the retry cannot ride on it
	send(t, newProducer(t, client, cfg), topic, order{1, "retry"})
	eventually(t, 10*time.Second, "the retry", func() bool { mu.Lock(); defer mu.Unlock(); return len(at) >= 2 })
	mu.Lock()
	gap := at[1].Sub(at[0])
	mu.Unlock()
	if gap < 450*time.Millisecond || gap > time.Second {
		t.Errorf("retry %v after the failure, want 500 ms to 1 s", gap)
	}
	t.Logf("retry %v after the failure", gap.Round(time.Millisecond))
}

// serverPID returns the process id of the redis-server behind client.
func serverPID(t *testing.T, client rueidis.Client) int {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}

// TestCloseRedisDown: Close(context.Background()) returns within 3 s of its call when Redis
// was killed, and when Redis hangs (SIGSTOP), with the default settings, idle and with a
// handler in flight that finishes. With a hung Redis the finished handler's ack waits for
// Redis until the shutdown timeout (1.5 s in that case) ends.
func TestCloseRedisDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hang     bool
		inFlight bool
	}{
		{"killed", false, false},
		{"hung", true, false},
		{"killed with a handler in flight", false, true},
		{"hung with a handler in flight", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.NewServer(t)
			client := redistest.NewClient(t, srv.Addr)
			cfg := stream.Config{Metrics: vm.NewSet()}
			if tc.hang && tc.inFlight {
				cfg.ShutdownTimeout = 1500 * time.Millisecond
			}
			topic := newTopic(t)
			started := make(chan struct{}, 1)
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
				Handle: func(ctx context.Context, m *stream.Message[order]) error {
					started <- struct{}{}
					time.Sleep(500 * time.Millisecond)
					return nil
				}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.inFlight {
				send(t, newProducer(t, client, cfg), topic, order{1, "in flight"})
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("not handled")
				}
			} else {
				time.Sleep(300 * time.Millisecond) // reader blocked in XREADGROUP
			}
			pid := serverPID(t, client)
			if tc.hang {
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			} else {
				srv.Stop()
			}
			begin := time.Now()
			err := c.Close(context.Background())
			took := time.Since(begin)
			t.Logf("Close returned after %v: %v", took.Round(time.Millisecond), err)
			if took > 3*time.Second {
				t.Errorf("Close took %v with Redis down, want < 3 s", took)
			}
			if tc.hang {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
}

// TestRunDrains: Run returns when its context is cancelled, after the handler in flight has
// finished (not cancelled) and its entry has been acknowledged.
func TestRunDrains(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	started := make(chan struct{})
	var finished, cancelled atomic.Bool
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			close(started)
			select {
			case <-time.After(500 * time.Millisecond):
				finished.Store(true)
				return nil
			case <-ctx.Done():
				cancelled.Store(true)
				return ctx.Err()
			}
		}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	eventually(t, 10*time.Second, "running", func() bool { return c.Stats().Running })
	send(t, newProducer(t, client, cfg), topic, order{1, "drain"})
	<-started
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("Run = %v, want nil after a clean drain", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if !finished.Load() || cancelled.Load() {
		t.Errorf("handler finished %v, cancelled %v; want finished", finished.Load(), cancelled.Load())
	}
	if n := pending(t, client, topic, "g"); n != 0 {
		t.Errorf("pending after Run = %d, want 0 (the drained entry acknowledged)", n)
	}
	if c.Stats().Running {
		t.Error("Stats().Running after Run returned")
	}
}

// TestShutdownTimeout: a handler that outlives Config.ShutdownTimeout is cancelled; Run
// returns an error wrapping ErrShutdownTimeout and the entry stays pending.
func TestShutdownTimeout(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ShutdownTimeout = 200 * time.Millisecond
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
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	eventually(t, 10*time.Second, "running", func() bool { return c.Stats().Running })
	send(t, newProducer(t, client, cfg), topic, order{1, "stuck"})
	<-started
	begin := time.Now()
	cancel()
	err := <-runErr
	if !errors.Is(err, stream.ErrShutdownTimeout) {
		t.Errorf("Run = %v, want ErrShutdownTimeout", err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("Run took %v to return after cancel, want about 200 ms", took)
	}
	if n := pending(t, client, topic, "g"); n != 1 {
		t.Errorf("pending = %d, want 1 (the cut-short entry)", n)
	}
}

// consumerNames returns the consumers of the group (XINFO CONSUMERS) and their pending
// counts.
func consumerNames(t *testing.T, client rueidis.Client, topic, group string) map[string]int64 {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().XinfoConsumers().Key(topic).Group(group).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range res {
		m, err := r.AsMap()
		if err != nil {
			t.Fatal(err)
		}
		nm, pd := m["name"], m["pending"]
		name, _ := nm.ToString()
		p, _ := pd.AsInt64()
		out[name] = p
	}
	return out
}

// TestRestartLeavesOneName: a worker that closes cleanly deletes its name from the group, so
// a restarted worker leaves one consumer name, not two.
func TestRestartLeavesOneName(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	var last *stream.Consumer
	for run := 0; run < 2; run++ {
		got := make(chan struct{}, 1)
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
			Handle: func(ctx context.Context, m *stream.Message[order]) error { got <- struct{}{}; return nil }}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		send(t, p, topic, order{run, "restart"})
		<-got
		eventually(t, 5*time.Second, "the ack", func() bool { return pending(t, client, topic, "g") == 0 })
		if run == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		last = c
	}
	names := consumerNames(t, client, topic, "g")
	if len(names) != 1 {
		t.Errorf("consumers after a restart: %v, want only %s", names, last.Stats().Consumer)
	}
	if _, ok := names[last.Stats().Consumer]; !ok {
		t.Errorf("consumers %v lack the running one %s", names, last.Stats().Consumer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := last.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if names := consumerNames(t, client, topic, "g"); len(names) != 0 {
		t.Errorf("consumers after the last Close: %v, want none", names)
	}
}

// TestReapIdleConsumers: names left by crashed processes are removed after ConsumerTimeout
// when they own no entry; one that owns an entry is kept.
func TestReapIdleConsumers(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = time.Minute // the orphaned entry is not taken over during the test
	cfg.ConsumerTimeout = time.Second
	topic := newTopic(t)
	ctx := context.Background()
	send(t, newProducer(t, client, cfg), topic, order{1, "orphan"})
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// "crashed-owner" reads the entry and dies; "crashed-empty" only ever blocked.
	if err := client.Do(ctx, client.B().Xreadgroup().Group("g", "crashed-owner").Count(1).Streams().Key(topic).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, client.B().XgroupCreateconsumer().Key(topic).Group("g").Consumer("crashed-empty").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	eventually(t, 15*time.Second, "crashed-empty removed", func() bool {
		_, ok := consumerNames(t, client, topic, "g")["crashed-empty"]
		return !ok
	})
	names := consumerNames(t, client, topic, "g")
	if names["crashed-owner"] != 1 {
		t.Errorf("consumers %v: want crashed-owner kept with its pending entry", names)
	}
}

// TestHandlerTimeout: a handler slower than its Timeout has its context cancelled; the
// delivery fails, is retried, then dead-lettered with the timeout as the reason.
func TestHandlerTimeout(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	rec := newRecorder()
	var calls atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Timeout: 100 * time.Millisecond, MaxDeliveries: 2,
		RetryPolicy: stream.FixedRetryPolicy{Max: 2, Backoff: 50 * time.Millisecond},
		OnFailure:   rec.fail,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			calls.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
				return nil
			}
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "slow"})
	eventually(t, 10*time.Second, "the dead letter", func() bool { return rec.numFailures() == 1 })
	if n := calls.Load(); n != 2 {
		t.Errorf("Handle called %d times, want 2 (MaxDeliveries)", n)
	}
	f := rec.failures[0]
	if !errors.Is(f.err, stream.ErrHandlerTimeout) || !errors.Is(f.err, stream.ErrMaxRetryExceeded) || !errors.Is(f.err, context.DeadlineExceeded) {
		t.Errorf("OnFailure error %v: want ErrHandlerTimeout, ErrMaxRetryExceeded and DeadlineExceeded", f.err)
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	list, err := dls.List(context.Background(), topic, stream.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters: %v, %v", list, err)
	}
	if !strings.Contains(list[0].Error, "timed out after 100ms") {
		t.Errorf("dead letter reason %q, want the timeout", list[0].Error)
	}
}

// TestDeadLetterReasonSurvivesOutage: the dead-letter write fails while Redis refuses writes
// (min-replicas-to-write); the consumer keeps the entry, tries again, and once writes work
// the dead letter records the handler's error, not "the last delivery was not acknowledged".
func TestDeadLetterReasonSurvivesOutage(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	cfg := fastConfig()
	topic := newTopic(t)
	ctx := context.Background()
	setWrites := func(on bool) {
		n := "1"
		if on {
			n = "0"
		}
		if err := client.Do(ctx, client.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", n).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	failed := make(chan struct{})
	rec := newRecorder()
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true, OnFailure: rec.fail,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			setWrites(false) // the outage starts before the dead-letter write
			close(failed)
			return errors.New("payment declined: card expired")
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "doomed"})
	<-failed
	time.Sleep(2 * time.Second) // several dead-letter attempts fail, and min-idle passes
	if n := xlen(t, client, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Fatalf("dead letters during the outage: %d", n)
	}
	setWrites(true)
	eventually(t, 10*time.Second, "the dead letter", func() bool { return rec.numFailures() == 1 })
	dls, _ := stream.NewDeadLetters(client, cfg)
	list, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters: %v, %v", list, err)
	}
	if list[0].Error != "payment declined: card expired" {
		t.Errorf("dead letter reason %q, want the handler's error", list[0].Error)
	}
	if n := pending(t, client, topic, "g"); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
}

// TestLifecycle: Pause stops deliveries (in-flight ones finish), Resume restarts them;
// Stats and Healthy report the state.
func TestLifecycle(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	release := make(chan struct{})
	var handled atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if m.Body.ID == 1 {
				<-release
			}
			handled.Add(1)
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthy(context.Background()); !errors.Is(err, stream.ErrNotRunning) {
		t.Errorf("Healthy before Start = %v, want ErrNotRunning", err)
	}
	startConsumer(t, c)
	if !c.Stats().Running {
		t.Error("Stats().Running = false after Start")
	}
	if err := c.Healthy(context.Background()); err != nil {
		t.Errorf("Healthy = %v", err)
	}
	p := newProducer(t, client, cfg)
	send(t, p, topic, order{1, "held"})
	eventually(t, 5*time.Second, "in flight", func() bool { return c.Stats().InFlight == 1 })
	c.Pause()
	close(release)
	eventually(t, 5*time.Second, "the held message", func() bool { return handled.Load() == 1 })
	send(t, p, topic, order{2, "while paused"})
	time.Sleep(300 * time.Millisecond)
	if n := handled.Load(); n != 1 {
		t.Errorf("handled %d while paused, want 1", n)
	}
	s := c.Stats()
	if !s.Paused || len(s.Handlers) != 1 || s.Handlers[0].Reading {
		t.Errorf("Stats while paused: %+v", s)
	}
	if err := c.Healthy(context.Background()); err != nil {
		t.Errorf("Healthy while paused = %v, want nil", err)
	}
	c.Resume()
	eventually(t, 5*time.Second, "the message sent while paused", func() bool { return handled.Load() == 2 })
	eventually(t, 5*time.Second, "the gauges", func() bool {
		s := c.Stats()
		h := s.Handlers[0]
		return h.Reading && !h.LastRead.IsZero() && h.Pending == 0 && h.Lag == 0 && h.LagExact && !h.RefreshedAt.IsZero()
	})
	if s := c.Stats(); s.InFlight != 0 || !s.Running || s.Paused {
		t.Errorf("Stats after resume: %+v", s)
	}
}

// TestHealthyRedisDown: Healthy fails, within its context, when Redis is down.
func TestHealthyRedisDown(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	cfg := fastConfig()
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: newTopic(t), Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	begin := time.Now()
	if err := c.Healthy(ctx); err == nil {
		t.Error("Healthy = nil with Redis down")
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("Healthy took %v", took)
	}
}

// TestMetricNames: the Java starter's series (dead letters, handle latency, trim attempts
// and deletions, in-flight gauges) exist under their names and labels, in base units.
func TestMetricNames(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	set := vm.NewSet()
	cfg.Metrics = set
	topic := newTopic(t)
	rec := newRecorder()
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true, OnFailure: rec.fail,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if m.Body.ID == 2 {
				return errors.New("no")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	send(t, p, topic, order{1, "ok"})
	send(t, p, topic, order{2, "dead"})
	eventually(t, 10*time.Second, "the dead letter", func() bool { return rec.numFailures() == 1 })
	tr, err := stream.NewTrimmer(client, stream.Config{Metrics: set, Trim: stream.TrimConfig{MaxLen: 1, Mode: stream.TrimMaxLen}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trim(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	set.WritePrometheus(&b)
	out := b.String()
	labels := `{topic="` + topic + `",group="g"}`
	for _, want := range []string{
		"redis_streaming_mq_dead_total" + labels + " 1",
		"redis_streaming_mq_handle_latency_ms_seconds" + "_bucket" + `{topic="` + topic + `",group="g",le=`,
		"redis_streaming_mq_inflight" + labels + " 0",
		"redis_streaming_mq_max_inflight" + labels + " 1", // Concurrency: the default 1
		"redis_streaming_mq_queued" + labels,
		"redis_streaming_mq_trim_attempts_total" + `{topic="` + topic + `"} 1`,
		"redis_streaming_mq_trim_deleted_total" + `{topic="` + topic + `"} 1`,
		"redis_streaming_mq_consumed_total" + labels + " 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// TestLongBackoffRespectedByOthers: a backoff longer than min-idle is not cut short by
// another consumer's crash-recovery scan: the retry comes after the backoff.
func TestLongBackoffRespectedByOthers(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig() // min-idle 150 ms, scans every 50 ms
	topic := newTopic(t)
	var mu sync.Mutex
	var at []time.Time
	for i := 0; i < 2; i++ {
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
			RetryPolicy: stream.FixedRetryPolicy{Max: 3, Backoff: time.Second},
			Handle: func(ctx context.Context, m *stream.Message[order]) error {
				mu.Lock()
				defer mu.Unlock()
				at = append(at, time.Now())
				if len(at) == 1 {
					return errors.New("first delivery fails")
				}
				return nil
			}}); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
	}
	send(t, newProducer(t, client, cfg), topic, order{1, "backoff"})
	eventually(t, 10*time.Second, "the retry", func() bool { mu.Lock(); defer mu.Unlock(); return len(at) >= 2 })
	mu.Lock()
	gap := at[1].Sub(at[0])
	mu.Unlock()
	if gap < 950*time.Millisecond || gap > 3*time.Second {
		t.Errorf("retry %v after the failure, want about the 1 s backoff", gap)
	}
}

// TestReadAheadBound: a busy handler holds at most Concurrency + ReadCount entries; the rest
// stay undelivered in the stream (not pending on this consumer, aging).
func TestReadAheadBound(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ReadCount = 5
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	for i := 0; i < 50; i++ {
		send(t, p, topic, order{i, "bound"})
	}
	release := make(chan struct{})
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	eventually(t, 5*time.Second, "two in flight", func() bool { return c.Stats().InFlight == 2 })
	time.Sleep(300 * time.Millisecond) // several read attempts
	if n := pending(t, client, topic, "g"); n != 7 {
		t.Errorf("pending = %d, want 7 (2 running + 5 read ahead)", n)
	}
	if s := c.Stats().Handlers[0]; s.Queued != 5 || s.InFlight != 2 {
		t.Errorf("Stats: queued %d, in flight %d; want 5 and 2", s.Queued, s.InFlight)
	}
	close(release)
	eventually(t, 10*time.Second, "all handled", func() bool {
		return pending(t, client, topic, "g") == 0 && c.Stats().Handlers[0].Queued == 0 && xlenGroupLag(t, client, topic) == 0
	})
}

// xlenGroupLag returns the lag of group g (XINFO GROUPS).
func xlenGroupLag(t *testing.T, client rueidis.Client, topic string) int64 {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().XinfoGroups().Key(topic).Build()).ToArray()
	if err != nil || len(res) != 1 {
		t.Fatalf("XINFO GROUPS: %v", err)
	}
	m, _ := res[0].AsMap()
	l := m["lag"]
	n, _ := l.AsInt64()
	return n
}

// TestManyRetriesFewSlots: 200 messages each fail twice, with 4 handler slots: the retries
// wait for free slots (the scanner does not spin on them) and every message succeeds on its
// third delivery.
func TestManyRetriesFewSlots(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ReadCount = 2
	topic := newTopic(t)
	const total = 200
	var mu sync.Mutex
	calls := map[int]int{}
	okAt := map[int]int64{}
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2,
		RetryPolicy: stream.FixedRetryPolicy{Max: 3, Backoff: 100 * time.Millisecond},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			mu.Lock()
			defer mu.Unlock()
			calls[m.Body.ID]++
			if calls[m.Body.ID] < 3 {
				return errors.New("not yet")
			}
			okAt[m.Body.ID] = m.DeliveryCount
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	for i := 0; i < total; i++ {
		send(t, p, topic, order{i, "retry"})
	}
	eventually(t, 60*time.Second, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(okAt) == total })
	eventually(t, 10*time.Second, "the acks", func() bool { return pending(t, client, topic, "g") == 0 })
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < total; i++ {
		if calls[i] != 3 || okAt[i] != 3 {
			t.Errorf("message %d: %d calls, success on delivery %d; want 3 and 3", i, calls[i], okAt[i])
		}
	}
	if n := xlen(t, client, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}
