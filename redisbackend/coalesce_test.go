package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
)

// TestCoalescedDecisionsEqualMemory: 64 goroutines decide 8 keys at once, so most decisions
// are gathered into batch calls. Every key's decisions, as a multiset, are those the memory
// engine makes for as many requests at the same instant and cost, for every algorithm, on
// a real server and a real 3-master cluster; half of the keys ask for cost 1 at one instant
// and half for cost 2 at another, so gatherings mix both.
func TestCoalescedDecisionsEqualMemory(t *testing.T) {
	specs := []redstream.Spec{
		redstream.TokenBucket(20, 10),
		redstream.LeakyBucket(20, 10),
		redstream.SlidingWindow(time.Minute, 20),
		redstream.SlidingCounter(time.Minute, 20),
		redstream.FixedWindow(time.Minute, 20),
	}
	t0 := time.UnixMicro(1_700_000_000_123_456)
	const (
		keys    = 8
		workers = 64
		each    = 40 // decisions per worker: 320 per key
	)
	at := func(k int) (time.Time, int64) {
		if k < keys/2 {
			return t0, 1
		}
		return t0.Add(time.Second), 2
	}
	for _, mode := range []struct {
		name   string
		client func(*testing.T) rueidis.Client
	}{
		{"redis", func(t *testing.T) rueidis.Client { return redistest.Client(t) }},
		{"cluster", func(t *testing.T) rueidis.Client { return redistest.ClusterClient(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			client := mode.client(t)
			for _, spec := range specs {
				t.Run(string(spec.Algorithm), func(t *testing.T) {
					l := mustLimiter(t, client, spec, Options{KeyPrefix: uniq("coalesce"), Timeout: 5 * time.Second})
					if l.gathers == nil {
						t.Fatal("coalescing is off by default")
					}
					got := make([][]redstream.Decision, keys)
					var mu sync.Mutex
					var wg sync.WaitGroup
					errs := make(chan error, workers)
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range each {
								k := (w + i) % keys
								now, n := at(k)
								d, err := l.AllowN(context.Background(), fmt.Sprint("k", k), now, n)
								if err != nil {
									errs <- err
									return
								}
								mu.Lock()
								got[k] = append(got[k], d)
								mu.Unlock()
							}
						}()
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						t.Fatal(err)
					}
					ref, err := memory.NewLimiter(spec, memory.Options{})
					if err != nil {
						t.Fatal(err)
					}
					for k := range keys {
						now, n := at(k)
						var want []redstream.Decision
						for range len(got[k]) {
							d, err := ref.AllowN(context.Background(), fmt.Sprint("k", k), now, n)
							if err != nil {
								t.Fatal(err)
							}
							want = append(want, d)
						}
						if g, w := sortedDecisions(got[k]), sortedDecisions(want); !slices.Equal(g, w) {
							t.Errorf("key %d (cost %d): Redis decided\n%v\nmemory decides\n%v", k, n, g, w)
						}
					}
					if g := l.gathers.decided.Load(); g == 0 {
						t.Errorf("no decision of %d was gathered", workers*each)
					} else {
						t.Logf("%d of %d decisions were gathered into batch calls", g, workers*each)
					}
				})
			}
		})
	}
}

// sortedDecisions renders ds as sorted strings: a multiset of decisions.
func sortedDecisions(ds []redstream.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%v/%d/%v/%v", d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
	}
	slices.Sort(out)
	return out
}

// TestCoalescedCallerDeadline: with the server SIGSTOPped and as many decisions hung in
// flight as a slot sends before it gathers (a 3 s timeout), decisions that wait for it keep their callers' own deadlines and
// cancellations: each returns its context's error within its deadline (plus the process's
// stall), none waits for the hung call, and none stays in the gathering. After SIGCONT,
// decisions are made again and the slot is idle.
func TestCoalescedCallerDeadline(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	l := mustLimiter(t, client, redstream.TokenBucket(100, 100), Options{KeyPrefix: uniq("coalesce-dl"), Timeout: 3 * time.Second,
		Breaker: redstream.BreakerOptions{Disabled: true}})
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
		t.Fatalf("with Redis up: %+v, %v", d, err)
	}
	g := l.gathers.of(client, l.Keys("k")[0])
	resume := hang(t, client)
	hung := make(chan error, maxInFlight)
	for range maxInFlight {
		go func() { _, err := l.AllowN(ctx, "k", time.Time{}, 1); hung <- err }()
	}
	waitersKeepDeadlines(t, g, "decision", func(ctx context.Context, i int) error {
		_, err := l.AllowN(ctx, fmt.Sprint("w", i), time.Time{}, 1)
		return err
	})
	select {
	case err := <-hung:
		t.Fatalf("a hung decision returned (%v) while the server was stopped", err)
	default:
	}
	resume()
	for range maxInFlight {
		if err := <-hung; err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a hung decision: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, err := l.AllowN(ctx, "k", time.Time{}, 1)
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGCONT: %+v, %v", d, err)
		}
	}
	g.mu.Lock()
	inFlight, left := g.inFlight, len(g.waiting)
	g.mu.Unlock()
	if inFlight != 0 || left != 0 {
		t.Errorf("after the decisions returned: %d in flight, %d waiting; want an idle slot", inFlight, left)
	}
}

// TestCoalescingOff: Options.DisableCoalescing, a multi-limit limiter and a negative
// Timeout (the caller's context alone) never gather decisions.
func TestCoalescingOff(t *testing.T) {
	c, _ := miniClient(t)
	for name, l := range map[string]*Limiter{
		"DisableCoalescing": mustLimiter(t, c, redstream.TokenBucket(1, 1), Options{DisableCoalescing: true}),
		"Timeout < 0":       mustLimiter(t, c, redstream.TokenBucket(1, 1), Options{Timeout: -1}),
	} {
		if l.gathers != nil {
			t.Errorf("%s: coalescing is on", name)
		}
	}
	m, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(1, 1), redstream.FixedWindow(time.Second, 5)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.gathers != nil {
		t.Error("a multi-limit limiter coalesces")
	}
}

// waitersKeepDeadlines checks, with g's calls all hung in flight, that 10 requests made by
// call (half with a 50 ms deadline, half cancelled after 50 ms) each return their context's
// error within 300 ms (plus the process's stall), and that none stays in g's gathering.
func waitersKeepDeadlines[Q, A any](t *testing.T, g *gathering[Q, A], what string, call func(ctx context.Context, i int) error) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		full := g.inFlight == maxInFlight
		g.mu.Unlock()
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first %d %ss never went out", maxInFlight, what)
		}
	}
	meter := redistest.NewStallMeter(t)
	const waiters = 10
	type result struct {
		err         error
		took, stall time.Duration
		cancelled   bool
	}
	results := make(chan result, waiters)
	for i := range waiters {
		go func() {
			var cctx context.Context
			var cancel context.CancelFunc
			cancelled := i%2 == 1
			if cancelled {
				cctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
			} else {
				cctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			var err error
			took, stall := meter.Time(func() { err = call(cctx, i) })
			results <- result{err, took, stall, cancelled}
		}()
	}
	for range waiters {
		r := <-results
		want := context.DeadlineExceeded
		if r.cancelled {
			want = context.Canceled
		}
		if !errors.Is(r.err, want) {
			t.Errorf("a waiting %s returned %v, want %v", what, r.err, want)
		}
		if r.took > 300*time.Millisecond+r.stall {
			t.Errorf("a waiting %s with a 50 ms context returned after %v (the process stalled %v meanwhile)", what, r.took, r.stall)
		}
	}
	g.mu.Lock()
	left := len(g.waiting)
	g.mu.Unlock()
	if left != 0 {
		t.Errorf("%d %ss stayed in the gathering after their callers left", left, what)
	}
}
