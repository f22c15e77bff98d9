package memory_test

import (
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/memory"
)

var carryNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// admit returns how many of n requests of cost 1 l admits for key at carryNow.
func admit(t *testing.T, l redstream.Limiter, key string, n int) int {
	t.Helper()
	got := 0
	for range n {
		d, err := l.AllowN(t.Context(), key, carryNow, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}

// TestSuccessorReserveSeeds: a reservation that is the first request on a key after a
// change seeds the key from the previous limiter exactly as a decision does, once, for a
// single limit (a fixed window, and a token bucket whose predecessor decides lock-free) and
// a multi-limit.
func TestSuccessorReserveSeeds(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name      string
		old, next []redstream.Spec
		c         core.Carry
		used      int   // requests admitted before the change
		estimate  int64 // the reservation's estimate, the first request after the change
		allowed   bool
		remaining int64 // the reservation's Remaining
		actual    int64 // the settlement's actual cost
		after     int   // admitted after the settlement (of 40)
	}{
		{"fixed window raised, as-is", []redstream.Spec{redstream.FixedWindow(time.Hour, 10)}, []redstream.Spec{redstream.FixedWindow(time.Hour, 20)},
			core.CarryAsIs, 4, 3, true, 13, 1, 15},
		{"fixed window lowered, proportional", []redstream.Spec{redstream.FixedWindow(time.Hour, 20)}, []redstream.Spec{redstream.FixedWindow(time.Hour, 10)},
			core.CarryProportional, 10, 2, true, 3, 2, 3},
		{"token bucket raised, as-is", []redstream.Spec{redstream.TokenBucket(4, 0.001)}, []redstream.Spec{redstream.TokenBucket(8, 0.001)},
			core.CarryAsIs, 4, 4, true, 0, 4, 0},
		{"multi, bucket consumed, proportional", []redstream.Spec{redstream.TokenBucket(4, 0.001), redstream.FixedWindow(time.Hour, 100)},
			[]redstream.Spec{redstream.TokenBucket(8, 0.001), redstream.FixedWindow(time.Hour, 100)}, core.CarryProportional, 4, 1, false, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := memory.NewMultiLimiter(tc.old, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := admit(t, old, "k", tc.used); got != tc.used {
				t.Fatalf("before the change: %d admitted, want %d", got, tc.used)
			}
			next, err := old.Successor(tc.c, tc.next...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := next.ReserveN(ctx, "k", carryNow, tc.estimate)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != tc.allowed || r.Remaining != tc.remaining {
				t.Fatalf("reservation of %d: %+v, want allowed %v with %d remaining", tc.estimate, r.Decision, tc.allowed, tc.remaining)
			}
			if r.Allowed {
				if err := r.Settle(ctx, tc.actual); err != nil {
					t.Fatal(err)
				}
			}
			if got := admit(t, next, "k", 40); got != tc.after {
				t.Errorf("after the reservation: %d admitted, want %d (seeded once)", got, tc.after)
			}
		})
	}
}

// TestSuccessorReserveTooLarge: a request the step refuses (a cost above the limit) seeds
// nothing: the key is seeded by the first request that can be decided, at its time.
func TestSuccessorReserveTooLarge(t *testing.T) {
	ctx := t.Context()
	old, _ := memory.NewLimiter(redstream.TokenBucket(2, 1), memory.Options{})
	admit(t, old, "k", 2)
	next, err := old.Successor(core.CarryAsIs, redstream.TokenBucket(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.ReserveN(ctx, "k", carryNow, 2); err == nil {
		t.Fatal("a reservation of 2 on a bucket of 1 was not refused")
	}
	if n := next.TrackedKeys(); n != 0 {
		t.Fatalf("a refused reservation seeded the key: %d keys held", n)
	}
	// At +600ms, 1.4 s of the old bucket's debt is left: 2 units of 1 s, carried as one of
	// 500ms (the new burst): 500ms to wait.
	d, err := next.AllowN(ctx, "k", carryNow.Add(600*time.Millisecond), 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Errorf("first decision after the refused reservation: %+v, want denied for 500ms (seeded then)", d)
	}
}

// TestSuccessorUnchangedLog: a multi-limiter whose unchanged limit is a sliding log or a
// concurrency limit can have a successor that changes its other limit; the unchanged
// limit's log goes on as it is, and is the successor's own copy (the previous limiter's
// log does not see the successor's requests).
func TestSuccessorUnchangedLog(t *testing.T) {
	for _, tc := range []struct {
		name      string
		unchanged redstream.Spec
	}{
		{"sliding log", redstream.SlidingWindow(time.Hour, 5)},
		{"concurrency", redstream.Concurrency(5, time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := memory.NewMultiLimiter([]redstream.Spec{tc.unchanged, redstream.FixedWindow(time.Hour, 10)}, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			admit(t, old, "k", 3)
			for _, c := range []core.Carry{core.CarryAsIs, core.CarryProportional} {
				next, err := old.Successor(c, tc.unchanged, redstream.FixedWindow(time.Hour, 20))
				if err != nil {
					t.Fatalf("Successor(%v) with an unchanged %s: %v", c, tc.name, err)
				}
				if got := admit(t, next, "k", 10); got != 2 {
					t.Errorf("%v: the successor admitted %d, want the 2 the unchanged log had left", c, got)
				}
			}
			if got := admit(t, old, "k", 10); got != 2 {
				t.Errorf("the previous limiter admitted %d after its successors, want its own 2", got)
			}
			if _, err := old.Successor(core.CarryAsIs, redstream.SlidingWindow(time.Hour, 6), redstream.FixedWindow(time.Hour, 20)); err == nil && tc.name == "sliding log" {
				t.Error("a changed sliding log was carried as-is")
			}
		})
	}
}
