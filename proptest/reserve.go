package proptest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"pgregory.net/rapid"
)

// reserver is what TestReserver needs of an engine's limiter: ReserveN (memory.Limiter,
// redisbackend.Limiter, wasmcore.Limiter).
type reserver interface {
	redstream.Limiter
	ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error)
}

// TestReserver runs the reservation suite on the limiters f returns (they must have a
// ReserveN method): one to three limits of random algorithms on one key, random traffic,
// then reservations of random estimates at explicit times settled at random actual costs
// (or cancelled, or settled twice), each checked against core's model (the engine's
// decision, then ChargeOf and SettleState on the model's states), and every later decision
// compared with the model's. A denied reservation must take nothing from any limit; a
// settled one must refuse a second settlement with ErrReservationDone.
func TestReserver(t *testing.T, f MultiFactory, o Options) {
	t.Helper()
	n := CheckReserver(t, f, o.checks(), o.maxSteps())
	t.Logf("reserve: %d cases", n)
}

// CheckReserver runs at least checks cases of the reservation suite and returns the
// number run. t may be any rapid.TB.
func CheckReserver(t rapid.TB, f MultiFactory, checks, maxSteps int) int {
	t.Helper()
	return repeat(t, checks, func(rt *rapid.T) {
		k := rapid.IntRange(1, 3).Draw(rt, "limits")
		specs := make([]redstream.Spec, k)
		mm := &multiModel{}
		limit := int64(1 << 62)
		for i := range specs {
			alg := rapid.SampledFrom(settling()).Draw(rt, fmt.Sprintf("alg%d", i))
			specs[i] = drawSpec(rt, alg, fmt.Sprintf("spec%d", i))
			p, err := specs[i].Core()
			if err != nil {
				rt.Fatalf("generated an invalid spec %v: %v", specs[i], err)
			}
			mm.limits = append(mm.limits, newLimitModel(p))
			limit = min(limit, p.Max())
		}
		l, err := f(specs)
		if err != nil {
			rt.Fatalf("factory(%v): %v", specs, err)
		}
		r, ok := l.(reserver)
		if !ok {
			rt.Fatalf("%T has no ReserveN method", l)
		}
		runReserver(rt, r, mm, limit, period(specs[0]), maxSteps)
	})
}

// runReserver drives one case: requests and reservations on one key, each compared with
// the model.
func runReserver(rt *rapid.T, l reserver, mm *multiModel, limit, unit int64, maxSteps int) {
	ctx := context.Background()
	key := casePrefix() + "r"
	now := t0 + rapid.Int64Range(0, 1000*unit).Draw(rt, "start")
	steps := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		now += rapid.SampledFrom([]int64{0, 1, unit / 2, unit, 3 * unit}).Draw(rt, "dt")
		at := time.UnixMicro(now)
		n := rapid.Int64Range(1, limit).Draw(rt, "n")
		if !rapid.Bool().Draw(rt, "reserve") {
			want, _ := mm.decide(key, at, n)
			got, err := l.AllowN(ctx, key, at, n)
			if err != nil || got != decisionOf(want) {
				rt.Fatalf("step %d: AllowN(%d) at %d = %+v, %v; model %+v", i, n, now, got, err, want)
			}
			continue
		}
		want, _ := mm.decide(key, at, n)
		res, err := l.ReserveN(ctx, key, at, n)
		if err != nil || res.Decision != decisionOf(want) {
			rt.Fatalf("step %d: ReserveN(%d) at %d = %+v, %v; model %+v", i, n, now, res, err, want)
		}
		actual := rapid.Int64Range(0, limit+2).Draw(rt, "actual")
		err = res.Settle(ctx, actual)
		if !want.Allowed {
			if !errors.Is(err, redstream.ErrReservationDone) {
				rt.Fatalf("step %d: Settle of a denied reservation = %v, want ErrReservationDone", i, err)
			}
			continue
		}
		if err != nil {
			rt.Fatalf("step %d: Settle(%d) = %v", i, actual, err)
		}
		mm.settle(key, now, actual)
		if err := res.Settle(ctx, actual); !errors.Is(err, redstream.ErrReservationDone) {
			rt.Fatalf("step %d: a second Settle = %v, want ErrReservationDone", i, err)
		}
	}
}

// settle applies to the model what a reservation admitted at now and settled at actual at
// the same time does: each limit's charge, from the decision the admission got, settled on
// the limit's state.
func (m *multiModel) settle(key string, now, actual int64) {
	for _, lm := range m.limits {
		// lm.last is the charge of the admission just made (limitModel.decide).
		if _, err := coreops.SettleState(lm.p, lm.states[key], lm.last, now, actual); err != nil {
			panic(fmt.Sprintf("proptest: the model's settlement failed: %v", err))
		}
	}
}

// settling returns the algorithms that settle reservations (core.Algorithm.Settles): every
// rate algorithm, not the concurrency limit.
func settling() []redstream.Algorithm {
	var out []redstream.Algorithm
	for _, a := range redstream.Algorithms() {
		if ca, err := core.Lookup(string(a)); err == nil && ca.Settles() {
			out = append(out, a)
		}
	}
	return out
}
