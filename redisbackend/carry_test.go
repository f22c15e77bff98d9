package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
)

// carryPair draws a previous spec and a new one that a change can carry (the same
// algorithm; the same window for the window algorithms), with small limits so that keys
// fill up.
func carryPair(rt *rapid.T) (redstream.Spec, redstream.Spec) {
	alg := rapid.SampledFrom([]redstream.Algorithm{redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket,
		redstream.AlgorithmFixedWindow, redstream.AlgorithmSlidingCounter}).Draw(rt, "algorithm")
	row, _ := core.Lookup(string(alg))
	if row.Shape == core.Bucket {
		spec := func(label string) redstream.Spec {
			return redstream.Spec{Algorithm: alg, Capacity: float64(rapid.Int64Range(1, 12).Draw(rt, label+"capacity")),
				Rate: float64(rapid.Int64Range(1, 20).Draw(rt, label+"rate"))}
		}
		return spec("old "), spec("new ")
	}
	w := time.Duration(rapid.Int64Range(1, 5).Draw(rt, "window s")) * time.Second
	return redstream.Spec{Algorithm: alg, Window: w, Limit: rapid.Int64Range(1, 12).Draw(rt, "old limit")},
		redstream.Spec{Algorithm: alg, Window: w, Limit: rapid.Int64Range(1, 12).Draw(rt, "new limit")}
}

// TestCarryMemoryEqualsLua: across a change of spec, a memory successor
// (memory.Limiter.Successor) and a Redis limiter with Options.Previous (carry.lua, and
// reserve.lua in carry.lua's layout) give the same decisions, request for request, on a real
// redis-server, for every algorithm that carries state and both strategies, with the
// previous limiter still deciding its own keys before the change. The requests mix
// decisions, reservations (a reservation may be the first request on a key after the
// change, and must seed it as a decision does) and settlements of earlier reservations,
// made before or after the change, each settled by the limiter that made it.
func TestCarryMemoryEqualsLua(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	type reserving interface {
		redstream.Limiter
		ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error)
	}
	rapid.Check(t, func(rt *rapid.T) {
		oldSpec, newSpec := carryPair(rt)
		carry := rapid.SampledFrom([]core.Carry{core.CarryAsIs, core.CarryProportional}).Draw(rt, "carry")
		prefix := uniq("carry")
		memOld, err := memory.NewLimiter(oldSpec, memory.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		redOld, err := NewLimiter(c, oldSpec, Options{Timeout: 5 * time.Second, KeyPrefix: prefix, DisableLocalDenials: true})
		if err != nil {
			rt.Fatal(err)
		}
		now := time.Unix(1_900_000_000, 0)
		keys := []string{"a", "b", "c{x}"}
		var open [][2]*redstream.Reservation // admitted reservations not settled yet: memory's, Redis's
		step := func(label string, l1, l2 reserving) {
			now = now.Add(time.Duration(rapid.Int64Range(0, 800).Draw(rt, label+" ms")) * time.Millisecond)
			key := rapid.SampledFrom(keys).Draw(rt, label+" key")
			switch op := rapid.SampledFrom([]string{"allow", "allow", "reserve", "settle"}).Draw(rt, label+" op"); {
			case op == "reserve":
				n := rapid.Int64Range(1, 2).Draw(rt, label+" estimate")
				r1, err1 := l1.ReserveN(ctx, key, now, n)
				r2, err2 := l2.ReserveN(ctx, key, now, n)
				if (err1 == nil) != (err2 == nil) || (err1 == nil && r1.Decision != r2.Decision) {
					rt.Fatalf("%s: reserve %d at %v on %s: memory %+v, %v; Redis %+v, %v", label, n, now, key, r1, err1, r2, err2)
				}
				if err1 == nil && r1.Allowed {
					open = append(open, [2]*redstream.Reservation{r1, r2})
				}
			case op == "settle" && len(open) > 0:
				i := rapid.IntRange(0, len(open)-1).Draw(rt, label+" reservation")
				actual := rapid.Int64Range(0, 4).Draw(rt, label+" actual")
				err1, err2 := open[i][0].Settle(ctx, actual), open[i][1].Settle(ctx, actual)
				if err1 != nil || err2 != nil {
					rt.Fatalf("%s: settle %d: memory %v; Redis %v", label, actual, err1, err2)
				}
				open = append(open[:i], open[i+1:]...)
			default:
				n := rapid.Int64Range(1, 2).Draw(rt, label+" cost") // a cost above the limit seeds nothing
				d1, err1 := l1.AllowN(ctx, key, now, n)
				d2, err2 := l2.AllowN(ctx, key, now, n)
				if (err1 == nil) != (err2 == nil) || d1 != d2 {
					rt.Fatalf("%s: %d at %v on %s: memory %+v, %v; Redis %+v, %v", label, n, now, key, d1, err1, d2, err2)
				}
			}
		}
		for i := range rapid.IntRange(0, 20).Draw(rt, "before") {
			step(fmt.Sprintf("before %d", i), memOld, redOld)
		}
		memNew, err := memOld.Successor(carry, newSpec)
		if err != nil {
			rt.Fatal(err)
		}
		redNew, err := NewLimiter(c, newSpec, Options{Timeout: 5 * time.Second, KeyPrefix: prefix, DisableLocalDenials: true,
			Previous: []redstream.Spec{oldSpec}, Carry: carry})
		if err != nil {
			rt.Fatal(err)
		}
		if oldSpec == newSpec {
			// An unchanged spec keeps its Redis key, so the previous limiter's later writes
			// (settling its reservations) reach the new limiter there, while a memory
			// successor holds a copy taken at its first decision on the key: the engines
			// differ by design (docs/limiters.md), so earlier reservations stay unsettled.
			open = nil
		}
		for i := range rapid.IntRange(1, 30).Draw(rt, "after") {
			step(fmt.Sprintf("after %d", i), memNew, redNew)
		}
	})
}

// TestCarryOnce: the first decision under the new spec seeds the key from the previous
// spec's key, which stays for the processes still deciding with the previous spec, and
// never again, on a real redis-server and a 3-master cluster (old and new keys share the
// user key's hash tag), for a single limit and a multi-limit.
func TestCarryOnce(t *testing.T) {
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			now := time.Unix(1_900_000_000, 0)
			prefix := uniq("carryonce")
			old := redstream.FixedWindow(time.Hour, 10)
			l10, _ := NewLimiter(c, old, Options{Timeout: 5 * time.Second, KeyPrefix: prefix, DisableLocalDenials: true})
			admitted(t, l10, "user{1}", now, 4)
			l20, err := NewLimiter(c, redstream.FixedWindow(time.Hour, 20), Options{Timeout: 5 * time.Second, KeyPrefix: prefix,
				Previous: []redstream.Spec{old}, Carry: core.CarryAsIs})
			if err != nil {
				t.Fatal(err)
			}
			if got := admitted(t, l20, "user{1}", now, 1); got != 1 {
				t.Fatalf("first decision under the new spec: %d admitted", got)
			}
			// The previous spec's key is kept and counts on: 6 more fill it.
			if got := admitted(t, l10, "user{1}", now, 10); got != 6 {
				t.Errorf("the previous spec admitted %d after the change, want the 6 its key had left", got)
			}
			// The new key was seeded once (4 carried, 1 admitted): 15 left, whatever the
			// previous key did since.
			if got := admitted(t, l20, "user{1}", now, 30); got != 15 {
				t.Errorf("raised 10 -> 20 per hour after 4 admitted: %d more admitted, want 15 (as-is, seeded once)", got)
			}

			// A multi-limit: limit 0 changes, limit 1 does not.
			mo := []redstream.Spec{redstream.TokenBucket(4, 0.001), redstream.FixedWindow(time.Hour, 100)}
			m1, _ := NewMultiLimiter(c, mo, Options{Timeout: 5 * time.Second, KeyPrefix: prefix + ":m"})
			admitted(t, m1, "k", now, 4)
			mn := []redstream.Spec{redstream.TokenBucket(8, 0.001), mo[1]}
			m2, err := NewMultiLimiter(c, mn, Options{Timeout: 5 * time.Second, KeyPrefix: prefix + ":m", Previous: []redstream.Spec{mo[0], {}}, Carry: core.CarryProportional})
			if err != nil {
				t.Fatal(err)
			}
			if got := admitted(t, m2, "k", now, 20); got != 0 {
				t.Errorf("bucket 4 -> 8 after 4 admitted, proportional: %d admitted, want 0 (all of it consumed)", got)
			}
		})
	}
}

// TestCarryReserve: a reservation that is the first request on a key after a change seeds
// the key from the previous spec's key exactly as a decision does (reserve.lua in carry.lua's
// layout), and settles on the new key, on a real redis-server and a 3-master cluster, for a
// single limit and a multi-limit.
func TestCarryReserve(t *testing.T) {
	for _, b := range backends[1:] {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			now := time.Unix(1_900_000_000, 0)
			prefix := uniq("carryreserve")
			old := redstream.FixedWindow(time.Hour, 10)
			l10, _ := NewLimiter(c, old, Options{Timeout: 5 * time.Second, KeyPrefix: prefix, DisableLocalDenials: true})
			admitted(t, l10, "user{1}", now, 4)
			l20, err := NewLimiter(c, redstream.FixedWindow(time.Hour, 20), Options{Timeout: 5 * time.Second, KeyPrefix: prefix,
				Previous: []redstream.Spec{old}, Carry: core.CarryAsIs})
			if err != nil {
				t.Fatal(err)
			}
			r, err := l20.ReserveN(t.Context(), "user{1}", now, 3)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Allowed || r.Remaining != 13 {
				t.Fatalf("first request after 10 -> 20 per hour (4 admitted, as-is) is a reservation of 3: %+v, want allowed with 13 remaining", r.Decision)
			}
			if err := r.Settle(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			// 4 carried and 1 used: 15 left, and the previous key is not seeded again.
			if got := admitted(t, l20, "user{1}", now, 30); got != 15 {
				t.Errorf("after the reservation settled at 1: %d admitted, want 15", got)
			}

			// A multi-limit: limit 0 changes, limit 1 does not and keeps its key.
			mo := []redstream.Spec{redstream.TokenBucket(4, 0.001), redstream.FixedWindow(time.Hour, 100)}
			m1, _ := NewMultiLimiter(c, mo, Options{Timeout: 5 * time.Second, KeyPrefix: prefix + ":m"})
			admitted(t, m1, "k", now, 4)
			mn := []redstream.Spec{redstream.TokenBucket(8, 0.001), mo[1]}
			m2, err := NewMultiLimiter(c, mn, Options{Timeout: 5 * time.Second, KeyPrefix: prefix + ":m", Previous: []redstream.Spec{mo[0], {}}, Carry: core.CarryProportional})
			if err != nil {
				t.Fatal(err)
			}
			r, err = m2.ReserveN(t.Context(), "k", now, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				t.Errorf("bucket 4 -> 8 after 4 admitted, proportional: a reservation was admitted (%+v), want denied (all of it consumed)", r.Decision)
			}
		})
	}
}

func admitted(t *testing.T, l redstream.Limiter, key string, at time.Time, n int) int {
	t.Helper()
	got := 0
	for range n {
		d, err := l.AllowN(t.Context(), key, at, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}

// TestCarryErrors: the changes that cannot carry state are errors wrapping
// ErrInvalidConfig, naming Previous.
func TestCarryErrors(t *testing.T) {
	c := redistest.Client(t)
	fw := redstream.FixedWindow(time.Minute, 10)
	for _, tc := range []struct {
		name  string
		specs []redstream.Spec
		o     Options
	}{
		{"algorithm", []redstream.Spec{fw}, Options{Previous: []redstream.Spec{redstream.TokenBucket(10, 1)}, Carry: core.CarryAsIs}},
		{"window", []redstream.Spec{fw}, Options{Previous: []redstream.Spec{redstream.FixedWindow(time.Hour, 10)}, Carry: core.CarryAsIs}},
		{"sliding log", []redstream.Spec{redstream.SlidingWindow(time.Minute, 5)}, Options{Previous: []redstream.Spec{redstream.SlidingWindow(time.Minute, 10)}, Carry: core.CarryAsIs}},
		{"count", []redstream.Spec{fw}, Options{Previous: []redstream.Spec{fw, fw}, Carry: core.CarryAsIs}},
		{"strategy", []redstream.Spec{fw}, Options{Previous: []redstream.Spec{fw}, Carry: core.Carry(9)}},
		{"java", []redstream.Spec{redstream.TokenBucket(10, 1)}, Options{Previous: []redstream.Spec{redstream.TokenBucket(5, 1)}, Carry: core.CarryAsIs, JavaCompatible: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if len(tc.specs) == 1 {
				_, err = NewLimiter(c, tc.specs[0], tc.o)
			} else {
				_, err = NewMultiLimiter(c, tc.specs, tc.o)
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}

var _ rueidis.Client // the backends' type
