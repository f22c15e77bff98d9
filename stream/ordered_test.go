package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// orderedRun sends n messages over keys keys, handles them with OrderedByKey and
// Concurrency 8, and checks per-key order: no two calls of one key overlap, the calls of a
// key never go back in stream order (a failed message is retried before the next one of
// its key runs), and every message ends handled once or dead-lettered. failFirst(i) makes
// the first delivery of message i fail; failAlways(i) fails all its deliveries (dead letter
// after 3).
func orderedRun(t *testing.T, n, keys int, failFirst, failAlways func(i int) bool) {
	t.Helper()
	client := redistest.Client(t)
	cfg := fastConfig()
	// One consumer and no takeover to test: a min-idle far above any stall of a loaded
	// runner, so that only retries (not the consumer's own scan of entries it holds) deliver
	// a message again.
	cfg.Autoclaim.MinIdle = 10 * time.Second
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	for start := 0; start < n; start += 1000 {
		var msgs []stream.Sendable
		for i := start; i < min(start+1000, n); i++ {
			msgs = append(msgs, stream.Message[order]{Key: fmt.Sprintf("k%03d", i%keys), Body: order{ID: i}})
		}
		if _, err := p.SendBatch(context.Background(), topic, msgs); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu        sync.Mutex
		calls     = map[string][]int{} // key -> message ids in call order
		successes = make([]int, n)
		active    = map[string]int{}
		running   atomic.Int64
		peak      atomic.Int64
		overlaps  atomic.Int64
		dead      atomic.Int64
		tries     = make([]int, n)
	)
	var seen atomic.Int64
	c := newConsumer(t, client, cfg)
	policy := stream.FixedRetryPolicy{Max: 3, Backoff: 20 * time.Millisecond}
	err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 8, OrderedByKey: true, RetryPolicy: policy,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			i := m.Body.ID
			mu.Lock()
			active[m.Key]++
			if active[m.Key] > 1 {
				overlaps.Add(1)
			}
			calls[m.Key] = append(calls[m.Key], i)
			tries[i]++
			try := tries[i]
			mu.Unlock()
			r := running.Add(1)
			for {
				p := peak.Load()
				if r <= p || peak.CompareAndSwap(p, r) {
					break
				}
			}
			time.Sleep(200 * time.Microsecond)
			running.Add(-1)
			mu.Lock()
			active[m.Key]--
			mu.Unlock()
			if failAlways(i) || (try == 1 && failFirst(i)) {
				return errors.New("injected failure")
			}
			mu.Lock()
			successes[i]++
			mu.Unlock()
			seen.Add(1)
			return nil
		},
		OnFailure: func(context.Context, *stream.Message[order], []byte, error) { dead.Add(1); seen.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	startConsumer(t, c)
	eventually(t, 120*time.Second, "every message handled or dead-lettered", func() bool { return seen.Load() >= int64(n) })
	took := time.Since(begin)
	time.Sleep(100 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	if o := overlaps.Load(); o != 0 {
		t.Errorf("%d calls overlapped another call of the same key", o)
	}
	backwards := 0
	for k, seq := range calls {
		for j := 1; j < len(seq); j++ {
			if seq[j] < seq[j-1] {
				if backwards++; backwards <= 5 {
					t.Errorf("key %s: message %d handled after %d (calls %v...)", k, seq[j], seq[j-1], seq[max(j-3, 0):min(j+3, len(seq))])
				}
			}
		}
	}
	wantDead := 0
	for i := range n {
		switch {
		case failAlways(i):
			wantDead++
			if successes[i] != 0 || tries[i] != 3 {
				t.Errorf("message %d (always failing): %d successes, %d calls; want 0 and 3", i, successes[i], tries[i])
			}
		case successes[i] != 1:
			t.Errorf("message %d handled successfully %d times, want once", i, successes[i])
		}
	}
	if d := dead.Load(); d != int64(wantDead) {
		t.Errorf("%d dead letters, want %d", d, wantDead)
	}
	if pk := peak.Load(); pk < 2 {
		t.Errorf("at most %d handler calls ran at once, want parallel keys", pk)
	}
	t.Logf("%d messages over %d keys in %v (%.0f/s), peak %d calls at once, %d dead letters, %d keys, %d order violations",
		n, keys, took.Round(time.Millisecond), float64(n)/took.Seconds(), peak.Load(), dead.Load(), len(calls), backwards)
}

// TestOrderedByKey: 10,000 messages over 100 keys, Concurrency 8: per-key order, keys in
// parallel, on a real redis-server.
func TestOrderedByKey(t *testing.T) {
	never := func(int) bool { return false }
	orderedRun(t, 10000, 100, never, never)
}

// TestOrderedByKeyFailures: the same with failures injected: about 3% of the messages fail
// their first delivery (retried after 20 ms, blocking their key meanwhile) and 1 in 500
// fails every time (dead-lettered after 3 deliveries, then its key moves on).
func TestOrderedByKeyFailures(t *testing.T) {
	orderedRun(t, 10000, 100, func(i int) bool { return i%37 == 5 }, func(i int) bool { return i%500 == 7 })
}

// TestOrderedByKeyBlocksOnlyItsKey: a failing message with a long backoff holds back the
// later messages of its key only; Close then returns at once, leaving them pending, and a
// second consumer takes them over and handles them in order.
func TestOrderedByKeyBlocksOnlyItsKey(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	for i := range 10 {
		key := "b"
		if i%2 == 0 {
			key = "a"
		}
		if _, err := p.Send(context.Background(), topic, stream.Message[order]{Key: key, Body: order{ID: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []int
	record := func(m *stream.Message[order]) {
		mu.Lock()
		got = append(got, m.Body.ID)
		mu.Unlock()
	}
	c1 := newConsumer(t, client, cfg)
	if err := stream.Register(c1, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4, OrderedByKey: true,
		RetryPolicy: stream.FixedRetryPolicy{Max: 5, Backoff: time.Hour},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if m.Body.ID == 0 {
				return errors.New("the head of key a fails")
			}
			record(m)
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "key b's messages", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 5 })
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	for _, id := range got {
		if id%2 == 0 {
			t.Errorf("message %d of the blocked key a was handled while its head waits for its retry", id)
		}
	}
	got = nil
	mu.Unlock()
	if s := c1.Stats().Handlers[0]; s.Queued != 4 || s.KeyWaiting != 4 || s.RetriesScheduled != 1 {
		t.Errorf("stats: %d queued, %d waiting behind their key, %d retries; want key a's 4 waiting and its head's retry", s.Queued, s.KeyWaiting, s.RetriesScheduled)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	begin := time.Now()
	if err := c1.Close(ctx); err != nil {
		t.Errorf("Close with parked entries: %v", err)
	}
	cancel()
	t.Logf("Close with a blocked key took %v", time.Since(begin))
	if n := pending(t, client, topic, "g"); n != 5 {
		t.Fatalf("%d pending after Close, want key a's 5", n)
	}

	c2 := newConsumer(t, client, cfg)
	if err := stream.Register(c2, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4, OrderedByKey: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error { record(m); return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c2)
	eventually(t, 10*time.Second, "key a's messages after the takeover", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 5 })
	mu.Lock()
	defer mu.Unlock()
	for i, id := range got {
		if id != 2*i {
			t.Fatalf("after the takeover key a was handled as %v, want [0 2 4 6 8]", got)
		}
	}
}
