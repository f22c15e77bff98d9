package wasmcore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/wasmcore"
)

// carrySpecs draws m previous specs and the new ones a change carries them into (the same
// algorithm each; the same window for the window shape), with small limits so that keys
// fill up, and sometimes a spec that does not change.
func carrySpecs(rt *rapid.T, m int) (old, next []redstream.Spec) {
	for i := range m {
		alg := rapid.SampledFrom([]redstream.Algorithm{redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket,
			redstream.AlgorithmFixedWindow, redstream.AlgorithmSlidingCounter}).Draw(rt, fmt.Sprint("algorithm ", i))
		row, _ := core.Lookup(string(alg))
		var o, n redstream.Spec
		if row.Shape == core.Bucket {
			spec := func(label string) redstream.Spec {
				return redstream.Spec{Algorithm: alg, Capacity: float64(rapid.Int64Range(1, 12).Draw(rt, label+"capacity")),
					Rate: float64(rapid.Int64Range(1, 20).Draw(rt, label+"rate"))}
			}
			o, n = spec(fmt.Sprint("old ", i)), spec(fmt.Sprint("new ", i))
		} else {
			w := time.Duration(rapid.Int64Range(1, 5).Draw(rt, fmt.Sprint("window s ", i))) * time.Second
			o = redstream.Spec{Algorithm: alg, Window: w, Limit: rapid.Int64Range(1, 12).Draw(rt, fmt.Sprint("old limit ", i))}
			n = redstream.Spec{Algorithm: alg, Window: w, Limit: rapid.Int64Range(1, 12).Draw(rt, fmt.Sprint("new limit ", i))}
		}
		switch rapid.IntRange(0, 7).Draw(rt, fmt.Sprint("unchanged ", i)) {
		case 0:
			n = o
		case 1:
			// A limit whose state is a log carries only unchanged (coreops.CheckCarry).
			o = rapid.SampledFrom([]redstream.Spec{redstream.SlidingWindow(2*time.Second, 3), redstream.Concurrency(3, 2*time.Second)}).Draw(rt, fmt.Sprint("log spec ", i))
			n = o
		}
		old, next = append(old, o), append(next, n)
	}
	return old, next
}

// TestSuccessorMatchesMemory: across a change of specs, a wasm successor
// (wasmcore.Limiter.Successor, seeding in the module) and a memory successor
// (memory.Limiter.Successor, core itself) give the same decisions, request for request, for
// every algorithm that carries state (and the sliding log and concurrency limit, which
// carry only unchanged), every strategy, one limit and two, with the previous limiters still
// deciding their own keys around the change. The requests mix decisions, reservations (a
// reservation may be the first request on a key after the change, and must seed it as a
// decision does) and settlements of earlier reservations, each settled by the limiter that
// made it. With TestCarryMemoryEqualsLua
// in package redisbackend it makes memory = Lua = wasm for limit changes.
func TestSuccessorMatchesMemory(t *testing.T) {
	rt := conformanceRuntime(t)
	seeded := 0
	for range 10 {
		checkSuccessor(t, rt, &seeded)
	}
	if seeded < 300 {
		t.Fatalf("only %d cases carried state", seeded)
	}
}

// reserving is a limiter that also reserves (memory.Limiter, wasmcore.Limiter).
type reserving interface {
	redstream.Limiter
	ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error)
}

func checkSuccessor(t *testing.T, rt *wasmcore.Runtime, seeded *int) {
	ctx := context.Background()
	rapid.Check(t, func(r *rapid.T) {
		m := rapid.IntRange(1, 2).Draw(r, "limits")
		oldSpecs, newSpecs := carrySpecs(r, m)
		carry := rapid.SampledFrom([]core.Carry{core.CarryReset, core.CarryAsIs, core.CarryProportional}).Draw(r, "carry")
		memOld, err := memory.NewMultiLimiter(oldSpecs, memory.Options{})
		if err != nil {
			r.Fatal(err)
		}
		wasmOld, err := wasmcore.NewMultiLimiter(oldSpecs, wasmcore.Options{Runtime: rt})
		if err != nil {
			r.Fatal(err)
		}
		now := time.Unix(1_900_000_000, 0)
		keys := []string{"a", "b", "c"}
		var open [][2]*redstream.Reservation // admitted reservations not settled yet: memory's, wasm's
		step := func(label string, l1, l2 reserving) {
			now = now.Add(time.Duration(rapid.Int64Range(0, 800).Draw(r, label+" ms")) * time.Millisecond)
			key := rapid.SampledFrom(keys).Draw(r, label+" key")
			n := rapid.Int64Range(1, 3).Draw(r, label+" n")
			switch op := rapid.SampledFrom([]string{"allow", "allow", "reserve", "settle"}).Draw(r, label+" op"); {
			case op == "reserve":
				r1, err1 := l1.ReserveN(ctx, key, now, n)
				r2, err2 := l2.ReserveN(ctx, key, now, n)
				if (err1 == nil) != (err2 == nil) || (err1 == nil && r1.Decision != r2.Decision) {
					r.Fatalf("%s: reserve at %v on %s, n=%d: memory %+v, %v; wasm %+v, %v", label, now, key, n, r1, err1, r2, err2)
				}
				if err1 == nil && r1.Allowed {
					open = append(open, [2]*redstream.Reservation{r1, r2})
				}
			case op == "settle" && len(open) > 0:
				i := rapid.IntRange(0, len(open)-1).Draw(r, label+" reservation")
				actual := rapid.Int64Range(0, 4).Draw(r, label+" actual")
				err1, err2 := open[i][0].Settle(ctx, actual), open[i][1].Settle(ctx, actual)
				if err1 != nil || err2 != nil {
					r.Fatalf("%s: settle %d: memory %v; wasm %v", label, actual, err1, err2)
				}
				open = append(open[:i], open[i+1:]...)
			default:
				d1, err1 := l1.AllowN(ctx, key, now, n)
				d2, err2 := l2.AllowN(ctx, key, now, n)
				if (err1 == nil) != (err2 == nil) || d1 != d2 {
					r.Fatalf("%s at %v on %s, n=%d: memory %+v, %v; wasm %+v, %v", label, now, key, n, d1, err1, d2, err2)
				}
			}
		}
		for i := range rapid.IntRange(0, 20).Draw(r, "before") {
			step(fmt.Sprintf("before %d", i), memOld, wasmOld)
		}
		memNew, err1 := memOld.Successor(carry, newSpecs...)
		wasmNew, err2 := wasmOld.Successor(carry, newSpecs...)
		if (err1 == nil) != (err2 == nil) {
			r.Fatalf("Successor: memory %v, wasm %v", err1, err2)
		}
		if err1 != nil {
			if !errors.Is(err2, redstream.ErrInvalidConfig) {
				r.Fatalf("Successor: %v, want ErrInvalidConfig", err2)
			}
			return
		}
		if carry != core.CarryReset {
			*seeded++
		}
		for i := range rapid.IntRange(1, 30).Draw(r, "after") {
			if rapid.IntRange(0, 4).Draw(r, fmt.Sprint("old side ", i)) == 0 {
				step(fmt.Sprintf("old %d", i), memOld, wasmOld)
				continue
			}
			step(fmt.Sprintf("after %d", i), memNew, wasmNew)
		}
	})
}

// TestSuccessorErrors: a change the strategy cannot carry is refused with the reason, as
// by memory.Limiter.Successor.
func TestSuccessorErrors(t *testing.T) {
	rt := conformanceRuntime(t)
	old, err := wasmcore.NewLimiter(redstream.FixedWindow(time.Minute, 10), wasmcore.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		specs []redstream.Spec
		carry core.Carry
		want  string
	}{
		{[]redstream.Spec{redstream.FixedWindow(time.Hour, 10)}, core.CarryAsIs, "change of window"},
		{[]redstream.Spec{redstream.TokenBucket(10, 1)}, core.CarryProportional, "change of algorithm"},
		{[]redstream.Spec{redstream.FixedWindow(time.Minute, 10), redstream.FixedWindow(time.Hour, 10)}, core.CarryAsIs, "Successor of 2 specs"},
		{[]redstream.Spec{{Algorithm: redstream.AlgorithmSlidingWindow, Window: time.Minute, Limit: 10}}, core.CarryReset, "change of algorithm"},
	} {
		_, err := old.Successor(c.carry, c.specs...)
		if c.carry == core.CarryReset {
			if err != nil {
				t.Errorf("reset to %v: %v, want nil (reset always works)", c.specs, err)
			}
			continue
		}
		if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v by %v: %v, want ErrInvalidConfig naming %q", c.specs, c.carry, err, c.want)
		}
	}
}

// TestSuccessorReserveSeeds: a reservation that is the first request on a key after a
// change sees the carried state (seeded in the module, as a decision seeds it), and a
// multi-limiter whose unchanged limit is a sliding log or a concurrency limit has a
// successor, as memory's.
func TestSuccessorReserveSeeds(t *testing.T) {
	rt := conformanceRuntime(t)
	ctx := t.Context()
	now := time.Unix(1_900_000_000, 0)
	for _, unchanged := range []redstream.Spec{redstream.SlidingWindow(time.Hour, 50), redstream.Concurrency(50, time.Hour)} {
		t.Run(string(unchanged.Algorithm), func(t *testing.T) {
			old, err := wasmcore.NewMultiLimiter([]redstream.Spec{redstream.FixedWindow(time.Hour, 10), unchanged}, wasmcore.Options{Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if d, err := old.AllowN(ctx, "k", now, 1); err != nil || !d.Allowed {
					t.Fatalf("before the change: %+v, %v", d, err)
				}
			}
			next, err := old.Successor(core.CarryAsIs, redstream.FixedWindow(time.Hour, 20), unchanged)
			if err != nil {
				t.Fatalf("Successor with an unchanged %s: %v", unchanged.Algorithm, err)
			}
			// The reservation is refused by the unchanged concurrency limit (it does not
			// settle), so the successor of a sliding log reserves and the other decides.
			if unchanged.Algorithm == redstream.AlgorithmConcurrency {
				d, err := next.AllowN(ctx, "k", now, 3)
				if err != nil || !d.Allowed || d.Remaining != 13 {
					t.Fatalf("first decision of 3 after 10 -> 20 per hour (4 admitted, as-is): %+v, %v, want 13 remaining", d, err)
				}
				return
			}
			r, err := next.ReserveN(ctx, "k", now, 3)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Allowed || r.Remaining != 13 {
				t.Fatalf("first request after 10 -> 20 per hour (4 admitted, as-is) is a reservation of 3: %+v, want 13 remaining", r.Decision)
			}
		})
	}
	single, err := wasmcore.NewLimiter(redstream.TokenBucket(4, 0.001), wasmcore.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		single.AllowN(ctx, "k", now, 1)
	}
	next, err := single.Successor(core.CarryProportional, redstream.TokenBucket(8, 0.001))
	if err != nil {
		t.Fatal(err)
	}
	r, err := next.ReserveN(ctx, "k", now, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed {
		t.Errorf("bucket 4 -> 8 after 4 admitted, proportional: the first reservation was admitted (%+v), want denied", r.Decision)
	}
}
