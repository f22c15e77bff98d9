package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

// decisionLog wraps a Limiter and records every decision with the wall-clock span of its
// call, so that a test can replay what the limiter admitted.
type decisionLog struct {
	l  redstream.Limiter
	mu sync.Mutex
	ds []loggedDecision
}

type loggedDecision struct {
	key           string
	allowed       bool
	before, after time.Time
}

func (d *decisionLog) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	before := time.Now()
	dec, err := d.l.AllowN(ctx, key, now, n)
	if err == nil {
		d.mu.Lock()
		d.ds = append(d.ds, loggedDecision{key: key, allowed: dec.Allowed, before: before, after: time.Now()})
		d.mu.Unlock()
	}
	return dec, err
}

// admitted returns the allowed decisions per key, and per key and fixed window of w the
// most allowed decisions whose call lay within one window.
func (d *decisionLog) admitted(w time.Duration) (total map[string]int, perWindow map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	total, perWindow = map[string]int{}, map[string]int{}
	counts := map[string]int{}
	for _, x := range d.ds {
		if !x.allowed {
			continue
		}
		total[x.key]++
		a, b := x.before.UnixNano()/int64(w), x.after.UnixNano()/int64(w)
		if a != b {
			continue // the call straddled a window's end: its window is unknown
		}
		k := fmt.Sprint(x.key, "/", a)
		counts[k]++
		key := x.key
		perWindow[key] = max(perWindow[key], counts[k])
	}
	return total, perWindow
}

// limitRecorder records the handled messages of a limited handler.
type limitRecorder struct {
	mu       sync.Mutex
	handled  map[int]int    // by message ID: Handle calls that returned nil
	first    map[int]int64  // by message ID: the DeliveryCount Handle saw first
	by       map[string]int // by customer (Body.Status)
	at       map[string][]time.Time
	inflight map[string]int // by customer, now
	maxIn    map[string]int // by customer, the most at once
	total    atomic.Int64
	work     time.Duration
}

func newLimitRecorder() *limitRecorder {
	return &limitRecorder{handled: map[int]int{}, first: map[int]int64{}, by: map[string]int{}, at: map[string][]time.Time{},
		inflight: map[string]int{}, maxIn: map[string]int{}}
}

func (r *limitRecorder) handle(ctx context.Context, m *stream.Message[order]) error {
	r.mu.Lock()
	cust := m.Body.Status
	r.inflight[cust]++
	r.maxIn[cust] = max(r.maxIn[cust], r.inflight[cust])
	if _, ok := r.first[m.Body.ID]; !ok {
		r.first[m.Body.ID] = m.DeliveryCount
	}
	r.mu.Unlock()
	if r.work > 0 {
		time.Sleep(r.work)
	}
	r.mu.Lock()
	r.inflight[cust]--
	r.handled[m.Body.ID]++
	r.by[cust]++
	r.at[cust] = append(r.at[cust], time.Now())
	r.mu.Unlock()
	r.total.Add(1)
	return nil
}

// byCustomer is the limit key of the tests' messages: their customer (Body.Status).
func byCustomer(m *stream.Message[order]) string { return m.Body.Status }

// startLimited starts 3 consumers of topic's group g, each with concurrency slots, handled
// by rec under limit (MaxDeliveries 2), each with a metrics set of its own.
func startLimited(t *testing.T, client rueidis.Client, cfg stream.Config, topic string, concurrency int, rec *limitRecorder, limit *stream.Limit[order]) ([]*stream.Consumer, []*vm.Set) {
	t.Helper()
	consumers, sets := make([]*stream.Consumer, 3), make([]*vm.Set, 3)
	for i := range 3 {
		c := cfg
		sets[i] = vm.NewSet()
		c.Metrics = sets[i]
		consumers[i] = newConsumer(t, client, c)
		if err := stream.Register(consumers[i], stream.Handler[order]{Topic: topic, Group: "g", Concurrency: concurrency, MaxDeliveries: 2,
			Handle: rec.handle, Limit: limit}); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, consumers[i])
	}
	return consumers, sets
}

// sendCustomers sends n messages of each customer, IDs from base, customer by customer.
func sendCustomers(t *testing.T, p *stream.Producer, topic string, base int, counts map[string]int, order_ []string) {
	t.Helper()
	id := base
	for _, cust := range order_ {
		for range counts[cust] {
			send(t, p, topic, order{ID: id, Status: cust})
			id++
		}
	}
}

// TestLimitRate: three consumers of one group consume a topic under a fixed-window limit of
// 5 per 400 ms per customer (Limit.Key: the customer), on a single server and a partitioned
// topic on a 3-master cluster. Customer a sends 30 messages first, then b 5 and c 5: b's
// and c's flow while a is limited (all handled before a's last); every message is handled
// once, on its first counted delivery, though MaxDeliveries is 2 and a's messages wait
// several windows; no dead letters; the limiter admitted exactly the messages handled, and
// never more than 5 of a customer in one window.
func TestLimitRate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		client     func(testing.TB) rueidis.Client
		partitions int
	}{
		{"single", redistest.Client, 0},
		{"cluster/partitioned", redistest.ClusterClient, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client(t)
			topic := newTopic(t)
			cfg := fastConfig()
			if tc.partitions > 0 {
				cfg.Partitions = map[string]int{topic: tc.partitions}
			}
			const window, perWindow = 400 * time.Millisecond, 5
			rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(window, perWindow), redisbackend.Options{KeyPrefix: "lim-" + topic})
			if err != nil {
				t.Fatal(err)
			}
			dlog := &decisionLog{l: rl}
			rec := newLimitRecorder()
			consumers, sets := startLimited(t, client, cfg, topic, 3, rec, &stream.Limit[order]{Rate: dlog, Key: byCustomer})
			p := newProducer(t, client, cfg)
			counts := map[string]int{"a": 30, "b": 5, "c": 5}
			sendCustomers(t, p, topic, 0, counts, []string{"a", "b", "c"})
			mostLimited := 0 // the most entries parked at once, as Consumer.Stats shows them
			eventually(t, 30*time.Second, "every message handled", func() bool {
				n := 0
				for _, c := range consumers {
					for _, h := range c.Stats().Handlers {
						n += h.Limited
					}
				}
				mostLimited = max(mostLimited, n)
				return rec.total.Load() >= 40
			})
			if mostLimited == 0 {
				t.Error("HandlerStats.Limited never showed a parked entry")
			}
			// An entry another consumer took over while it waited leaves its first owner's
			// count when its wait ends (the redelivery finds it gone).
			eventually(t, 10*time.Second, "no entry limited or retried once all are handled", func() bool {
				for _, c := range consumers {
					for _, h := range c.Stats().Handlers {
						if h.Limited != 0 || h.RetriesScheduled != 0 {
							return false
						}
					}
				}
				return true
			})
			time.Sleep(2 * window) // anything handled twice would show by now
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for id := range 40 {
				if rec.handled[id] != 1 {
					t.Errorf("message %d handled %d times, want 1", id, rec.handled[id])
				}
				if rec.first[id] != 1 {
					t.Errorf("message %d first handled on delivery %d, want 1 (waits are not deliveries)", id, rec.first[id])
				}
			}
			lastA := rec.at["a"][len(rec.at["a"])-1]
			for _, cust := range []string{"b", "c"} {
				if last := rec.at[cust][len(rec.at[cust])-1]; !last.Before(lastA) {
					t.Errorf("customer %s's last message handled %v after a's last: it waited behind a's limit", cust, last.Sub(lastA))
				}
			}
			total, most := dlog.admitted(window)
			for cust, n := range counts {
				if total[cust] != n {
					t.Errorf("customer %s: the limiter admitted %d, %d were handled", cust, total[cust], n)
				}
				if most[cust] > perWindow {
					t.Errorf("customer %s: %d admitted in one window, the limit is %d", cust, most[cust], perWindow)
				}
			}
			streams := []string{topic}
			if tc.partitions > 0 {
				streams, _ = stream.PartitionStreams(cfg, topic)
			}
			for _, s := range streams {
				if n := xlen(t, client, streamwire.DeadLetterStreamName(s)); n != 0 {
					t.Errorf("%d dead letters in %s, want 0", n, s)
				}
			}
			var limited float64
			for _, set := range sets {
				limited += counterSum(set, "redis_streaming_mq_limited_total")
			}
			if limited < float64(counts["a"]-2*perWindow) {
				t.Errorf("redis_streaming_mq_limited_total = %v, want at least %d (a's messages beyond two windows)", limited, counts["a"]-2*perWindow)
			}
			t.Logf("admitted %v (at most %v in one window); %v deliveries parked, at most %d at once", total, most, limited, mostLimited)
		})
	}
}

// counterSum sums the values of the counters of set whose name starts with name.
func counterSum(set *vm.Set, name string) float64 {
	var sb strings.Builder
	set.WritePrometheus(&sb)
	var sum float64
	for _, line := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// TestLimitConcurrency: three consumers with 8 handler slots each, and a concurrency limit
// of 2 per customer across all of them (a Redis lease per message, renewed while a handler
// slower than the lease TTL runs): no customer ever has more than 2 messages in Handle at
// once, every message is handled once on its first counted delivery, and the leases are all
// released at the end.
func TestLimitConcurrency(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	const limit = 2
	cl, err := redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(limit, 600*time.Millisecond)}, redisbackend.Options{KeyPrefix: "conc-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	rec := newLimitRecorder()
	rec.work = 800 * time.Millisecond // longer than the lease TTL: the renewal (every 200 ms) keeps it
	startLimited(t, client, cfg, topic, 8, rec, &stream.Limit[order]{Concurrency: cl, Key: byCustomer})
	p := newProducer(t, client, cfg)
	counts := map[string]int{"a": 12, "b": 12, "c": 4}
	sendCustomers(t, p, topic, 0, counts, []string{"a", "b", "c"})
	eventually(t, 60*time.Second, "every message handled", func() bool { return rec.total.Load() >= 28 })
	rec.mu.Lock()
	for cust := range counts {
		if rec.maxIn[cust] > limit {
			t.Errorf("customer %s: %d messages in Handle at once, the limit is %d", cust, rec.maxIn[cust], limit)
		}
	}
	for id := range 28 {
		if rec.handled[id] != 1 || rec.first[id] != 1 {
			t.Errorf("message %d handled %d times, first on delivery %d; want once, on delivery 1", id, rec.handled[id], rec.first[id])
		}
	}
	t.Logf("most in Handle at once per customer: %v", rec.maxIn)
	rec.mu.Unlock()
	// Every lease was released: the limit admits its full count again at once.
	for cust := range counts {
		var leases []redstream.Lease
		for range limit {
			l, err := cl.Acquire(context.Background(), cust, time.Time{}, 1)
			if err != nil || !l.Allowed {
				t.Fatalf("customer %s after the run: Acquire %+v, %v; want every slot free", cust, l, err)
			}
			leases = append(leases, l)
		}
		for _, l := range leases {
			_, _ = cl.Release(context.Background(), l, time.Time{})
		}
	}
}

// TestLimitBadInput: a Limit with no limiter is refused at Register; a message whose limit
// key is empty, or that the limiter refuses as bad input, is dead-lettered at once with the
// reason, and other messages flow.
func TestLimitBadInput(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Handle: func(context.Context, *stream.Message[order]) error { return nil },
		Limit: &stream.Limit[order]{}}); !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "Limit") {
		t.Errorf("Register with an empty Limit: %v, want ErrInvalidConfig naming Limit", err)
	}
	rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Second, 100), redisbackend.Options{KeyPrefix: "bad-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	rec := newLimitRecorder()
	var failures atomic.Int64
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Handle: rec.handle,
		OnFailure: func(context.Context, *stream.Message[order], []byte, error) { failures.Add(1) },
		Limit:     &stream.Limit[order]{Rate: rl, Key: byCustomer}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	p := newProducer(t, client, cfg)
	send(t, p, topic, order{ID: 1, Status: ""})
	send(t, p, topic, order{ID: 2, Status: "x"})
	eventually(t, 10*time.Second, "the keyless message dead-lettered and the other handled", func() bool {
		return failures.Load() == 1 && rec.total.Load() == 1
	})
	dead, err := client.Do(context.Background(), client.B().Xrange().Key(streamwire.DeadLetterStreamName(topic)).Start("-").End("+").Build()).AsXRangeSlices()
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters: %v, %v; want 1", dead, err)
	}
	if fields := fmt.Sprint(dead[0].FieldValues); !strings.Contains(fields, "empty limit key") {
		t.Errorf("dead letter %v: want its reason to name the empty limit key", dead[0].FieldValues)
	}
}

// admissionLog wraps a Limiter in a child process of TestLimitProcesses: every allowed
// decision is pushed to lim:<topic>:adm:<key> as the end of its fixed window (the call's
// start plus the decision's ResetAfter, in Unix ms; the server's clock is this machine's),
// or as "?" when the call took a quarter window or more (its window is then uncertain).
type admissionLog struct {
	l      redstream.Limiter
	client rueidis.Client
	topic  string
}

func (a *admissionLog) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	before := time.Now()
	d, err := a.l.AllowN(ctx, key, now, n)
	after := time.Now()
	if err != nil || !d.Allowed {
		return d, err
	}
	end := "?" // the call took too long for its window to be known
	if after.Sub(before) < limitWindow/4 {
		end = strconv.FormatInt(before.Add(d.ResetAfter).UnixMilli(), 10)
	}
	return d, a.client.Do(ctx, a.client.B().Rpush().Key("lim:"+a.topic+":adm:"+key).Element(end).Build()).Error()
}

// TestLimitChild is one consumer process of TestLimitProcesses.
func TestLimitChild(t *testing.T) {
	topic := os.Getenv("REDSTREAM_LIMIT_TOPIC")
	if topic == "" {
		t.Skip("run by TestLimitProcesses")
	}
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(limitWindow, limitPerWindow), redisbackend.Options{KeyPrefix: "lim-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 3, MaxDeliveries: 2,
		Limit: &stream.Limit[order]{Rate: &admissionLog{l: rl, client: client, topic: topic}, Key: byCustomer},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			id := strconv.Itoa(m.Body.ID)
			cmds := rueidis.Commands{
				client.B().Hincrby().Key("lim:" + topic + ":handled").Field(id).Increment(1).Build(),
				client.B().Hsetnx().Key("lim:" + topic + ":delivery").Field(id).Value(strconv.FormatInt(m.DeliveryCount, 10)).Build(),
				client.B().Rpush().Key("lim:" + topic + ":order").Element(m.Body.Status).Build(),
			}
			for _, r := range client.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					return err
				}
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	serveChild(t, c)
}

// The limit of TestLimitProcesses: 5 messages per customer per 400 ms window.
const limitWindow, limitPerWindow = 400 * time.Millisecond, 5

// TestLimitProcesses: three consumer processes share a group on a topic limited to 5
// messages per 400 ms per customer. Customer a sends 30 messages, then b and c 5 each. The
// limiter admitted exactly one decision per message handled, never more than 5 of a
// customer in one window (its answer, replayed from each admission's window); every message
// is handled once, on delivery 1; no dead letters; b's and c's messages are all handled
// before a's last.
func TestLimitProcesses(t *testing.T) {
	addr := redistest.Addr(t)
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		cmd := startChild(t, "TestLimitChild", nil, "REDSTREAM_LIMIT_TOPIC="+topic, "REDSTREAM_REDIS_ADDR="+addr)
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	p := newProducer(t, client, fastConfig())
	counts := map[string]int{"a": 30, "b": 5, "c": 5}
	sendCustomers(t, p, topic, 0, counts, []string{"a", "b", "c"})
	eventually(t, 60*time.Second, "every message handled", func() bool {
		n, _ := client.Do(ctx, client.B().Hlen().Key("lim:"+topic+":handled").Build()).AsInt64()
		return n >= 40
	})
	time.Sleep(2 * limitWindow) // anything handled twice would show by now
	handled, _ := client.Do(ctx, client.B().Hgetall().Key("lim:"+topic+":handled").Build()).AsStrMap()
	deliveries, _ := client.Do(ctx, client.B().Hgetall().Key("lim:"+topic+":delivery").Build()).AsStrMap()
	for id := range 40 {
		k := strconv.Itoa(id)
		if handled[k] != "1" || deliveries[k] != "1" {
			t.Errorf("message %d handled %q times, first on delivery %q; want once, on delivery 1", id, handled[k], deliveries[k])
		}
	}
	for cust, n := range counts {
		ends, err := client.Do(ctx, client.B().Lrange().Key("lim:"+topic+":adm:"+cust).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		if len(ends) != n {
			t.Errorf("customer %s: the limiter admitted %d, %d messages were handled", cust, len(ends), n)
		}
		per := map[int64]int{}
		for _, e := range ends {
			ms, err := strconv.ParseInt(e, 10, 64)
			if err != nil {
				continue // "?": a slow call, counted in the total only
			}
			w := (ms + limitWindow.Milliseconds()/2) / limitWindow.Milliseconds() // the window's end, rounded
			per[w]++
			if per[w] > limitPerWindow {
				t.Errorf("customer %s: %d admitted in the window ending near %d ms, the limit is %d", cust, per[w], ms, limitPerWindow)
			}
		}
	}
	order_, _ := client.Do(ctx, client.B().Lrange().Key("lim:"+topic+":order").Start(0).Stop(-1).Build()).AsStrSlice()
	last := map[string]int{}
	for i, cust := range order_ {
		last[cust] = i
	}
	if last["b"] > last["a"] || last["c"] > last["a"] {
		t.Errorf("handled in the order %v: b or c waited behind a's limit", order_)
	}
	if n := xlen(t, client, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}

// TestLimitLeaseChild is one consumer process of TestLimitLeaseKill.
func TestLimitLeaseChild(t *testing.T) {
	topic := os.Getenv("REDSTREAM_LIMIT_LEASE_TOPIC")
	if topic == "" {
		t.Skip("run by TestLimitLeaseKill")
	}
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = 500 * time.Millisecond
	cfg.Autoclaim.Interval = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(leaseKillLimit, leaseKillTTL)}, redisbackend.Options{KeyPrefix: "lk-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 8,
		Limit: &stream.Limit[order]{Concurrency: cl, Key: byCustomer},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			in, member := "lk:"+topic+":in:"+m.Body.Status, pid+":"+strconv.Itoa(m.Body.ID)
			if err := client.Do(ctx, client.B().Zadd().Key(in).ScoreMember().ScoreMember(0, member).Build()).Error(); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			return client.DoMulti(ctx,
				client.B().Zrem().Key(in).Member(member).Build(),
				client.B().Hincrby().Key("lk:"+topic+":handled").Field(strconv.Itoa(m.Body.ID)).Increment(1).Build())[1].Error()
		}}); err != nil {
		t.Fatal(err)
	}
	serveChild(t, c)
}

// The concurrency limit of TestLimitLeaseKill: 2 messages per customer, leases of 300 ms.
const (
	leaseKillLimit = 2
	leaseKillTTL   = 300 * time.Millisecond
)

// TestLimitLeaseKill: three consumer processes with 8 slots each handle two customers'
// messages under a concurrency limit of 2 per customer (240 messages of 50 ms of work);
// every 700 ms one process is SIGKILLed, mostly while it holds leases (up to 4 times,
// counted), and replaced. A watcher samples the messages in Handle of the living processes
// every 2 ms: never more than 2 of a customer. Every message is handled, none is
// dead-lettered, and once every holder is gone and its leases have expired, each
// customer's 2 slots are free.
func TestLimitLeaseKill(t *testing.T) {
	addr := redistest.Addr(t)
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dead := map[string]bool{} // the pids killed
	children := make([]*exec.Cmd, 3)
	spawn := func(i int) {
		children[i] = startChild(t, "TestLimitLeaseChild", nil, "REDSTREAM_LIMIT_LEASE_TOPIC="+topic, "REDSTREAM_REDIS_ADDR="+addr)
	}
	for i := range children {
		spawn(i)
	}
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	const total = 240
	p := newProducer(t, client, fastConfig())
	for id := range total {
		send(t, p, topic, order{ID: id, Status: []string{"a", "b"}[id%2]})
	}
	stop := make(chan struct{})
	watched := make(chan map[string]int)
	go func() {
		most := map[string]int{}
		for {
			select {
			case <-stop:
				watched <- most
				return
			case <-time.After(2 * time.Millisecond):
			}
			for _, cust := range []string{"a", "b"} {
				members, err := client.Do(ctx, client.B().Zrange().Key("lk:"+topic+":in:"+cust).Min("0").Max("-1").Build()).AsStrSlice()
				if err != nil {
					continue
				}
				mu.Lock()
				n := 0
				for _, m := range members {
					if !dead[m[:strings.IndexByte(m, ':')]] {
						n++
					}
				}
				mu.Unlock()
				most[cust] = max(most[cust], n)
			}
		}
	}()
	handled := func() int64 {
		n, _ := client.Do(ctx, client.B().Hlen().Key("lk:"+topic+":handled").Build()).AsInt64()
		return n
	}
	holding := func(pid string) int {
		n := 0
		for _, cust := range []string{"a", "b"} {
			members, _ := client.Do(ctx, client.B().Zrange().Key("lk:"+topic+":in:"+cust).Min("0").Max("-1").Build()).AsStrSlice()
			for _, m := range members {
				if strings.HasPrefix(m, pid+":") {
					n++
				}
			}
		}
		return n
	}
	kills, held := 0, 0
	for deadline := time.Now().Add(60 * time.Second); handled() < total && time.Now().Before(deadline); {
		time.Sleep(700 * time.Millisecond)
		if kills >= 4 || handled() >= total {
			continue
		}
		i := kills % len(children)
		pid := strconv.Itoa(children[i].Process.Pid)
		mu.Lock()
		dead[pid] = true
		mu.Unlock()
		held += holding(pid)
		_ = children[i].Process.Signal(syscall.SIGKILL)
		_ = children[i].Wait()
		kills++
		spawn(i)
	}
	close(stop)
	most := <-watched
	if n := handled(); n < total {
		t.Fatalf("%d of %d messages handled after %d kills", n, total, kills)
	}
	if kills == 0 {
		t.Fatal("no process was killed before every message was handled")
	}
	for cust, n := range most {
		if n > leaseKillLimit {
			t.Errorf("customer %s: %d messages in Handle at once in living processes, the limit is %d", cust, n, leaseKillLimit)
		}
	}
	if n := xlen(t, client, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	time.Sleep(leaseKillTTL) // the last killed holder's leases expire
	cl, err := redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(leaseKillLimit, leaseKillTTL)}, redisbackend.Options{KeyPrefix: "lk-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		_ = c.Process.Kill() // the survivors hold no more leases either
		_ = c.Wait()
	}
	time.Sleep(leaseKillTTL)
	for _, cust := range []string{"a", "b"} {
		for range leaseKillLimit {
			if l, err := cl.Acquire(ctx, cust, time.Time{}, 1); err != nil || !l.Allowed {
				t.Errorf("customer %s: Acquire after the run: %+v, %v; want every slot free", cust, l, err)
			}
		}
	}
	t.Logf("%d kills, the killed holding %d messages in Handle (and their leases); most in Handle at once per customer: %v", kills, held, most)
}

// failingLimiter fails its first n calls with a backend error, then admits everything.
type failingLimiter struct{ left atomic.Int64 }

func (f *failingLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	if f.left.Add(-1) >= 0 {
		return redstream.Decision{}, errors.New("limiter backend down")
	}
	return redstream.Decision{Allowed: true, Limit: 1, Remaining: 1}, nil
}

// TestLimitFailing: while the limiter fails, messages wait (parked for the retry backoff,
// uncounted), each failure is counted in background_errors{op="limit"} and passed to
// OnError; once it works they are handled once, on delivery 1, though MaxDeliveries is 2.
func TestLimitFailing(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.RetryBackoff = 50 * time.Millisecond
	var reported atomic.Int64
	cfg.OnError = func(err error) {
		if strings.Contains(err.Error(), "limiter backend down") {
			reported.Add(1)
		}
	}
	set := vm.NewSet()
	cfg.Metrics = set
	fl := &failingLimiter{}
	fl.left.Store(12)
	rec := newLimitRecorder()
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2, MaxDeliveries: 2,
		Handle: rec.handle, Limit: &stream.Limit[order]{Rate: fl}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	p := newProducer(t, client, cfg)
	for id := range 4 {
		send(t, p, topic, order{ID: id, Status: "x"})
	}
	eventually(t, 20*time.Second, "every message handled", func() bool { return rec.total.Load() >= 4 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id := range 4 {
		if rec.handled[id] != 1 || rec.first[id] != 1 {
			t.Errorf("message %d handled %d times, first on delivery %d; want once, on delivery 1", id, rec.handled[id], rec.first[id])
		}
	}
	if got := counterSum(set, `redis_streaming_mq_background_errors_total`); got < 12 {
		t.Errorf("background errors %v, want at least the 12 failed limiter calls", got)
	}
	if got := reported.Load(); got != 12 {
		t.Errorf("OnError got %d limiter failures, want 12", got)
	}
	if n := xlen(t, client, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}

// TestLimitConcurrencyWake: a slot released in this consumer wakes the next message its
// concurrency limit denied at once, without waiting for the lease TTL (1 minute) or the
// 1 s re-ask: 6 messages of one customer under a limit of 1, 50 ms of work each, are all
// handled within 3 s, in one at a time (re-asking alone would take at least 5 s).
func TestLimitConcurrencyWake(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = 10 * time.Second // the scan does not take the parked entries first
	cl, err := redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(1, time.Minute)}, redisbackend.Options{KeyPrefix: "wake-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	rec := newLimitRecorder()
	rec.work = 50 * time.Millisecond
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4,
		Handle: rec.handle, Limit: &stream.Limit[order]{Concurrency: cl, Key: byCustomer}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	p := newProducer(t, client, cfg)
	start := time.Now()
	for id := range 6 {
		send(t, p, topic, order{ID: id, Status: "a"})
	}
	eventually(t, 3*time.Second, "6 messages handled one at a time", func() bool { return rec.total.Load() >= 6 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.maxIn["a"] > 1 {
		t.Errorf("%d messages in Handle at once, the limit is 1", rec.maxIn["a"])
	}
	t.Logf("6 messages in %v", time.Since(start).Round(time.Millisecond))
}

// TestLimitOrdered: with OrderedByKey, a key's messages that its limit parks keep their
// order (the parked one stays its key line's head), while another key flows.
func TestLimitOrdered(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = 10 * time.Second
	rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(200*time.Millisecond, 2), redisbackend.Options{KeyPrefix: "ord-" + topic})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []int
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4, OrderedByKey: true,
		Limit: &stream.Limit[order]{Rate: rl},
		Handle: func(_ context.Context, m *stream.Message[order]) error {
			mu.Lock()
			got = append(got, m.Body.ID)
			mu.Unlock()
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	p := newProducer(t, client, cfg)
	for id := range 10 {
		msg := stream.NewMessage(order{ID: id})
		msg.Key = "slow"
		if _, err := p.Send(context.Background(), topic, msg); err != nil {
			t.Fatal(err)
		}
	}
	other := stream.NewMessage(order{ID: 100})
	other.Key = "other"
	if _, err := p.Send(context.Background(), topic, other); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "11 messages handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 11
	})
	mu.Lock()
	defer mu.Unlock()
	next, otherAt := 0, -1
	for i, id := range got {
		if id == 100 {
			otherAt = i
			continue
		}
		if id != next {
			t.Fatalf("handled in the order %v: key slow out of order", got)
		}
		next++
	}
	if otherAt > 4 {
		t.Errorf("handled in the order %v: the other key's message waited behind slow's limit", got)
	}
}

// TestLimitHungLimiter: the limiter's Redis (a server of its own) hangs (SIGSTOP) for 6 s,
// longer than a limiter call's 5 s deadline, while messages arrive: each call fails at its
// deadline (counted, op="limit"), the messages wait uncounted and, once the server resumes,
// are handled once each, on delivery 1, with no dead letter.
func TestLimitHungLimiter(t *testing.T) {
	client := redistest.Client(t)
	srv := redistest.NewServer(t)
	lc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, ConnWriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	rl, err := redisbackend.NewLimiter(lc, redstream.FixedWindow(time.Second, 100), redisbackend.Options{KeyPrefix: "hung"})
	if err != nil {
		t.Fatal(err)
	}
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = 30 * time.Second // the scan does not take the waiting entries over
	cfg.RetryBackoff = 100 * time.Millisecond
	set := vm.NewSet()
	cfg.Metrics = set
	rec := newLimitRecorder()
	cons := newConsumer(t, client, cfg)
	if err := stream.Register(cons, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2, MaxDeliveries: 2,
		Handle: rec.handle, Limit: &stream.Limit[order]{Rate: rl, Key: byCustomer}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, cons)
	resume := hang(t, lc)
	p := newProducer(t, client, cfg)
	for id := range 3 {
		send(t, p, topic, order{ID: id, Status: "a"})
	}
	time.Sleep(6 * time.Second)
	if n := rec.total.Load(); n != 0 {
		t.Fatalf("%d messages handled while the limiter's server hung", n)
	}
	resume()
	eventually(t, 20*time.Second, "every message handled after the limiter's server resumed", func() bool { return rec.total.Load() >= 3 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id := range 3 {
		if rec.handled[id] != 1 || rec.first[id] != 1 {
			t.Errorf("message %d handled %d times, first on delivery %d; want once, on delivery 1", id, rec.handled[id], rec.first[id])
		}
	}
	if got := counterSum(set, "redis_streaming_mq_background_errors_total"); got < 1 {
		t.Errorf("background errors %v, want the limiter's failed calls counted", got)
	}
	if n := xlen(t, client, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}
