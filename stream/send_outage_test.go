package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/metrics"
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

// sendSlack is how much later than its deadline a send may return: 150 ms, and 200 ms under
// the race detector (race_slack_test.go), which slows goroutines several times over in ways
// the stall log below does not see (one goroutine of a thousand waiting for its turn while
// the others run; on a 2-core machine running the other packages' tests at the same time, a
// runnable goroutine was seen to wait 100 ms). A call's lateness is counted net of the
// longest stall of the process and the longest wait of a runnable goroutine (the runtime's
// sampled histogram) seen during the call. A send left unbounded would be late by
// Config.SendTimeout (2 s) or more.
var sendSlack = 150 * time.Millisecond

// stallLog records the stalls of this process (a goroutine that sleeps 2 ms at a time notes
// every wake-up more than 5 ms late), so that a send's lateness can be told apart from the
// machine's: on a loaded test machine the whole process is sometimes not scheduled for
// tens or hundreds of milliseconds, which no code of this package can prevent.
type stallLog struct {
	mu   sync.Mutex
	ends []time.Time
	lens []time.Duration
}

func newStallLog(t *testing.T) *stallLog {
	s := &stallLog{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		const tick = 2 * time.Millisecond
		tm := time.NewTimer(tick)
		defer tm.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tm.C:
			}
			now := time.Now()
			if d := now.Sub(last) - tick; d > 5*time.Millisecond {
				s.mu.Lock()
				s.ends, s.lens = append(s.ends, now), append(s.lens, d)
				s.mu.Unlock()
			}
			last = now
			tm.Reset(tick)
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return s
}

// during returns the longest stall that overlapped [from, to].
func (s *stallLog) during(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var longest time.Duration
	for i, end := range s.ends {
		if end.After(from) && end.Add(-s.lens[i]).Before(to) {
			longest = max(longest, s.lens[i])
		}
	}
	return longest
}

// schedLatencies reads the runtime's histogram of how long goroutines waited to run once
// runnable (sampled by the runtime: one transition in eight).
func schedLatencies() *metrics.Float64Histogram {
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return sample[0].Value.Float64Histogram()
}

// longestNewWait returns the lower bound of the highest bucket of the scheduling-latency
// histogram that gained a count between before and after: a runnable goroutine of this
// process waited at least that long, which the stall log (one goroutine that did run) does
// not see.
func longestNewWait(before, after *metrics.Float64Histogram) time.Duration {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0
	}
	for i := len(after.Counts) - 1; i >= 0; i-- {
		if after.Counts[i] > before.Counts[i] {
			return time.Duration(after.Buckets[i] * float64(time.Second))
		}
	}
	return 0
}

// lateness collects how much later than its deadline each send returned.
type lateness struct {
	stalls *stallLog
	mu     sync.Mutex
	calls  int
	raw    time.Duration // the latest return past a deadline
	net    time.Duration // the same, less the process's stall (or a goroutine's wait to run) during the call
	worst  string
}

// time runs f, a send whose deadline is allowed after its start, and records its lateness.
func (l *lateness) time(what string, allowed time.Duration, f func()) {
	before := schedLatencies()
	begin := time.Now()
	f()
	end := time.Now()
	over := end.Sub(begin) - allowed
	net := over - max(l.stalls.during(begin, end), longestNewWait(before, schedLatencies()))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.raw = max(l.raw, over)
	if net > l.net {
		l.net, l.worst = net, fmt.Sprintf("%s took %v with a deadline of %v", what, end.Sub(begin).Round(time.Millisecond), allowed)
	}
}

// check fails t when a send returned more than sendSlack after its deadline (less stalls).
func (l *lateness) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d sends: the latest returned %v after its deadline (%v net of process stalls)", l.calls, l.raw.Round(time.Millisecond), l.net.Round(time.Millisecond))
	if l.net > sendSlack {
		t.Errorf("a send returned %v after its deadline (net of stalls), want at most %v: %s", l.net.Round(time.Millisecond), sendSlack, l.worst)
	}
}

// hang SIGSTOPs the redis-server behind client and returns the function that resumes it
// (also called at cleanup).
func hang(t *testing.T, client rueidis.Client) (resume func()) {
	t.Helper()
	pid := serverPID(t, client)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// TestSendDeadlineHungServer: with Redis hung (SIGSTOP, 4 s), every kind of send returns
// by its deadline plus sendSlack: Send with a context deadline and without one (then
// Config.SendTimeout), with an idempotency key, SendBatch with and without keys and
// middleware, a delayed Send; and its error wraps ErrOutcomeUnknown. The client's write
// timeout of 1 s makes rueidis drop the connection and dial the hung server again during
// the hang: calls queued behind that dial are where rueidis waits past a call's context.
func TestSendDeadlineHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, ConnWriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	const sendTimeout = 400 * time.Millisecond
	cfg := stream.Config{Metrics: vm.NewSet(), SendTimeout: sendTimeout}
	p := newProducer(t, client, cfg)
	hooked := newProducer(t, client, cfg)
	hooked.Use(func(next stream.SendFunc) stream.SendFunc {
		return func(ctx context.Context, out *stream.Outgoing) (string, error) { return next(ctx, out) }
	})
	topic := newTopic(t)
	send(t, p, topic, order{ID: 0}, stream.WithIdempotencyKey("warm-up"))
	send(t, hooked, topic, order{ID: 0}, stream.WithIdempotencyKey("warm-up"))
	l := &lateness{stalls: newStallLog(t)}
	var seq, failed, unknown atomic.Int64
	kinds := []struct {
		name     string
		deadline time.Duration // of the context; 0 for none
		call     func(ctx context.Context) error
	}{
		{"Send", 300 * time.Millisecond, func(ctx context.Context) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 1}))
			return err
		}},
		{"Send without deadline", 0, func(ctx context.Context) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 2}))
			return err
		}},
		{"Send with a key", 0, func(ctx context.Context) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 3}), stream.WithIdempotencyKey(fmt.Sprint("k", seq.Add(1))))
			return err
		}},
		{"Send with a unique id", 0, func(ctx context.Context) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 7}), stream.WithUnique(fmt.Sprint("u", seq.Add(1)), stream.Unique{}))
			return err
		}},
		{"Send debounced", 200 * time.Millisecond, func(ctx context.Context) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 8}), stream.WithUnique("debounced", stream.Unique{Debounce: true}), stream.WithDelay(time.Hour))
			return err
		}},
		{"Send through middleware", 250 * time.Millisecond, func(ctx context.Context) error {
			_, err := hooked.Send(ctx, topic, stream.NewMessage(order{ID: 4}), stream.WithIdempotencyKey(fmt.Sprint("k", seq.Add(1))))
			return err
		}},
		{"SendBatch", 350 * time.Millisecond, func(ctx context.Context) error {
			_, err := p.SendBatch(ctx, topic, []stream.Sendable{stream.NewMessage(order{ID: 5}), stream.NewMessage(order{ID: 6})})
			return err
		}},
		{"SendBatch with keys through middleware", 0, func(ctx context.Context) error {
			a, b := fmt.Sprint("k", seq.Add(1)), fmt.Sprint("k", seq.Add(1))
			_, err := hooked.SendBatch(ctx, topic, []stream.Sendable{stream.NewMessage(order{ID: 7}), stream.NewMessage(order{ID: 8})}, stream.WithIdempotencyKeys(a, b))
			return err
		}},
		{"delayed Send", 0, func(ctx context.Context) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 9}), stream.WithDelay(time.Minute))
			return err
		}},
	}
	resume := hang(t, client)
	end := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for _, k := range kinds {
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(end) {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					allowed := sendTimeout
					if k.deadline > 0 {
						ctx, cancel = context.WithTimeout(ctx, k.deadline)
						allowed = k.deadline
					}
					var err error
					l.time(k.name, allowed, func() { err = k.call(ctx) })
					cancel()
					if err == nil {
						t.Errorf("%s on a hung server succeeded", k.name)
						return
					}
					failed.Add(1)
					if errors.Is(err, stream.ErrOutcomeUnknown) {
						unknown.Add(1)
					} else {
						t.Errorf("%s on a hung server: %v, want an error wrapping ErrOutcomeUnknown", k.name, err)
					}
				}
			})
		}
	}
	wg.Wait()
	resume()
	l.check(t)
	t.Logf("%d sends failed during the hang, %d of them with ErrOutcomeUnknown", failed.Load(), unknown.Load())
	eventually(t, 15*time.Second, "a send after the hang", func() bool {
		_, err := p.Send(context.Background(), topic, stream.NewMessage(order{ID: 10}))
		return err == nil
	})
}

// retryRun is the outcome of retrySends.
type retryRun struct {
	ids      []string // per message, the id its successful send returned
	attempts int      // sends, the successful ones included
	errors   int      // failed sends
	unknown  int      // failed sends whose error wraps ErrOutcomeUnknown
}

// retrySends sends n messages with the given number of workers, each message with its
// own idempotency key (when keyed) and retried on every error until a send succeeds, each
// worker sending at most one message per pace. Workers of even number give each send a
// context deadline of ctxDeadline; the others none, so that Config.SendTimeout (timeout)
// is their deadline. Lateness is recorded in l.
func retrySends(p *stream.Producer, topic string, n, workers int, pace, ctxDeadline, timeout time.Duration, keyed bool, l *lateness) retryRun {
	run := retryRun{ids: make([]string, n)}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var opts []stream.SendOption
				if keyed {
					opts = append(opts, stream.WithIdempotencyKey(fmt.Sprint("msg-", i)))
				}
				for {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					allowed := timeout
					if w%2 == 0 {
						ctx, cancel = context.WithTimeout(ctx, ctxDeadline)
						allowed = min(ctxDeadline, timeout)
					}
					var id string
					var err error
					l.time("Send", allowed, func() { id, err = p.Send(ctx, topic, stream.NewMessage(order{ID: i}), opts...) })
					cancel()
					mu.Lock()
					run.attempts++
					if err != nil {
						run.errors++
						if errors.Is(err, stream.ErrOutcomeUnknown) {
							run.unknown++
						}
					} else {
						run.ids[i] = id
					}
					mu.Unlock()
					if err == nil {
						break
					}
					time.Sleep(5 * time.Millisecond) // retry at once, without spinning on a fast error
				}
				<-tick.C
			}
		})
	}
	wg.Wait()
	return run
}

// checkExactlyOnce fails t unless topic's streams hold exactly one entry per message 0..n-1
// and the ids the sends returned are those entries.
func checkExactlyOnce(t *testing.T, client rueidis.Client, streams []string, n int, run retryRun) {
	t.Helper()
	seen := make([]int, n)
	ids := map[string]bool{}
	total := 0
	for _, s := range streams {
		entries, err := client.Do(context.Background(), client.B().Xrange().Key(s).Start("-").End("+").Build()).AsXRange()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			var b order
			if err := json.Unmarshal([]byte(e.FieldValues[streamwire.FieldBody]), &b); err != nil || b.ID < 0 || b.ID >= n {
				t.Fatalf("entry %s: body %q: %v", e.ID, e.FieldValues[streamwire.FieldBody], err)
			}
			seen[b.ID]++
			ids[e.ID] = true
			total++
		}
	}
	dups, missing := 0, 0
	for i, c := range seen {
		switch {
		case c == 0:
			missing++
		case c > 1:
			dups += c - 1
		}
		if !ids[run.ids[i]] {
			t.Errorf("message %d: its send returned %q, not an entry of the stream", i, run.ids[i])
		}
	}
	t.Logf("%d messages, %d attempts, %d failed (%d with ErrOutcomeUnknown); %d entries: %d duplicates, %d missing",
		n, run.attempts, run.errors, run.unknown, total, dups, missing)
	if total != n || dups != 0 || missing != 0 {
		t.Errorf("%d entries for %d messages (%d duplicates, %d missing), want exactly one each", total, n, dups, missing)
	}
}

// TestSendRetryThroughHang: 1,000 messages, each with its idempotency key and retried on
// every error, sent by 50 workers through a 12 s SIGSTOP of Redis, leave exactly 1,000
// entries, and no send returns later than its deadline (500 ms from its context for half
// the workers, the default Config.SendTimeout of 2 s for the others) plus sendSlack. The
// server decides the path: XADD IDMP on Redis 8.6 and later, the script elsewhere.
func TestSendRetryThroughHang(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	p := newProducer(t, client, stream.Config{Metrics: vm.NewSet()})
	topic := newTopic(t)
	send(t, p, topic, order{ID: 0}, stream.WithIdempotencyKey("msg-0")) // message 0, sent once before
	t.Logf("idempotency path: %s", stream.IdempotencyPath(p))
	l := &lateness{stalls: newStallLog(t)}
	pid := serverPID(t, client)
	var once sync.Once
	resume := func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	go func() {
		time.Sleep(2 * time.Second)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(12 * time.Second)
		resume()
	}()
	run := retrySends(p, topic, 1000, 50, 500*time.Millisecond, 500*time.Millisecond, stream.DefaultSendTimeout, true, l)
	l.check(t)
	checkExactlyOnce(t, client, []string{topic}, 1000, run)
	if stream.IdempotencyPath(p) == "idmp" {
		info, err := client.Do(context.Background(), client.B().XinfoStream().Key(topic).Build()).AsMap()
		if err != nil {
			t.Fatal(err)
		}
		dups := info["iids-duplicates"]
		n, _ := dups.AsInt64()
		t.Logf("XADD IDMP recognised %d repeats (failed attempts written after all, or retries of them)", n)
	}
	if run.errors == 0 {
		t.Error("no send failed: the hang did not happen during the sends")
	}
}

// TestSendRetryClusterHang: the script path on a 3-master cluster: with the master of the
// topic's slot SIGSTOPped for 3 s (below the cluster's node timeout, so no failover),
// 300 keyed messages retried on every error leave exactly 300 entries, and every send
// returns by its deadline plus sendSlack.
func TestSendRetryClusterHang(t *testing.T) {
	client := redistest.ClusterClient(t)
	p := newProducer(t, client, stream.Config{Metrics: vm.NewSet(), SendTimeout: time.Second})
	stream.ForceIdempotencyScript(p)
	topic := newTopic(t)
	send(t, p, topic, order{ID: 0}, stream.WithIdempotencyKey("msg-0"))
	addr := clusterMasters(t, client)[keySlot(topic)]
	node, ok := client.Nodes()[addr]
	if !ok {
		t.Fatalf("no client for the master %s of %q", addr, topic)
	}
	pid := serverPID(t, node)
	var once sync.Once
	resume := func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	l := &lateness{stalls: newStallLog(t)}
	go func() {
		time.Sleep(500 * time.Millisecond)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(3 * time.Second)
		resume()
	}()
	run := retrySends(p, topic, 300, 20, 100*time.Millisecond, 300*time.Millisecond, time.Second, true, l)
	l.check(t)
	checkExactlyOnce(t, client, []string{topic}, 300, run)
	if run.errors == 0 {
		t.Error("no send failed: the hang did not happen during the sends")
	}
	if stream.IdempotencyPath(p) != "script" {
		t.Errorf("path %q, want script", stream.IdempotencyPath(p))
	}
}
