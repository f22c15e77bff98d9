package stream_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// fill sends n messages of order{ID: id} to topic at priority level p (0: none given).
func fill(t *testing.T, p *stream.Producer, topic string, level, id, n int) {
	t.Helper()
	ctx := context.Background()
	for sent := 0; sent < n; {
		k := min(n-sent, 500)
		msgs := make([]stream.Sendable, k)
		for i := range msgs {
			msgs[i] = stream.NewMessage(order{ID: id})
		}
		var opts []stream.SendOption
		if level > 0 {
			opts = append(opts, stream.WithPriority(level))
		}
		res, err := p.SendBatch(ctx, topic, msgs, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		sent += k
	}
}

// counter counts the first limit messages handled by their order ID.
type counter struct {
	work  time.Duration // each Handle call's work
	limit int64
	n     atomic.Int64
	mu    sync.Mutex
	by    map[int]int
	order []int // the IDs in the order handled
	done  chan struct{}
}

func newCounter(limit int64) *counter {
	return &counter{limit: limit, by: map[int]int{}, done: make(chan struct{})}
}

func (c *counter) handle(_ context.Context, m *stream.Message[order]) error {
	if c.work > 0 {
		time.Sleep(c.work)
	}
	n := c.n.Add(1)
	if n > c.limit {
		return nil
	}
	c.mu.Lock()
	c.by[m.Body.ID]++
	c.order = append(c.order, m.Body.ID)
	c.mu.Unlock()
	if n == c.limit {
		close(c.done)
	}
	return nil
}

func (c *counter) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("only %d of %d messages handled in 120 s", c.n.Load(), c.limit)
	}
}

// checkShares fails unless the counts of the IDs are within 5% of their weights' shares,
// counted from the first message by which every ID had been handled: until each handler's
// first read returns, the pool serves the handlers that have work (it waits for no one),
// and a reader that starts late on a loaded machine is not the pool's weighting.
func checkShares(t *testing.T, c *counter, weights map[int]int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	start, seen := 0, map[int]bool{}
	for i, id := range c.order {
		if !seen[id] {
			seen[id], start = true, i
		}
	}
	window := c.order[start:]
	if len(window) < len(c.order)/2 {
		t.Fatalf("every ID handled only from message %d of %d on", start, len(c.order))
	}
	by := map[int]int{}
	for _, id := range window {
		by[id]++
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	for id, w := range weights {
		want := float64(len(window)) * float64(w) / float64(total)
		got := float64(by[id])
		if math.Abs(got-want) > 0.05*want {
			t.Errorf("id %d (weight %d): %v of %d handled, want %v ±5%%", id, w, got, len(window), want)
		}
	}
	t.Logf("handled by id %v of messages %d to %d (weights %v; all of the first %d: %v)", by, start, len(c.order), weights, c.limit, c.by)
}

// TestPriorityWeighted: under saturation (every level's stream holds more than it gets),
// the first 10,000 messages handled, from the first by which every level had been served,
// are shared by the levels' weights within 5%, the default weights (1, 2, 4) and given
// ones (5, 1, 1: the lowest level heavier), on a single server and on a 3-master cluster.
func TestPriorityWeighted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		client  func(testing.TB) rueidis.Client
		weights []int
	}{
		{"single/default", redistest.Client, nil},
		{"single/given", redistest.Client, []int{5, 1, 1}},
		{"cluster/default", redistest.ClusterClient, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client(t)
			topic := newTopic(t)
			cfg := fastConfig()
			cfg.Priorities = map[string]int{topic: 3}
			p := newProducer(t, client, cfg)
			const total = 10000
			weights := tc.weights
			if weights == nil {
				weights = []int{1, 2, 4}
			}
			share := map[int]int{}
			for level, w := range weights {
				share[level] = w
				// Each level holds more than its share of the 10,000 and some to spare.
				fill(t, p, topic, level, level, total*w/(weights[0]+weights[1]+weights[2])+2000)
			}
			c := newCounter(total)
			c.work = time.Millisecond // the handlers, not Redis, limit the rate
			cons := newConsumer(t, client, cfg)
			if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4,
				PriorityWeights: tc.weights, Handle: c.handle}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, cons)
			c.wait(t)
			checkShares(t, c, share)
		})
	}
}

// TestPriorityStrict: in strict mode the highest level is drained first: of the messages
// handled before the last one of level 2, at most the entries a level holds in hand are of
// a lower level (read before level 2's first read returned).
func TestPriorityStrict(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Priorities = map[string]int{topic: 3}
	p := newProducer(t, client, cfg)
	for level := range 3 {
		fill(t, p, topic, level, level, 300)
	}
	c := newCounter(900)
	c.work = time.Millisecond
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2, StrictPriority: true,
		Handle: c.handle}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	c.wait(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	last := map[int]int{}
	for i, id := range c.order {
		last[id] = i
	}
	early := func(level, before int) int {
		n := 0
		for _, id := range c.order[:before] {
			if id < level {
				n++
			}
		}
		return n
	}
	inHand := 2 + 10 // Concurrency + ReadCount
	if n := early(2, last[2]); n > 2*inHand {
		t.Errorf("%d messages of levels 0-1 handled before the last of level 2, want at most %d", n, 2*inHand)
	}
	if n := early(1, last[1]); n > 2*inHand {
		t.Errorf("%d messages of level 0 handled before the last of level 1, want at most %d", n, 2*inHand)
	}
	t.Logf("last of level 2 at %d, of level 1 at %d, of level 0 at %d", last[2], last[1], last[0])
}

// TestPoolAcrossTopics: two topics' handlers share a Pool of 2 goroutines by their weights
// (3 and 1) on real Redis. The pool serves only shares with entries in hand (it waits for
// no one), so a reader late by more than its handler holds would hand the other topic the
// slots: each handler reads 100 entries at a time, about 70 ms of its share's work, so that
// a stall of the machine is not taken for the weighting (TestPoolWeights checks the
// weighting itself, pick by pick).
func TestPoolAcrossTopics(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.ReadCount = 100
	p := newProducer(t, client, cfg)
	a, b := newTopic(t), newTopic(t)
	fill(t, p, a, 0, 1, 3000)
	fill(t, p, b, 0, 2, 3000)
	pool, err := stream.NewPool(2, false)
	if err != nil {
		t.Fatal(err)
	}
	c := newCounter(3000)
	c.work = time.Millisecond
	cons := newConsumer(t, client, cfg)
	for _, h := range []stream.Handler[order]{
		{Topic: a, Group: "g", Concurrency: 4, Pool: pool, Weight: 3, Handle: c.handle},
		{Topic: b, Group: "g", Concurrency: 4, Pool: pool, Weight: 1, Handle: c.handle},
	} {
		if err := stream.Register(cons, h); err != nil {
			t.Fatal(err)
		}
	}
	startConsumer(t, cons)
	c.wait(t)
	checkShares(t, c, map[int]int{1: 3, 2: 1})
	if _, err := stream.NewPool(0, false); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("NewPool(0): %v, want ErrInvalidConfig", err)
	}
}

// TestPriorityDelivery: a delayed message keeps its level, a message of any level that
// fails for good is in the topic's dead-letter stream, and Send refuses bad levels.
func TestPriorityDelivery(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Priorities = map[string]int{topic: 3}
	cfg.Delay.PollInterval = 20 * time.Millisecond
	p := newProducer(t, client, cfg)
	got := make(chan int, 8)
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			got <- m.Body.ID
			if m.Body.Status == "fail" {
				return errors.New("no")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	send(t, p, topic, order{ID: 2}, stream.WithPriority(2), stream.WithDelay(50*time.Millisecond))
	send(t, p, topic, order{ID: 1, Status: "fail"}, stream.WithPriority(1))
	seen := map[int]bool{}
	for range 2 {
		select {
		case id := <-got:
			seen[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("handled %v, want 1 and 2", seen)
		}
	}
	eventually(t, 10*time.Second, "the dead letter", func() bool { return xlen(t, client, "{"+topic+"}:dlq") == 1 })
	if n := xlen(t, client, "{"+topic+"}:prio:2"); n != 1 {
		t.Errorf("level 2's stream holds %d entries, want the delayed one", n)
	}
	for _, c := range []struct {
		topic string
		opts  []stream.SendOption
		want  string
	}{
		{topic, []stream.SendOption{stream.WithPriority(3)}, "levels 0 to 2"},
		{topic, []stream.SendOption{stream.WithPriority(-1)}, "levels 0 to 2"},
		{newTopic(t), []stream.SendOption{stream.WithPriority(1)}, "no priority levels"},
		{topic, []stream.SendOption{stream.WithUnique("u", stream.Unique{})}, "unique per level"},
	} {
		_, err := p.Send(ctx, c.topic, stream.NewMessage(order{}), c.opts...)
		if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Send to %s: %v, want ErrInvalidConfig saying %q", c.topic, err, c.want)
		}
	}
}

// TestPriorityConfigErrors: bad level counts, weights and combinations are refused.
func TestPriorityConfigErrors(t *testing.T) {
	client := redistest.Client(t)
	for _, cfg := range []stream.Config{
		{Priorities: map[string]int{"x": 17}},
		{Priorities: map[string]int{"x": -1}},
		{Priorities: map[string]int{"x": 2}, Partitions: map[string]int{"x": 2}},
	} {
		if err := cfg.Validate(); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("Validate(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
	cfg := fastConfig()
	cfg.Priorities = map[string]int{"levels": 3}
	c := newConsumer(t, client, cfg)
	pool, _ := stream.NewPool(1, false)
	nop := func(context.Context, *stream.Message[order]) error { return nil }
	for i, h := range []stream.Handler[order]{
		{Topic: "levels", Group: "g", PriorityWeights: []int{1, 2}, Handle: nop},
		{Topic: "levels", Group: "g", PriorityWeights: []int{1, 0, 1}, Handle: nop},
		{Topic: "levels", Group: "g", Pool: pool, Handle: nop},
		{Topic: "plain", Group: "g", StrictPriority: true, Handle: nop},
		{Topic: "plain", Group: "g", Pool: pool, Weight: 1001, Handle: nop},
	} {
		if err := stream.Register(c, h); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("handler %d: %v, want ErrInvalidConfig", i, err)
		} else {
			t.Logf("handler %d: %v", i, fmt.Sprint(err))
		}
	}
}
