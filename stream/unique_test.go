package stream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/stream"
)

// concurrentUnique sends body 100 times at once with WithUnique(id, u) (and opts) and returns
// the ids Send returned and how many calls failed with ErrDuplicate; any other error fails.
func concurrentUnique(t *testing.T, p *stream.Producer, topic, id string, u stream.Unique, opts ...stream.SendOption) (map[string]int, int) {
	t.Helper()
	var mu sync.Mutex
	ids, dups := map[string]int{}, 0
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := p.Send(context.Background(), topic, stream.Message[order]{Key: "k", Body: order{ID: i}},
				append([]stream.SendOption{stream.WithUnique(id, u)}, opts...)...)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, stream.ErrDuplicate):
				dups++
			case err != nil:
				t.Errorf("send %d: %v", i, err)
				return
			}
			ids[got]++
		}()
	}
	wg.Wait()
	return ids, dups
}

// duplicateSends reads redis_streaming_mq_duplicate_sends_total of topic.
func duplicateSends(cfg stream.Config, topic string) uint64 {
	return cfg.Metrics.GetOrCreateCounter(metrics.Name("redis_streaming_mq_duplicate_sends_total", "topic", topic)).Get()
}

// TestUniqueConcurrentSends: 100 concurrent sends of one id give one message in each mode,
// on a single server and on a 3-master cluster (a partitioned topic there).
func TestUniqueConcurrentSends(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(testing.TB) rueidis.Client
		parts  int
	}{{"single", redistest.Client, 0}, {"cluster", redistest.ClusterClient, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client(t)
			cfg := fastConfig()
			if tc.parts > 0 {
				cfg.Partitions = map[string]int{}
			}
			p := newProducer(t, client, cfg)
			ctx := context.Background()
			for _, mode := range []struct {
				name string
				u    stream.Unique
			}{{"until-acked", stream.Unique{}}, {"throttle", stream.Unique{Throttle: true, TTL: time.Minute}}} {
				topic := newTopic(t)
				if cfg.Partitions != nil {
					cfg.Partitions[topic] = tc.parts
				}
				ids, dups := concurrentUnique(t, p, topic, "order-1", mode.u)
				if len(ids) != 1 || dups != 99 {
					t.Errorf("%s: %d distinct ids %v, %d duplicates; want 1 and 99", mode.name, len(ids), ids, dups)
				}
				if n := topicLen(t, client, cfg, topic); n != 1 {
					t.Errorf("%s: %d entries in the topic, want 1", mode.name, n)
				}
				if d := duplicateSends(cfg, topic); d != 99 {
					t.Errorf("%s: duplicate-sends metric %d, want 99", mode.name, d)
				}
			}
			// Debounce: every send lands on the one scheduled message.
			topic := newTopic(t)
			if cfg.Partitions != nil {
				cfg.Partitions[topic] = tc.parts
			}
			ids, dups := concurrentUnique(t, p, topic, "order-1", stream.Unique{Debounce: true}, stream.WithDelay(time.Hour))
			if len(ids) != 1 || dups != 0 {
				t.Errorf("debounce: %d distinct schedule ids %v, %d duplicate errors; want 1 and 0", len(ids), ids, dups)
			}
			if n, err := p.Scheduled(ctx, topic); err != nil || n != 1 {
				t.Errorf("debounce: %d scheduled, %v; want 1", n, err)
			}
		})
	}
}

// topicLen returns the number of entries over the topic's streams.
func topicLen(t testing.TB, client rueidis.Client, cfg stream.Config, topic string) int64 {
	t.Helper()
	streams, err := stream.PartitionStreams(cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range streams {
		n += xlen(t, client, s)
	}
	return n
}

// TestUniqueUntilAcked: the id stays taken while any group has not acknowledged the first
// message, and is free once every group has.
func TestUniqueUntilAcked(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()
	first, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, stream.WithUnique("job-7", stream.Unique{}))
	if err != nil {
		t.Fatal(err)
	}
	// No group yet: nothing acknowledged it.
	got, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 2}}, stream.WithUnique("job-7", stream.Unique{}))
	if !errors.Is(err, stream.ErrDuplicate) || got != first {
		t.Fatalf("second send before any group: %q, %v; want %q and ErrDuplicate", got, err, first)
	}
	handled := make(chan int, 10)
	release := make(chan struct{})
	c := newConsumer(t, client, cfg)
	for _, g := range []string{"fast", "slow"} {
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: g,
			Handle: func(ctx context.Context, m *stream.Message[order]) error {
				if g == "slow" {
					<-release
				}
				handled <- m.Body.ID
				return nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	startConsumer(t, c)
	<-handled // the fast group has it
	time.Sleep(100 * time.Millisecond)
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 3}}, stream.WithUnique("job-7", stream.Unique{})); !errors.Is(err, stream.ErrDuplicate) {
		t.Fatalf("send while the slow group holds the first: %v, want ErrDuplicate", err)
	}
	close(release)
	<-handled
	var again string
	eventually(t, 5*time.Second, "the id free once both groups acknowledged", func() bool {
		again, err = p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 4}}, stream.WithUnique("job-7", stream.Unique{}))
		if err != nil && !errors.Is(err, stream.ErrDuplicate) {
			t.Fatal(err)
		}
		return err == nil
	})
	if again == first {
		t.Errorf("the send after the acknowledgements returned the first id %s", first)
	}
}

// TestUniqueThrottle: within the TTL a send is a duplicate even after its acknowledgement;
// after it, a new one is sent.
func TestUniqueThrottle(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()
	u := stream.Unique{Throttle: true, TTL: 300 * time.Millisecond}
	first, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, stream.WithUnique("sync-user-1", u))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	got, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 2}}, stream.WithUnique("sync-user-1", u))
	if time.Since(begin) < 250*time.Millisecond && (!errors.Is(err, stream.ErrDuplicate) || got != first) {
		t.Fatalf("send within the TTL: %q, %v; want %q and ErrDuplicate", got, err, first)
	}
	time.Sleep(350 * time.Millisecond)
	again, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 3}}, stream.WithUnique("sync-user-1", u))
	if err != nil || again == first {
		t.Fatalf("send after the TTL: %q, %v; want a new entry", again, err)
	}
	if n := xlen(t, client, topic); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
}

// TestUniqueDebounce: a later send replaces the scheduled message's body and moves its due
// time; once moved into the stream the id is taken until acknowledged.
func TestUniqueDebounce(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()
	u := stream.Unique{Debounce: true}
	first, err := p.Send(ctx, topic, stream.Message[order]{Key: "a", Body: order{ID: 1, Status: "first"}},
		stream.WithUnique("reindex", u), stream.WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	second, err := p.Send(ctx, topic, stream.Message[order]{Key: "a", Body: order{ID: 2, Status: "latest"}},
		stream.WithUnique("reindex", u), stream.WithDelay(300*time.Millisecond))
	if err != nil || second != first {
		t.Fatalf("debounced send: %q, %v; want the first schedule id %q", second, err, first)
	}
	got := make(chan *stream.Message[order], 10)
	block := make(chan struct{})
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			got <- m
			<-block
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	var m *stream.Message[order]
	select {
	case m = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the debounced message was not delivered within 10 s (its first due time was an hour)")
	}
	if m.Body.ID != 2 || m.Body.Status != "latest" {
		t.Errorf("delivered %+v, want the later send's body", m.Body)
	}
	if took := time.Since(sent); took < 250*time.Millisecond {
		t.Errorf("delivered %v after the debounced send, before its 300 ms delay", took)
	}
	// In the stream, being handled: the id is taken.
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 3}}, stream.WithUnique("reindex", u), stream.WithDelay(time.Millisecond)); !errors.Is(err, stream.ErrDuplicate) {
		t.Errorf("send while the moved message is unacknowledged: %v, want ErrDuplicate", err)
	}
	close(block)
	eventually(t, 5*time.Second, "the id free once acknowledged", func() bool {
		_, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 4}}, stream.WithUnique("reindex", u), stream.WithDelay(time.Millisecond))
		return err == nil
	})
	select {
	case m := <-got:
		if m.Body.ID != 4 {
			t.Errorf("then delivered %+v, want message 4", m.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the send after the acknowledgement was not delivered")
	}
	select {
	case m := <-got:
		t.Errorf("an extra delivery: %+v", m.Body)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestUniqueCancelFreesID: cancelling the scheduled message holding an id frees it.
func TestUniqueCancelFreesID(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()
	id, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, stream.WithUnique("x", stream.Unique{}), stream.WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, stream.WithUnique("x", stream.Unique{}), stream.WithDelay(time.Hour)); !errors.Is(err, stream.ErrDuplicate) {
		t.Fatalf("second scheduled send: %v, want ErrDuplicate", err)
	}
	if ok, err := p.CancelScheduled(ctx, topic, id); !ok || err != nil {
		t.Fatalf("CancelScheduled: %v, %v", ok, err)
	}
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, stream.WithUnique("x", stream.Unique{}), stream.WithDelay(time.Hour)); err != nil {
		t.Fatalf("send after the cancel: %v", err)
	}
}

// TestUniquePayloadID: an empty id stands for the topic and body: the same body is sent
// once, another body is sent.
func TestUniquePayloadID(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()
	u := stream.WithUnique("", stream.Unique{})
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, u); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 1}}, u); !errors.Is(err, stream.ErrDuplicate) {
		t.Errorf("the same body again: %v, want ErrDuplicate", err)
	}
	if _, err := p.Send(ctx, topic, stream.Message[order]{Body: order{ID: 2}}, u); err != nil {
		t.Errorf("another body: %v", err)
	}
	if _, err := p.Send(ctx, newTopic(t), stream.Message[order]{Body: order{ID: 1}}, u); err != nil {
		t.Errorf("the same body to another topic: %v", err)
	}
}

// TestUniqueBadInput: every misuse is an error wrapping ErrInvalidConfig naming it, and
// nothing is written.
func TestUniqueBadInput(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()
	msg := stream.Message[order]{Body: order{ID: 1}}
	for _, tc := range []struct {
		name string
		opts []stream.SendOption
	}{
		{"a space in the id", []stream.SendOption{stream.WithUnique("a b", stream.Unique{})}},
		{"a 129-byte id", []stream.SendOption{stream.WithUnique(string(make([]byte, 129)), stream.Unique{})}},
		{"a negative TTL", []stream.SendOption{stream.WithUnique("a", stream.Unique{TTL: -time.Second})}},
		{"a TTL below 1 ms", []stream.SendOption{stream.WithUnique("a", stream.Unique{TTL: time.Microsecond})}},
		{"a TTL over a year", []stream.SendOption{stream.WithUnique("a", stream.Unique{TTL: 400 * 24 * time.Hour})}},
		{"throttle and debounce", []stream.SendOption{stream.WithUnique("a", stream.Unique{Throttle: true, Debounce: true}), stream.WithDelay(time.Second)}},
		{"debounce without a delay", []stream.SendOption{stream.WithUnique("a", stream.Unique{Debounce: true})}},
		{"with an idempotency key", []stream.SendOption{stream.WithUnique("a", stream.Unique{}), stream.WithIdempotencyKey("b")}},
	} {
		if _, err := p.Send(ctx, topic, msg, tc.opts...); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if _, err := p.SendBatch(ctx, topic, []stream.Sendable{msg}, stream.WithUnique("a", stream.Unique{})); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("SendBatch: %v, want ErrInvalidConfig", err)
	}
	if n := xlen(t, client, topic); n != 0 {
		t.Errorf("%d entries written by bad sends", n)
	}
}
