package wasmcore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/wasmcore"
)

// TestReserveSettleMatchesMemory: reservations and their settlements in the module (its
// charge and settle exports) leave every key as the in-process engine's (core itself), for
// every algorithm and a multi-limit of all of them.
func TestReserveSettleMatchesMemory(t *testing.T) {
	ctx := context.Background()
	rt := conformanceRuntime(t)
	all := []redstream.Spec{
		redstream.TokenBucket(5, 1000),
		redstream.LeakyBucket(4, 500),
		redstream.SlidingWindow(7*time.Millisecond, 6),
		redstream.SlidingCounter(10*time.Millisecond, 5),
		redstream.FixedWindow(7*time.Millisecond, 6),
	}
	cases := map[string][]redstream.Spec{"multi": all}
	for _, s := range all {
		cases[string(s.Algorithm)] = []redstream.Spec{s}
	}
	for name, specs := range cases {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(name))))
			settled := 0
			for c := 0; c < 150; c++ {
				m, _ := memory.NewMultiLimiter(specs, memory.Options{})
				w, err := wasmcore.NewMultiLimiter(specs, wasmcore.Options{Runtime: rt})
				if err != nil {
					t.Fatal(err)
				}
				max := int64(1 << 40)
				for _, s := range specs {
					p, _ := s.Core()
					max = min(max, p.Max())
				}
				now := time.UnixMicro(1_900_000_000_000_000)
				for i, k := 0, rng.IntN(8); i < k; i++ {
					now = now.Add(time.Duration(rng.IntN(4000)) * time.Microsecond)
					n := 1 + rng.Int64N(max)
					dm, _ := m.AllowN(ctx, "k", now, n)
					dw, err := w.AllowN(ctx, "k", now, n)
					if err != nil || dm != dw {
						t.Fatalf("case %d: AllowN = %+v, %v; memory %+v", c, dw, err, dm)
					}
				}
				at := now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
				est, actual := 1+rng.Int64N(max), rng.Int64N(max+2)
				rm, err := m.ReserveN(ctx, "k", at, est)
				if err != nil {
					t.Fatal(err)
				}
				rw, err := w.ReserveN(ctx, "k", at, est)
				if err != nil || rw.Decision != rm.Decision {
					t.Fatalf("case %d: ReserveN = %+v, %v; memory %+v", c, rw, err, rm.Decision)
				}
				em, ew := rm.Settle(ctx, actual), rw.Settle(ctx, actual)
				if fmt.Sprint(em) != fmt.Sprint(ew) && !(errors.Is(em, redstream.ErrReservationDone) && errors.Is(ew, redstream.ErrReservationDone)) {
					t.Fatalf("case %d: Settle = %v; memory %v", c, ew, em)
				}
				if em == nil {
					settled++
				}
				for _, dt := range []time.Duration{0, 997 * time.Microsecond, 3 * time.Millisecond, 7 * time.Millisecond, 12 * time.Millisecond} {
					for n := int64(1); n <= max; n++ {
						dm, _ := m.AllowN(ctx, "k", at.Add(dt), n)
						dw, err := w.AllowN(ctx, "k", at.Add(dt), n)
						if err != nil || dm != dw {
							t.Fatalf("case %d: reserve %d settle %d, probe +%v n=%d: %+v, %v; memory %+v", c, est, actual, dt, n, dw, err, dm)
						}
					}
				}
			}
			if settled < 30 {
				t.Fatalf("only %d cases settled", settled)
			}
		})
	}
}
