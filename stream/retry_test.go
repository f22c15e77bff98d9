package stream_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// stepPolicy backs off 20 ms after the first delivery and an hour after later ones.
type stepPolicy struct{}

func (stepPolicy) MaxDeliveries() int { return 5 }
func (stepPolicy) NextBackoff(n int64) time.Duration {
	if n == 1 {
		return 20 * time.Millisecond
	}
	return time.Hour
}

// TestRetryPolicyBackoff: the scan redelivers by the policy's backoff for the entry's
// delivery count: the second delivery comes after 20 ms, the third not within a second.
func TestRetryPolicyBackoff(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	var calls atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", RetryPolicy: stepPolicy{},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			calls.Add(1)
			return errors.New("fail")
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "x"})
	eventually(t, 5*time.Second, "the second delivery", func() bool { return calls.Load() == 2 })
	time.Sleep(time.Second)
	if got := calls.Load(); got != 2 {
		t.Errorf("deliveries = %d, want 2 (the third waits an hour)", got)
	}
	if got := pending(t, client, topic, "g"); got != 1 {
		t.Errorf("pending = %d, want 1", got)
	}
}

func TestExponentialRetryPolicy(t *testing.T) {
	p, err := stream.NewExponentialRetryPolicy(4, 100*time.Millisecond, time.Second, 2, core.JitterNone)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int64]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 5: time.Second} {
		if got := p.NextBackoff(n); got != min(want, time.Second) {
			t.Errorf("NextBackoff(%d) = %v, want %v", n, got, min(want, time.Second))
		}
	}
	if p.MaxDeliveries() != 4 {
		t.Errorf("MaxDeliveries = %d", p.MaxDeliveries())
	}
	j, _ := stream.NewExponentialRetryPolicy(4, 100*time.Millisecond, time.Second, 2, core.JitterFull)
	for i := 0; i < 100; i++ {
		if d := j.NextBackoff(2); d < 0 || d > 200*time.Millisecond {
			t.Fatalf("full jitter NextBackoff(2) = %v, want in [0, 200ms]", d)
		}
	}
	for _, bad := range []struct {
		max      int
		initial  time.Duration
		maxDelay time.Duration
		mult     float64
	}{{0, time.Second, time.Second, 2}, {3, time.Second, time.Millisecond, 2}, {3, time.Second, time.Second, 0.5}} {
		if _, err := stream.NewExponentialRetryPolicy(bad.max, bad.initial, bad.maxDelay, bad.mult, core.JitterNone); err == nil {
			t.Errorf("NewExponentialRetryPolicy(%+v): got nil error", bad)
		}
	}
	if got := (stream.FixedRetryPolicy{}).MaxDeliveries(); got != 1 {
		t.Errorf("zero FixedRetryPolicy MaxDeliveries = %d, want 1", got)
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("x")
	if stream.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	p := stream.Permanent(base)
	if !stream.IsPermanent(p) || !errors.Is(p, base) || p.Error() != "x" || stream.IsPermanent(base) {
		t.Errorf("Permanent: %v", p)
	}
}

func TestWithMaxLen(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	p := newProducer(t, client, fastConfig())
	for i := 0; i < 1000; i++ {
		send(t, p, topic, order{i, "x"}, stream.WithMaxLen(100))
	}
	// Approximate trimming removes whole macro nodes: about 100, never fewer.
	if n := xlen(t, client, topic); n < 100 || n > 300 {
		t.Errorf("XLEN = %d, want about 100", n)
	}
}

func TestNoHandlersStartNoGoroutine(t *testing.T) {
	client := redistest.Client(t)
	c := newConsumer(t, client, fastConfig())
	before := runtime.NumGoroutine()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d -> %d after starting a consumer without handlers", before, after)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSendErrors(t *testing.T) {
	client := redistest.Client(t)
	p := newProducer(t, client, fastConfig())
	ctx := context.Background()
	var nilMsg *stream.Message[order]
	for _, tc := range []struct {
		name  string
		topic string
		msg   stream.Sendable
	}{
		{"nil message", "t", nil},
		{"nil pointer", "t", nilMsg},
		{"empty topic", "", stream.NewMessage(1)},
		{"bad topic", "a}", stream.NewMessage(1)},
		{"unencodable body", "t", stream.NewMessage(make(chan int))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.Send(ctx, tc.topic, tc.msg); err == nil || !strings.HasPrefix(err.Error(), "stream: ") {
				t.Errorf("Send = %v, want a stream: error", err)
			}
		})
	}
	if _, err := stream.NewProducer(nil, stream.Config{}); err == nil {
		t.Error("NewProducer(nil): got nil error")
	}
}

// TestDefaultRetryBackoff: with every default but the metrics set (min-idle 60 s,
// retry-backoff 1 s, max-retry 3), a failing handler is delivered again about 1 s and then
// 2 s after its failures, and dead-lettered after the third delivery, not minutes later.
func TestDefaultRetryBackoff(t *testing.T) {
	client := redistest.Client(t)
	cfg := stream.Config{Metrics: fastConfig().Metrics}
	topic := newTopic(t)
	var mu sync.Mutex
	var at []time.Time
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			return errors.New("fail")
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "x"})
	deliveries := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
	eventually(t, 10*time.Second, "three deliveries", func() bool { return len(deliveries()) == 3 })
	eventually(t, 5*time.Second, "the dead letter", func() bool { return xlen(t, client, streamwire.DeadLetterStreamName(topic)) == 1 })
	got := deliveries()
	for i, want := range []time.Duration{time.Second, 2 * time.Second} {
		// The wait is the backoff, plus up to one scan wake-up and the handling itself.
		if gap := got[i+1].Sub(got[i]); gap < want || gap > want+time.Second {
			t.Errorf("wait before delivery %d = %v, want %v (+ at most 1 s)", i+2, gap, want)
		}
	}
}
