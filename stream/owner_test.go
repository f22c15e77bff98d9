package stream_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// TestOwnPartitionsKilledConsumer runs 3 consumers of one group owning the 4 partitions of a
// topic by lease (OwnPartitions, OrderedByKey) on the real 3-master cluster while a
// producer sends, kills one of them that owns partitions (its Redis client is closed under
// it: no Close, no lease release, no acknowledgement; its handler does nothing more from
// then on, as a killed process), and checks that every message is
// handled and the per-key order holds across the consumers: when a message is handled for
// the first time, every earlier message of its key has been handled.
func TestOwnPartitionsKilledConsumer(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	ctx := context.Background()
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Partitions = map[string]int{topic: 4}
	cfg.PartitionLease = 600 * time.Millisecond
	cfg.Autoclaim.MinIdle = 30 * time.Second // no crash recovery by idle time: only the handover
	cfg.ShutdownTimeout = 2 * time.Second

	const keys, perKey = 40, 60
	var (
		mu       sync.Mutex
		maxSeen  = map[string]int{}
		handled  = map[string]int{} // key/seq -> times
		badOrder []string
		busy     = map[string]string{} // key -> consumer handling it now
		overlap  atomic.Int64
		dead     atomic.Value // name of the killed consumer
	)
	dead.Store("")
	handle := func(name string) func(ctx context.Context, m *stream.Message[order]) error {
		return func(ctx context.Context, m *stream.Message[order]) error {
			if dead.Load() == name { // a killed process handles nothing more
				<-ctx.Done()
				return ctx.Err()
			}
			mu.Lock()
			if o, ok := busy[m.Key]; ok && o != name {
				overlap.Add(1)
			}
			busy[m.Key] = name
			id := m.Key + "/" + strconv.Itoa(m.Body.ID)
			if handled[id] == 0 && m.Body.ID > maxSeen[m.Key]+1 {
				badOrder = append(badOrder, fmt.Sprintf("%s first handled by %s after %d", id, name, maxSeen[m.Key]))
			}
			handled[id]++
			maxSeen[m.Key] = max(maxSeen[m.Key], m.Body.ID)
			mu.Unlock()
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
			}
			mu.Lock()
			delete(busy, m.Key)
			mu.Unlock()
			return ctx.Err()
		}
	}
	consumers := make([]*stream.Consumer, 3)
	clients := make([]interface{ Close() }, 3)
	for i := range consumers {
		cl := redistest.NewClient(t, addrs...)
		clients[i] = cl
		c, err := stream.NewConsumer(cl, cfg)
		if err != nil {
			t.Fatal(err)
		}
		name := "c" + strconv.Itoa(i)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", OrderedByKey: true, Concurrency: 4,
			OwnPartitions: true, Handle: handle(name)}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		consumers[i] = c
	}
	defer func() {
		for _, c := range consumers {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = c.Close(cctx)
			cancel()
		}
	}()
	owned := func(c *stream.Consumer) int { return len(c.Stats().Handlers) }
	eventually(t, 10*time.Second, "the partitions shared out", func() bool {
		total := 0
		for _, c := range consumers {
			if owned(c) > 2 {
				return false
			}
			total += owned(c)
		}
		return total == 4
	})
	t.Logf("partitions owned: %d %d %d", owned(consumers[0]), owned(consumers[1]), owned(consumers[2]))

	p := newProducer(t, redistest.ClusterClient(t), cfg)
	sendRound := func(seq int) {
		batch := make([]stream.Sendable, 0, keys)
		for k := range keys {
			batch = append(batch, &stream.Message[order]{Key: "k" + strconv.Itoa(k), Body: order{seq, "ok"}})
		}
		if _, err := p.SendBatch(ctx, topic, batch); err != nil {
			t.Fatal(err)
		}
	}
	victim := -1
	for seq := 1; seq <= perKey; seq++ {
		sendRound(seq)
		if seq == perKey/3 {
			for i, c := range consumers {
				if owned(c) > 0 {
					victim = i
					break
				}
			}
			t.Logf("killing c%d, owner of %d partitions", victim, owned(consumers[victim]))
			dead.Store("c" + strconv.Itoa(victim))
			clients[victim].Close() // abrupt: no Close of the consumer
		}
		time.Sleep(5 * time.Millisecond)
	}
	total := keys * perKey
	// Within min-idle (30 s): only the handover of the victim's pending entries can do it.
	eventually(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == total
	})
	mu.Lock()
	dups := 0
	for _, n := range handled {
		dups += n - 1
	}
	t.Logf("%d messages handled, %d handled twice (redelivered after the kill), %d key overlaps", len(handled), dups, overlap.Load())
	if len(badOrder) > 0 {
		t.Errorf("%d per-key order violations, e.g. %v", len(badOrder), badOrder[:min(5, len(badOrder))])
	}
	mu.Unlock()
	if overlap.Load() > 0 {
		t.Errorf("%d times a key was handled by two consumers at once", overlap.Load())
	}
	survivors := 0
	for i, c := range consumers {
		if i != victim {
			survivors += owned(c)
		}
	}
	if survivors != 4 {
		t.Errorf("survivors own %d partitions, want 4", survivors)
	}
}

// TestOwnPartitionsRebalance checks the hand-overs as consumers join and leave on a real
// redis-server: one consumer owns all 4 partitions, a second one joining gets 2, and after
// the first closes the second owns all 4; every message is handled, in per-key order.
func TestOwnPartitionsRebalance(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Partitions = map[string]int{topic: 4}
	cfg.PartitionLease = 300 * time.Millisecond
	var (
		mu      sync.Mutex
		maxSeen = map[string]int{}
		seen    = map[string]bool{}
		bad     int
	)
	newOwner := func() *stream.Consumer {
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", OrderedByKey: true, Concurrency: 2, OwnPartitions: true,
			Handle: func(ctx context.Context, m *stream.Message[order]) error {
				mu.Lock()
				defer mu.Unlock()
				id := m.Key + "/" + strconv.Itoa(m.Body.ID)
				if !seen[id] && m.Body.ID > maxSeen[m.Key]+1 {
					bad++
				}
				seen[id] = true
				maxSeen[m.Key] = max(maxSeen[m.Key], m.Body.ID)
				return nil
			}}); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
		return c
	}
	owned := func(c *stream.Consumer) int { return len(c.Stats().Handlers) }
	p := newProducer(t, client, cfg)
	seq := 0
	sendSome := func() {
		for range 20 {
			seq++
			batch := make([]stream.Sendable, 0, 10)
			for k := range 10 {
				batch = append(batch, &stream.Message[order]{Key: "k" + strconv.Itoa(k), Body: order{seq, "ok"}})
			}
			if _, err := p.SendBatch(ctx, topic, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := newOwner()
	eventually(t, 5*time.Second, "the first consumer owning all 4", func() bool { return owned(a) == 4 })
	sendSome()
	b := newOwner()
	sendSome()
	eventually(t, 10*time.Second, "2 partitions each", func() bool { return owned(a) == 2 && owned(b) == 2 })
	sendSome()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sendSome()
	eventually(t, 10*time.Second, "the second consumer owning all 4", func() bool { return owned(b) == 4 })
	eventually(t, 10*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == seq*10
	})
	mu.Lock()
	defer mu.Unlock()
	if bad != 0 {
		t.Errorf("%d per-key order violations", bad)
	}
	if members := zcard(t, client, streamwire.PartitionMembersKey(topic, "g")); members != 1 {
		t.Errorf("%d members after the first one closed, want 1", members)
	}
	mu.Unlock()
	// Unregister drains the partitions, releases the leases and leaves the members.
	if err := b.Unregister(ctx, topic, "g"); err != nil {
		t.Fatal(err)
	}
	if n := owned(b); n != 0 {
		t.Errorf("%d partitions read after Unregister", n)
	}
	streams, _ := stream.PartitionStreams(cfg, topic)
	for _, s := range streams {
		if n, _ := client.Do(ctx, client.B().Exists().Key(streamwire.PartitionLeaseKey(s, "g")).Build()).AsInt64(); n != 0 {
			t.Errorf("lease of %s left after Unregister", s)
		}
	}
	if members := zcard(t, client, streamwire.PartitionMembersKey(topic, "g")); members != 0 {
		t.Errorf("%d members after Unregister, want 0", members)
	}
	mu.Lock()
}

// zcard returns the size of the sorted set key.
func zcard(t *testing.T, client rueidis.Client, key string) int64 {
	t.Helper()
	n, err := client.Do(context.Background(), client.B().Zcard().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOwnPartitionsHungServer: with Redis hung (SIGSTOP) an owner gives its partitions up
// before their leases could expire (its rounds end at a third of the lease), counts the
// failures, logs them once and does not spin; after SIGCONT it takes the partitions back and
// handles what was sent meanwhile.
func TestOwnPartitionsHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	set := vm.NewSet()
	logs := &logCapture{}
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Metrics, cfg.Logger = set, logs.logger()
	cfg.Partitions = map[string]int{topic: 4}
	cfg.PartitionLease = 600 * time.Millisecond
	var handled atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", OwnPartitions: true,
		Handle: func(context.Context, *stream.Message[order]) error { handled.Add(1); return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	owned := func() int { return len(c.Stats().Handlers) }
	eventually(t, 5*time.Second, "all 4 partitions owned", func() bool { return owned() == 4 })
	pid := serverPID(t, client)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	stopped := time.Now()
	eventually(t, 5*time.Second, "the partitions given up", func() bool { return owned() == 0 })
	gaveUp := time.Since(stopped)
	if gaveUp > 2*time.Second { // the lease is 600 ms: fenced at 300 ms after the last renewal, plus a round
		t.Errorf("partitions given up %v after the server hung, want well within a few leases", gaveUp)
	}
	if err := c.Healthy(context.Background()); err == nil {
		t.Error("Healthy = nil with the server hung")
	}
	time.Sleep(3 * time.Second)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	errs := promValue(t, set, `redis_streaming_mq_background_errors_total{topic="`+topic+`",group="g",op="lease"}`)
	warns := logs.count("stream: partition heartbeats fail")
	t.Logf("given up after %v; lease failures counted in the ~3.5 s outage: %v; heartbeat warnings: %d", gaveUp, errs, warns)
	if errs < 1 || errs > 100 {
		t.Errorf("%v lease failures counted, want some, and no spinning (a round every 120 ms)", errs)
	}
	if warns != 1 {
		t.Errorf("%d heartbeat warnings logged, want 1 (once per change of state)", warns)
	}
	eventually(t, 10*time.Second, "the partitions taken back", func() bool { return owned() == 4 })
	p := newProducer(t, client, cfg)
	for i := range 8 {
		if _, err := p.Send(context.Background(), topic, &stream.Message[order]{Key: "k" + strconv.Itoa(i), Body: order{i, "ok"}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the messages handled after the outage", func() bool { return handled.Load() == 8 })
}

// TestOwnPartitionsRegisterRunning registers an OwnPartitions handler on a running consumer
// and refuses a second handler of the same topic and group, owned or not.
func TestOwnPartitionsRegisterRunning(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Partitions = map[string]int{topic: 4}
	cfg.PartitionLease = 300 * time.Millisecond
	c := newConsumer(t, client, cfg)
	startConsumer(t, c)
	h := stream.Handler[order]{Topic: topic, Group: "g", OwnPartitions: true,
		Handle: func(context.Context, *stream.Message[order]) error { return nil }}
	if err := stream.Register(c, h); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "all 4 partitions owned", func() bool { return len(c.Stats().Handlers) == 4 })
	if err := stream.Register(c, h); err == nil {
		t.Error("a second OwnPartitions handler of the same topic and group was accepted")
	}
	h.OwnPartitions = false
	if err := stream.Register(c, h); err == nil {
		t.Error("a reading-all handler of the same topic and group was accepted")
	}
}
