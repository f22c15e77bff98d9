package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
)

// reserveSpecs are specs of every algorithm, small enough for random traffic to fill them.
func reserveSpecs() []redstream.Spec {
	return []redstream.Spec{
		redstream.TokenBucket(5, 1000),
		redstream.LeakyBucket(4, 500),
		redstream.SlidingWindow(7*time.Millisecond, 6),
		redstream.SlidingCounter(10*time.Millisecond, 5),
		redstream.FixedWindow(7*time.Millisecond, 6),
	}
}

// twinLimiter is a limiter deciding on Redis and its in-process twin (memory, proven equal
// to core): what a reservation and its settlement leave on Redis must be what they leave
// in memory.
type twinLimiter interface {
	redstream.Limiter
	ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error)
	PeekEach(ctx context.Context, key string, now time.Time, n int64) ([]redstream.Decision, error)
}

// TestReserveSettleConformance: on Redis (single server and 3-master cluster), random
// traffic, a reservation of an estimate and its settlement at an actual cost (or Cancel)
// leave every limit of the key as they leave the in-process engine's, for every
// algorithm, single limits (their own scripts' keys) and a multi-limit of all of them.
func TestReserveSettleConformance(t *testing.T) {
	ctx := context.Background()
	cases := map[string][]redstream.Spec{"multi": reserveSpecs()}
	for _, s := range reserveSpecs() {
		cases[string(s.Algorithm)] = []redstream.Spec{s}
	}
	for _, be := range backends[1:] {
		t.Run(be.name, func(t *testing.T) {
			c := be.client(t)
			for name, specs := range cases {
				t.Run(name, func(t *testing.T) {
					var r twinLimiter
					var err error
					if len(specs) == 1 {
						r, err = NewLimiter(c, specs[0], Options{KeyPrefix: uniq("rsv")})
					} else {
						r, err = NewMultiLimiter(c, specs, Options{KeyPrefix: uniq("rsv")})
					}
					if err != nil {
						t.Fatal(err)
					}
					if diff := runReserveConformance(t, ctx, r, specs, checks(true)/2); diff != "" {
						t.Fatal(diff)
					}
				})
			}
		})
	}
}

// runReserveConformance returns the first difference between r and memory, or "".
func runReserveConformance(t *testing.T, ctx context.Context, r twinLimiter, specs []redstream.Spec, cases int) string {
	t.Helper()
	max := int64(1 << 40)
	for _, s := range specs {
		p, _ := s.Core()
		max = min(max, p.Max())
	}
	rng := rand.New(rand.NewPCG(uint64(len(specs)), uint64(cases)))
	settled := 0
	for c := 0; c < cases; c++ {
		m, _ := memory.NewMultiLimiter(specs, memory.Options{})
		key := fmt.Sprintf("k%d", c)
		now := time.UnixMicro(1_900_000_000_000_000 + rng.Int64N(1e9))
		for i, k := 0, rng.IntN(8); i < k; i++ {
			now = now.Add(time.Duration(rng.IntN(4000)) * time.Microsecond)
			n := 1 + rng.Int64N(max)
			dm, _ := m.AllowN(ctx, key, now, n)
			dr, err := r.AllowN(ctx, key, now, n)
			if err != nil || dm != dr {
				return fmt.Sprintf("case %d: AllowN = %+v, %v; memory %+v", c, dr, err, dm)
			}
		}
		t0 := now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
		est, actual := 1+rng.Int64N(max), rng.Int64N(max+2)
		rm, err := m.ReserveN(ctx, key, t0, est)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := r.ReserveN(ctx, key, t0, est)
		if err != nil || rr.Decision != rm.Decision {
			return fmt.Sprintf("case %d: ReserveN(%d) = %+v, %v; memory %+v", c, est, rr, err, rm.Decision)
		}
		em, er := rm.Settle(ctx, actual), rr.Settle(ctx, actual)
		if (em == nil) != (er == nil) || (er != nil && !errors.Is(er, redstream.ErrReservationDone)) {
			return fmt.Sprintf("case %d: Settle(%d) = %v; memory %v", c, actual, er, em)
		}
		if em == nil {
			settled++
		}
		for _, dt := range []time.Duration{0, 997 * time.Microsecond, 3 * time.Millisecond, 7 * time.Millisecond, 12 * time.Millisecond} {
			for n := int64(1); n <= max; n++ {
				pm, _ := m.PeekEach(ctx, key, t0.Add(dt), n)
				pr, err := r.PeekEach(ctx, key, t0.Add(dt), n)
				if err != nil || fmt.Sprint(pm) != fmt.Sprint(pr) {
					return fmt.Sprintf("case %d: reserve %d, settle %d at %v, peek at +%v n=%d: %+v, %v; memory %+v", c, est, actual, t0, dt, n, pr, err, pm)
				}
			}
		}
	}
	if settled < cases/4 {
		t.Fatalf("only %d of %d cases were settled; the fixture must admit its reservations", settled, cases)
	}
	return ""
}

// TestReserveSettleMutants: settle.lua with a refund one unit off, for each fragment that
// computes one, differs from memory on the conformance cases of the algorithms using it.
func TestReserveSettleMutants(t *testing.T) {
	ctx := context.Background()
	c := backends[1].client(t)
	orig := scriptSettle
	t.Cleanup(func() { scriptSettle = orig })
	for _, m := range []struct {
		name, from, to string
		specs          []redstream.Spec
	}{
		{"window count refund", "    local k = charged - actual\n", "    local k = charged - actual + 1\n",
			[]redstream.Spec{redstream.FixedWindow(7*time.Millisecond, 6), redstream.SlidingCounter(10*time.Millisecond, 5)}},
		{"bucket refund", "local next = t - (charged - actual) * interval", "local next = t - (charged - actual - 1) * interval",
			[]redstream.Spec{redstream.TokenBucket(5, 1000), redstream.LeakyBucket(4, 500)}},
		{"log refund", "    k = charged - actual\n", "    k = charged - actual - 1\n",
			[]redstream.Spec{redstream.SlidingWindow(7*time.Millisecond, 6)}},
	} {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(orig.src, m.from) {
				t.Fatalf("settle.lua has no %q", m.from)
			}
			mut := *orig
			mut.src = strings.Replace(orig.src, m.from, m.to, 1)
			mut.lua = rueidis.NewLuaScript(mut.src)
			scriptSettle = &mut
			defer func() { scriptSettle = orig }()
			for _, spec := range m.specs {
				r, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("mut")})
				if err != nil {
					t.Fatal(err)
				}
				if runReserveConformance(t, ctx, r, []redstream.Spec{spec}, 60) == "" {
					t.Errorf("%v: the mutant survived 60 cases", spec)
				}
			}
		})
	}
}

// TestReserveServerTime: a reservation at the server's TIME settles at the server's TIME,
// once; a denial by one limit of a multi-limit takes nothing from the others.
func TestReserveServerTime(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends[1:] {
		t.Run(be.name, func(t *testing.T) {
			c := be.client(t)
			l, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(10, 0.001), redstream.FixedWindow(time.Hour, 6)}, Options{KeyPrefix: uniq("rsvt")})
			if err != nil {
				t.Fatal(err)
			}
			res, err := redstream.Reserve(ctx, l, "u", 5)
			if err != nil || !res.Allowed || res.Remaining != 1 {
				t.Fatalf("Reserve(5) = %+v, %v", res, err)
			}
			// 2 more than the window's 1 left: denied, and the bucket keeps its 5.
			if d, err := l.AllowN(ctx, "u", time.Time{}, 2); err != nil || d.Allowed {
				t.Fatalf("AllowN(2) = %+v, %v; want denied", d, err)
			}
			if err := res.Settle(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if err := res.Settle(ctx, 2); !errors.Is(err, redstream.ErrReservationDone) {
				t.Fatalf("second Settle = %v", err)
			}
			ds, err := l.PeekEach(ctx, "u", time.Time{}, 1)
			if err != nil || ds[0].Remaining != 7 || ds[1].Remaining != 3 {
				t.Fatalf("after settling 2 of 5: %+v, %v; want 7 left in the bucket, 3 in the window", ds, err)
			}
		})
	}
}

// TestSettleOnHungServer: a settlement that timed out on a SIGSTOPped server may still run
// when the server resumes, so the reservation is closed and the refund happens at most
// once; a settlement refused by the open circuit breaker never reached Redis, so the
// reservation stays open and settles once the server is back.
func TestSettleOnHungServer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	l := mustLimiter(t, client, redstream.TokenBucket(10, 0.001), Options{Timeout: DefaultTimeout, Logger: slog.New(slog.DiscardHandler),
		Breaker: redstream.BreakerOptions{Failures: 2, CoolDown: 200 * time.Millisecond}})
	first, err := l.ReserveN(ctx, "k", time.Time{}, 8)
	if err != nil || !first.Allowed {
		t.Fatalf("ReserveN(8) = %+v, %v", first, err)
	}
	second, err := l.ReserveN(ctx, "k", time.Time{}, 1)
	if err != nil || !second.Allowed {
		t.Fatalf("ReserveN(1) = %+v, %v", second, err)
	}
	resume := hang(t, client)
	err = first.Settle(ctx, 2)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redstream.ErrReservationDone) {
		t.Fatalf("Settle on a hung server = %v, want a timeout that closes the reservation", err)
	}
	if err := first.Settle(ctx, 2); !errors.Is(err, redstream.ErrReservationDone) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Settle = %v, want ErrReservationDone without a call", err)
	}
	// One more failure opens the breaker; then a settlement is refused before any call.
	_, _ = l.AllowN(ctx, "other", time.Time{}, 1)
	err = second.Settle(ctx, 0)
	if !errors.Is(err, redstream.ErrCircuitOpen) || errors.Is(err, redstream.ErrReservationDone) {
		t.Fatalf("Settle with the breaker open = %v, want ErrCircuitOpen and the reservation open", err)
	}
	resume()
	deadline := time.Now().Add(10 * time.Second)
	for err = second.Settle(ctx, 0); err != nil; err = second.Settle(ctx, 0) {
		if time.Now().After(deadline) || errors.Is(err, redstream.ErrReservationDone) {
			t.Fatalf("Settle after the server resumed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The first refund of 6 ran once or not at all (if its command was dropped); the
	// second gave back its 1.
	d, err := l.PeekN(ctx, "k", time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if left := d.Remaining + 1; left != 2 && left != 8 {
		t.Fatalf("%d tokens left after the settlements, want 8 (the timed-out refund ran once) or 2 (it never ran)", left)
	}
	t.Logf("%d tokens left: the timed-out refund %s", d.Remaining+1, map[bool]string{true: "ran once", false: "never ran"}[d.Remaining+1 == 8])
}
