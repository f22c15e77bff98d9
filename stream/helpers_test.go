package stream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redstream-go/redstream/stream"
)

var topicSeq atomic.Int64

// newTopic returns a topic name unique in this test binary.
func newTopic(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

// fastConfig is the default configuration with timings shrunk for tests.
func fastConfig() stream.Config {
	return stream.Config{
		BlockTimeout: 50 * time.Millisecond,
		Autoclaim:    stream.AutoclaimConfig{MinIdle: 150 * time.Millisecond, Interval: 50 * time.Millisecond},
		Trim:         stream.TrimConfig{Interval: 3600_000 * time.Millisecond},
		Metrics:      vm.NewSet(),
	}
}

// order is the body type of most tests.
type order struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
}

// eventually polls cond every 10 ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startConsumer(t testing.TB, c *stream.Consumer) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func newConsumer(t testing.TB, client rueidis.Client, cfg stream.Config) *stream.Consumer {
	t.Helper()
	c, err := stream.NewConsumer(client, cfg)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	return c
}

func newProducer(t testing.TB, client rueidis.Client, cfg stream.Config) *stream.Producer {
	t.Helper()
	p, err := stream.NewProducer(client, cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	return p
}

func send(t testing.TB, p *stream.Producer, topic string, body order, opts ...stream.SendOption) string {
	t.Helper()
	id, err := p.Send(context.Background(), topic, stream.NewMessage(body), opts...)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	return id
}

// recorder collects what a handler saw, safe for concurrent use.
type recorder struct {
	mu       sync.Mutex
	handled  map[int]int // order id -> successful handlings
	calls    map[int]int // order id -> Handle calls
	failures []failure
}

type failure struct {
	msg  *stream.Message[order]
	body string
	err  error
}

func newRecorder() *recorder { return &recorder{handled: map[int]int{}, calls: map[int]int{}} }

func (r *recorder) call(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[id]++
	return r.calls[id]
}

func (r *recorder) ok(id int) {
	r.mu.Lock()
	r.handled[id]++
	r.mu.Unlock()
}

func (r *recorder) fail(_ context.Context, m *stream.Message[order], body []byte, err error) {
	r.mu.Lock()
	r.failures = append(r.failures, failure{m, string(body), err})
	r.mu.Unlock()
}

func (r *recorder) numFailures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures)
}

func (r *recorder) numHandled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled)
}

func (r *recorder) callsOf(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[id]
}

// pending returns the group's pending count (XPENDING summary).
func pending(t testing.TB, client rueidis.Client, stream, group string) int64 {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().Xpending().Key(stream).Group(group).Build()).ToArray()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	n, _ := res[0].AsInt64()
	return n
}

func xlen(t testing.TB, client rueidis.Client, key string) int64 {
	t.Helper()
	n, err := client.Do(context.Background(), client.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("XLEN %s: %v", key, err)
	}
	return n
}
