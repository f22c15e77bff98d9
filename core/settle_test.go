package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redstream-go/redstream/internal/corekit"
)

// settleFunc settles c at now with actual: Limit.SettleState, or a mutant of it.
type settleFunc func(l Limit, s *State, c corekit.Charge, now, actual int64) error

func coreSettle(l Limit, s *State, c corekit.Charge, now, actual int64) error {
	_, err := l.settleState(s, c, now, actual)
	return err
}

// settleLimits returns limits of every algorithm that settles, with small parameters so
// that random traffic reaches every branch (full keys, window changes, expired entries).
func settleLimits(t *testing.T) []Limit {
	t.Helper()
	var out []Limit
	for _, a := range Algorithms() {
		if !a.Settles() {
			continue // the concurrency limit (TestAlgorithmSettles)
		}
		for _, p := range []Params{
			{Capacity: 5, Rate: 1000, Window: 7 * Millisecond, Limit: 6},
			{Capacity: 3.5, Rate: 333, Window: 10 * Millisecond, Limit: 3},
		} {
			l, err := a.New(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
	}
	return out
}

func cloneState(s State) State {
	c := s
	if s.Log != nil {
		l := *s.Log
		l.buf = append([]int64(nil), s.Log.buf...)
		c.Log = &l
	}
	return c
}

// sameState reports the first probe (a request of cost n at a time at or after from) on
// which a and b decide differently, or "" when none does: two states are the same when no
// later request can tell them apart.
func sameState(l Limit, a, b State, from int64) string {
	per := l.Period()
	for _, dt := range []int64{0, 1, 997, per / 3, per / 2, per - 1, per, per + 1, 2*per - 1, 2 * per} {
		for n := int64(1); n <= l.Max(); n++ {
			var da, db Decision
			var na, nb corekit.Next
			ea := l.checkState(&a, from+dt, n, &da, &na)
			eb := l.checkState(&b, from+dt, n, &db, &nb)
			if da != db || (ea == nil) != (eb == nil) {
				return fmt.Sprintf("at +%dµs n=%d: %+v, want %+v", dt, n, db, da)
			}
		}
	}
	return ""
}

// checkSettle runs random cases of the settlement property on l: from a state left by
// random traffic, reserving est at t0 and settling actual at ts >= t0 (no traffic between)
// leaves the state that admitting actual at t0 leaves (no request when actual is 0), as far
// as any request at or after ts can tell. It returns the first counterexample, or "".
func checkSettle(l Limit, settle settleFunc, seed uint64, cases int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	for c := 0; c < cases; c++ {
		var s State
		now := int64(1_000_000 + r.IntN(50_000))
		for i, k := 0, r.IntN(12); i < k; i++ {
			now += int64(r.IntN(int(l.Period()/2) + 1))
			var d Decision
			_ = l.StepState(&s, now, 1+r.Int64N(l.Max()), &d)
		}
		t0 := now + int64(r.IntN(3000))
		est, actual := 1+r.Int64N(l.Max()), r.Int64N(l.Max()+1)
		want := cloneState(s)
		if actual > 0 {
			var d Decision
			if err := l.StepState(&want, t0, actual, &d); err != nil || !d.Allowed {
				continue // the property speaks of an admitted actual cost
			}
		}
		got := cloneState(s)
		var d Decision
		if err := l.StepState(&got, t0, est, &d); err != nil || !d.Allowed {
			continue
		}
		ch := l.chargeOf(t0, est, &d)
		ts := t0
		if r.IntN(2) == 0 {
			ts += r.Int64N(2 * l.Period())
		}
		if err := settle(l, &got, ch, ts, actual); err != nil {
			return err.Error()
		}
		if diff := sameState(l, want, got, ts); diff != "" {
			return fmt.Sprintf("case %d: reserve %d at %d, settle %d at +%d: %s", c, est, t0, actual, ts-t0, diff)
		}
	}
	return ""
}

func TestSettleMatchesAllowActual(t *testing.T) {
	for i, l := range settleLimits(t) {
		t.Run(fmt.Sprintf("%s/%d", l.Name(), i%2), func(t *testing.T) {
			if !l.settles() {
				t.Fatalf("%s does not settle", l.Name())
			}
			if diff := checkSettle(l, coreSettle, uint64(i), 3000); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// TestSettleMutants: a settlement whose refund or charge is off by one unit, or that
// forgets the charge point, is caught by the property for every algorithm.
func TestSettleMutants(t *testing.T) {
	mutants := map[string]settleFunc{
		"refund one short": func(l Limit, s *State, c corekit.Charge, now, actual int64) error {
			return coreSettle(l, s, c, now, min64(c.N, actual+1))
		},
		"refund one more": func(l Limit, s *State, c corekit.Charge, now, actual int64) error {
			if actual < c.N && actual > 0 {
				actual--
			}
			return coreSettle(l, s, c, now, actual)
		},
		"charge one short": func(l Limit, s *State, c corekit.Charge, now, actual int64) error {
			if actual > c.N {
				actual--
			}
			return coreSettle(l, s, c, now, actual)
		},
		"charge point moved": func(l Limit, s *State, c corekit.Charge, now, actual int64) error {
			c.At += l.Period()
			return coreSettle(l, s, c, now, actual)
		},
	}
	for i, l := range settleLimits(t) {
		for name, m := range mutants {
			t.Run(fmt.Sprintf("%s/%d/%s", l.Name(), i%2, name), func(t *testing.T) {
				if checkSettle(l, m, uint64(i), 3000) == "" {
					t.Fatal("mutant survived 3000 cases")
				}
			})
		}
	}
}

func TestSettleErrors(t *testing.T) {
	l, err := Algorithms()[0].New(Params{Capacity: 3, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	var s State
	for _, tc := range []struct {
		name   string
		c      corekit.Charge
		now    int64
		actual int64
		want   error
	}{
		{"negative actual", corekit.Charge{At: 5, N: 2}, 10, -1, ErrInvalidCost},
		{"empty charge", corekit.Charge{At: 5}, 10, 1, ErrInvalidCost},
		{"bad time", corekit.Charge{At: 5, N: 2}, -1, 1, ErrInvalidTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.settleState(&s, tc.c, tc.now, tc.actual); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if s != (State{}) {
				t.Fatalf("state changed to %+v", s)
			}
		})
	}
}

// TestSettleBounds: a refund gives back at most what the reservation took, even after
// other traffic, and a charge never takes the key past full.
func TestSettleBounds(t *testing.T) {
	for i, l := range settleLimits(t) {
		t.Run(fmt.Sprintf("%s/%d", l.Name(), i%2), func(t *testing.T) {
			var s State
			var d Decision
			now := int64(5_000_000)
			if err := l.StepState(&s, now, 1, &d); err != nil || !d.Allowed {
				t.Fatalf("reserve: %+v, %v", d, err)
			}
			c := l.chargeOf(now, 1, &d)
			// Another request fills the key.
			if err := l.StepState(&s, now, l.Max()-1, &d); err != nil || !d.Allowed {
				t.Fatalf("fill: %+v, %v", d, err)
			}
			got, err := l.settleState(&s, c, now, 0)
			if err != nil || got != -1 {
				t.Fatalf("cancel = %d, %v; want -1", got, err)
			}
			// Exactly one unit is free again: the other request's units stay taken.
			if err := l.checkState(&s, now, 2, &d, new(corekit.Next)); err != nil || d.Allowed {
				t.Fatalf("cost 2 after the refund: %+v, %v; want denied", d, err)
			}
			if err := l.checkState(&s, now, 1, &d, new(corekit.Next)); err != nil || !d.Allowed {
				t.Fatalf("cost 1 after the refund: %+v, %v; want admitted", d, err)
			}
			// A second cancel of the same charge gives back nothing more than is left of it.
			again, _ := l.settleState(&s, c, now, 0)
			if again < -1 {
				t.Fatalf("second cancel = %d", again)
			}
			// A charge far above the limit fills the key and no more.
			var f State
			if err := l.StepState(&f, now, 1, &d); err != nil {
				t.Fatal(err)
			}
			c = l.chargeOf(now, 1, &d)
			got, err = l.settleState(&f, c, now, 10*l.Max())
			if err != nil || got != l.Max()-1 {
				t.Fatalf("charge = %d, %v; want %d", got, err, l.Max()-1)
			}
			if err := l.checkState(&f, now, 1, &d, new(corekit.Next)); err != nil || d.Allowed {
				t.Fatalf("after a full charge: %+v, %v; want denied", d, err)
			}
		})
	}
}

func TestAlgorithmSettles(t *testing.T) {
	for _, a := range Algorithms() {
		l, err := a.New(validParams(t, a))
		if err != nil {
			t.Fatal(err)
		}
		// Every rate algorithm settles; a concurrency limit's units come back by releasing
		// their lease instead.
		want := a.Name != "concurrency"
		if a.Settles() != l.settles() || a.Settles() != want {
			t.Fatalf("%s: Algorithm.Settles = %v, Limit.Settles = %v; want %v", a.Name, a.Settles(), l.settles(), want)
		}
	}
	if (Algorithm{Name: "nope"}).Settles() {
		t.Fatal("an unregistered algorithm settles")
	}
}
