package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

// settleSpecs are specs of every algorithm, small enough for random traffic to fill them.
func settleSpecs() []redstream.Spec {
	return []redstream.Spec{
		redstream.TokenBucket(5, 1000),
		redstream.LeakyBucket(4, 500),
		redstream.SlidingWindow(7*time.Millisecond, 6),
		redstream.SlidingCounter(10*time.Millisecond, 5),
		redstream.FixedWindow(7*time.Millisecond, 6),
	}
}

func maxOf(specs []redstream.Spec) int64 {
	m := int64(1 << 40)
	for _, s := range specs {
		l, _ := s.Core()
		m = min(m, l.Max())
	}
	return m
}

// TestReserveSettleMatchesAllowN: on the engine, reserving an estimate at t0 and settling
// the actual cost leaves the key as AllowN(actual) at t0 does, for every algorithm and a
// multi-limit of all of them; a denied reservation takes nothing from any limit.
func TestReserveSettleMatchesAllowN(t *testing.T) {
	ctx := context.Background()
	cases := map[string][]redstream.Spec{"multi": settleSpecs()}
	for _, s := range settleSpecs() {
		cases[string(s.Algorithm)] = []redstream.Spec{s}
	}
	for name, specs := range cases {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			max := maxOf(specs)
			compared, denied := 0, 0
			for c := 0; c < 400; c++ {
				a, _ := memory.NewMultiLimiter(specs, memory.Options{})
				b, _ := memory.NewMultiLimiter(specs, memory.Options{})
				now := time.UnixMicro(2_000_000_000_000)
				for i, k := 0, r.IntN(10); i < k; i++ {
					now = now.Add(time.Duration(r.IntN(4000)) * time.Microsecond)
					n := 1 + r.Int64N(max)
					da, _ := a.AllowN(ctx, "k", now, n)
					db, _ := b.AllowN(ctx, "k", now, n)
					if da != db {
						t.Fatalf("twin limiters disagree: %+v, %+v", da, db)
					}
				}
				t0 := now.Add(time.Duration(r.IntN(3000)) * time.Microsecond)
				est, actual := 1+r.Int64N(max), r.Int64N(max+1)
				res, err := b.ReserveN(ctx, "k", t0, est)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					denied++
					// A denial takes nothing: a's state is b's.
					if diff := samePeeks(ctx, a, b, t0, max); diff != "" {
						t.Fatalf("case %d: a denied reservation changed the key: %s", c, diff)
					}
					if err := res.Settle(ctx, actual); !errors.Is(err, redstream.ErrReservationDone) {
						t.Fatalf("Settle of a denied reservation: %v", err)
					}
					continue
				}
				if actual > 0 {
					if d, _ := a.AllowN(ctx, "k", t0, actual); !d.Allowed {
						continue
					}
				}
				if err := res.Settle(ctx, actual); err != nil {
					t.Fatal(err)
				}
				if diff := samePeeks(ctx, a, b, t0, max); diff != "" {
					t.Fatalf("case %d: reserve %d, settle %d at %v: %s", c, est, actual, t0, diff)
				}
				compared++
			}
			if compared < 50 || denied == 0 {
				t.Fatalf("the fixture compared %d cases and saw %d denials; want >= 50 and > 0", compared, denied)
			}
		})
	}
}

// samePeeks compares every spec's decision of a and b for each cost at times from from on.
func samePeeks(ctx context.Context, a, b *memory.Limiter, from time.Time, max int64) string {
	for _, dt := range []time.Duration{0, time.Microsecond, 997 * time.Microsecond, 3 * time.Millisecond, 7 * time.Millisecond, 12 * time.Millisecond} {
		for n := int64(1); n <= max; n++ {
			da, ea := a.PeekEach(ctx, "k", from.Add(dt), n)
			db, eb := b.PeekEach(ctx, "k", from.Add(dt), n)
			if fmt.Sprint(da, ea) != fmt.Sprint(db, eb) {
				return fmt.Sprintf("at +%v n=%d: %+v, want %+v", dt, n, db, da)
			}
		}
	}
	return ""
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestReservationOnceAndDeadline(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, spec := range settleSpecs() {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l, err := memory.NewLimiter(spec, memory.Options{Clock: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			lim, _ := spec.Core()
			res, err := redstream.Reserve(ctx, l, "once", 2)
			if err != nil || !res.Allowed {
				t.Fatalf("Reserve: %+v, %v", res, err)
			}
			if want := clk.now().Add(max(time.Duration(lim.Period())*time.Microsecond, time.Minute)); !res.Deadline.Equal(want) {
				t.Fatalf("Deadline = %v, want %v", res.Deadline, want)
			}
			if err := res.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			if err := res.Cancel(ctx); !errors.Is(err, redstream.ErrReservationDone) {
				t.Fatalf("second Cancel: %v, want ErrReservationDone", err)
			}
			// Nothing is left charged: the whole limit is free.
			if d, _ := l.PeekN(ctx, "once", time.Time{}, lim.Max()); !d.Allowed {
				t.Fatalf("after Cancel the full limit is denied: %+v", d)
			}
			if err := res.Settle(ctx, -1); !errors.Is(err, redstream.ErrInvalidCost) {
				t.Fatalf("Settle(-1): %v", err)
			}
			// Past its deadline a reservation stays charged at its estimate.
			late, _ := redstream.Reserve(ctx, l, "late", 1)
			clk.add(res.Deadline.Sub(clk.now()) + time.Microsecond)
			before, _ := l.PeekN(ctx, "late", time.Time{}, 1)
			if err := late.Cancel(ctx); !errors.Is(err, redstream.ErrReservationDone) {
				t.Fatalf("Cancel past the deadline: %v, want ErrReservationDone", err)
			}
			if after, _ := l.PeekN(ctx, "late", time.Time{}, 1); after != before {
				t.Fatalf("Cancel past the deadline changed the key: %+v, was %+v", after, before)
			}
		})
	}
}

// TestReserveRefundsOnlyItsOwn: concurrent reservations on one key, each cancelled, give
// back exactly what they took, whatever else the key admitted meanwhile.
func TestReserveRefundsOnlyItsOwn(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []redstream.Spec{redstream.TokenBucket(1000, 0.001), redstream.FixedWindow(time.Hour, 1000), redstream.SlidingWindow(time.Hour, 1000), redstream.SlidingCounter(time.Hour, 1000)} {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l, _ := memory.NewLimiter(spec, memory.Options{})
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 50; i++ {
						res, err := l.ReserveN(ctx, "k", at, 3)
						if err != nil || !res.Allowed {
							t.Errorf("ReserveN: %+v, %v", res, err)
							return
						}
						if _, err := l.AllowN(ctx, "k", at, 1); err != nil {
							t.Error(err)
						}
						if err := res.Settle(ctx, 1); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			// 400 reservations settled at 1 and 400 requests of 1: 800 of 1000 taken.
			if d, _ := l.PeekN(ctx, "k", at, 200); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("PeekN(200) = %+v, want allowed with 0 remaining", d)
			}
			if d, _ := l.PeekN(ctx, "k", at, 201); d.Allowed {
				t.Fatalf("PeekN(201) = %+v, want denied", d)
			}
		})
	}
}
