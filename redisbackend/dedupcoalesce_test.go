package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// gatherOf returns the coalescing of a deduplicator built by NewDeduplicator.
func gatherOf(t *testing.T, d redstream.Deduplicator) *dedupGather {
	t.Helper()
	switch d := d.(type) {
	case *setDedup:
		return d.gather
	case *bloomDedup:
		return d.gather
	case *windowDedup:
		return d.gather
	}
	t.Fatalf("unknown deduplicator %T", d)
	return nil
}

// dedupSpecs are the three strategies, the Bloom filter in 3 shards (on a cluster, on
// different masters) and sized so that a false positive among a few hundred elements is out
// of reach (about 1e-9 each).
var dedupSpecs = []redstream.DedupSpec{
	{Strategy: redstream.DedupSet},
	{Strategy: redstream.DedupWindowed, Window: time.Hour},
	{Strategy: redstream.DedupBloom, Insertions: 100_000, FPRate: 1e-9, Shards: 3},
}

// TestCoalescedChecksExact: 64 goroutines check and mark 200 elements, each about 13
// times, at once, so most checks are gathered: every element is new to exactly one caller,
// for every strategy (the windowed one at the server's time and at a time of the caller's),
// on a real server and a real 3-master cluster.
func TestCoalescedChecksExact(t *testing.T) {
	const (
		elements = 200
		workers  = 64
		each     = 40
	)
	for _, mode := range []struct {
		name   string
		client func(*testing.T) rueidis.Client
	}{
		{"redis", func(t *testing.T) rueidis.Client { return redistest.Client(t) }},
		{"cluster", func(t *testing.T) rueidis.Client { return redistest.ClusterClient(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			client := mode.client(t)
			type run struct {
				name string
				spec redstream.DedupSpec
				at   time.Time // the windowed deduplicator's time; zero: the server's
			}
			runs := []run{}
			for _, spec := range dedupSpecs {
				runs = append(runs, run{string(spec.Strategy), spec, time.Time{}})
			}
			runs = append(runs, run{"window-at", dedupSpecs[1], time.UnixMicro(1_700_000_000_123_456)})
			for _, r := range runs {
				t.Run(r.name, func(t *testing.T) {
					d, err := NewDeduplicator(client, uniq("coalesce-dedup"), r.spec, DedupOptions{Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					g := gatherOf(t, d)
					if g == nil {
						t.Fatal("coalescing is off by default")
					}
					check := func(e string) (bool, error) {
						if td, ok := d.(redstream.TimedDeduplicator); ok && !r.at.IsZero() {
							return td.CheckAndMarkAt(context.Background(), e, r.at)
						}
						return d.CheckAndMark(context.Background(), e)
					}
					news := make([]int, elements)
					var mu sync.Mutex
					var wg sync.WaitGroup
					errs := make(chan error, workers)
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range each {
								e := (w*7 + i*13) % elements
								dup, err := check(fmt.Sprint("e", e))
								if err != nil {
									errs <- err
									return
								}
								if !dup {
									mu.Lock()
									news[e]++
									mu.Unlock()
								}
							}
						}()
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						t.Fatal(err)
					}
					seen := make([]bool, elements)
					for w := range workers {
						for i := range each {
							seen[(w*7+i*13)%elements] = true
						}
					}
					for e, n := range news {
						if want := map[bool]int{true: 1, false: 0}[seen[e]]; n != want {
							t.Errorf("element e%d was new to %d callers, want %d", e, n, want)
						}
					}
					if n := g.decided.Load(); n == 0 {
						t.Errorf("no check of %d was gathered", workers*each)
					} else {
						t.Logf("%d of %d checks were gathered", n, workers*each)
					}
				})
			}
		})
	}
}

// TestCoalescedCheckDeadline: with the server SIGSTOPped and as many checks hung in flight
// as a deduplicator sends before it gathers, checks that wait keep their callers' own
// deadlines and cancellations, for every strategy: each returns its context's error within
// its deadline (plus the process's stall) and none stays in the gathering. After SIGCONT,
// checks are answered again and the deduplicator is idle.
func TestCoalescedCheckDeadline(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	for _, spec := range dedupSpecs {
		t.Run(string(spec.Strategy), func(t *testing.T) {
			d, err := NewDeduplicator(client, uniq("coalesce-dedup-dl"), spec, DedupOptions{Timeout: 3 * time.Second,
				Breaker: redstream.BreakerOptions{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := d.CheckAndMark(ctx, "first"); err != nil {
				t.Fatalf("with Redis up: %v", err)
			}
			g := gatherOf(t, d)
			resume := hang(t, client)
			hung := make(chan error, maxInFlight)
			for i := range maxInFlight {
				go func() { _, err := d.CheckAndMark(ctx, fmt.Sprint("hung", i)); hung <- err }()
			}
			waitersKeepDeadlines(t, &g.gathering, "check", func(ctx context.Context, i int) error {
				_, err := d.CheckAndMark(ctx, fmt.Sprint("w", i))
				return err
			})
			select {
			case err := <-hung:
				t.Errorf("a hung check returned (%v) while the server was stopped", err)
			default:
			}
			resume()
			for range maxInFlight {
				if err := <-hung; err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("a hung check: %v", err)
				}
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				dup, err := d.CheckAndMark(ctx, "first")
				if err == nil && dup {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after SIGCONT: %v, %v", dup, err)
				}
			}
			g.mu.Lock()
			inFlight, left := g.inFlight, len(g.waiting)
			g.mu.Unlock()
			if inFlight != 0 || left != 0 {
				t.Errorf("after the checks returned: %d in flight, %d waiting; want an idle deduplicator", inFlight, left)
			}
		})
	}
}

// TestDedupCoalescingOff: DedupOptions.DisableCoalescing and a negative Timeout (the
// caller's context alone) never gather checks, for every strategy.
func TestDedupCoalescingOff(t *testing.T) {
	c, _ := miniClient(t)
	for _, spec := range dedupSpecs {
		for name, opts := range map[string]DedupOptions{
			"DisableCoalescing": {DisableCoalescing: true},
			"Timeout < 0":       {Timeout: -1},
		} {
			d, err := NewDeduplicator(c, uniq("coalesce-off"), spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			if gatherOf(t, d) != nil {
				t.Errorf("%s, %s: coalescing is on", spec.Strategy, name)
			}
		}
	}
}
