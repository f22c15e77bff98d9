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
		if rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("unchanged ", i)) == 0 {
			n = o
		}
		old, next = append(old, o), append(next, n)
	}
	return old, next
}

// TestSuccessorMatchesMemory: across a change of specs, a wasm successor
// (wasmcore.Limiter.Successor, seeding in the module) and a memory successor
// (memory.Limiter.Successor, core itself) give the same decisions, request for request, for
// every algorithm that carries state, every strategy, one limit and two, with the previous
// limiters still deciding their own keys around the change. With TestCarryMemoryEqualsLua
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
		step := func(label string, l1, l2 redstream.Limiter) {
			now = now.Add(time.Duration(rapid.Int64Range(0, 800).Draw(r, label+" ms")) * time.Millisecond)
			key := rapid.SampledFrom(keys).Draw(r, label+" key")
			n := rapid.Int64Range(1, 3).Draw(r, label+" n")
			d1, err1 := l1.AllowN(ctx, key, now, n)
			d2, err2 := l2.AllowN(ctx, key, now, n)
			if (err1 == nil) != (err2 == nil) || d1 != d2 {
				r.Fatalf("%s at %v on %s, n=%d: memory %+v, %v; wasm %+v, %v", label, now, key, n, d1, err1, d2, err2)
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
