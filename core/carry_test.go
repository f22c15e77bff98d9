package core_test

import (
	"errors"
	"testing"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

func mustLimit(t *testing.T, name string, p core.Params) core.Limit {
	t.Helper()
	a, err := core.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSeedState: each strategy's seeded state, per shape, on worked examples.
func TestSeedState(t *testing.T) {
	const now = 1_000_000_000
	// Token bucket 10 per 10 s (T = 1 s), 6 consumed: TAT = now + 6 s.
	tb10 := mustLimit(t, "token-bucket", core.Params{Capacity: 10, Rate: 1})
	tb20 := mustLimit(t, "token-bucket", core.Params{Capacity: 20, Rate: 2}) // T = 0.5 s
	tb5 := mustLimit(t, "token-bucket", core.Params{Capacity: 5, Rate: 1})
	fw10 := mustLimit(t, "fixed", core.Params{Window: 60e6, Limit: 10})
	fw20 := mustLimit(t, "fixed", core.Params{Window: 60e6, Limit: 20})
	fw4 := mustLimit(t, "fixed", core.Params{Window: 60e6, Limit: 4})
	sc10 := mustLimit(t, "sliding-counter", core.Params{Window: 60e6, Limit: 10})
	sc3 := mustLimit(t, "sliding-counter", core.Params{Window: 60e6, Limit: 3})
	bucket := core.State{Words: [3]int64{now + 6e6 - 1}}
	window := core.State{Words: [3]int64{960_000_000, 6}}
	counter := core.State{Words: [3]int64{960_000_000, 6, 9}}
	for _, tc := range []struct {
		name     string
		from, to core.Limit
		old      core.State
		c        core.Carry
		want     [3]int64
	}{
		{"bucket reset", tb10, tb20, bucket, core.CarryReset, [3]int64{}},
		{"bucket as-is raise", tb10, tb20, bucket, core.CarryAsIs, [3]int64{now + 6*5e5}},
		{"bucket proportional raise", tb10, tb20, bucket, core.CarryProportional, [3]int64{now + 12*5e5}},
		{"bucket as-is lower", tb10, tb5, bucket, core.CarryAsIs, [3]int64{now + 5e6}},
		{"bucket proportional lower", tb10, tb5, bucket, core.CarryProportional, [3]int64{now + 3e6}},
		{"bucket earned back", tb10, tb20, core.State{Words: [3]int64{now}}, core.CarryAsIs, [3]int64{}},
		{"window as-is raise", fw10, fw20, window, core.CarryAsIs, [3]int64{960_000_000, 6}},
		{"window proportional raise", fw10, fw20, window, core.CarryProportional, [3]int64{960_000_000, 12}},
		{"window as-is lower", fw10, fw4, window, core.CarryAsIs, [3]int64{960_000_000, 4}},
		{"window proportional lower", fw10, fw4, window, core.CarryProportional, [3]int64{960_000_000, 3}},
		{"counter proportional lower", sc10, sc3, counter, core.CarryProportional, [3]int64{960_000_000, 2, 3}},
		{"counter as-is lower", sc10, sc3, counter, core.CarryAsIs, [3]int64{960_000_000, 3, 3}},
		{"refused pair resets", fw10, tb10, window, core.CarryAsIs, [3]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := coreops.SeedState(tc.to, tc.from, tc.old, now, tc.c)
			if got.Words != tc.want || got.Log != nil {
				t.Errorf("SeedState = %v, want %v", got.Words, tc.want)
			}
		})
	}
}

// TestCheckCarry: the pairs and strategies a change cannot carry are errors wrapping
// ErrInvalidConfig; reset is always possible, and so is an unchanged limit of any algorithm.
func TestCheckCarry(t *testing.T) {
	fw := mustLimit(t, "fixed", core.Params{Window: 60e6, Limit: 10})
	fwLong := mustLimit(t, "fixed", core.Params{Window: 120e6, Limit: 10})
	sl := mustLimit(t, "sliding", core.Params{Window: 60e6, Limit: 10})
	sl2 := mustLimit(t, "sliding", core.Params{Window: 60e6, Limit: 20})
	tb := mustLimit(t, "token-bucket", core.Params{Capacity: 10, Rate: 1})
	big := mustLimit(t, "fixed", core.Params{Window: 60e6, Limit: core.MaxCount})
	big2 := mustLimit(t, "fixed", core.Params{Window: 60e6, Limit: core.MaxCount - 1})
	cc := mustLimit(t, "concurrency", core.Params{Window: 30e6, Limit: 5})
	cc2 := mustLimit(t, "concurrency", core.Params{Window: 30e6, Limit: 8})
	for _, tc := range []struct {
		name     string
		from, to core.Limit
		c        core.Carry
		ok       bool
	}{
		{"reset across algorithms", tb, fw, core.CarryReset, true},
		{"as-is", fw, fw, core.CarryAsIs, true},
		{"algorithm change", tb, fw, core.CarryAsIs, false},
		{"window change", fw, fwLong, core.CarryProportional, false},
		{"sliding log", sl, sl2, core.CarryAsIs, false},
		{"unchanged sliding log", sl, sl, core.CarryAsIs, true},
		{"unchanged sliding log, proportional", sl2, sl2, core.CarryProportional, true},
		{"unchanged concurrency limit", cc, cc, core.CarryAsIs, true},
		{"changed concurrency limit", cc, cc2, core.CarryAsIs, false},
		{"unchanged, unknown strategy", sl, sl, core.Carry(7), false},
		{"unbuilt limits", core.Limit{}, core.Limit{}, core.CarryAsIs, false},
		{"proportional overflow", big2, big, core.CarryProportional, false},
		{"unchanged large limit, proportional", big, big, core.CarryProportional, true},
		{"as-is of large limits", big2, big, core.CarryAsIs, true},
		{"unknown strategy", fw, fw, core.Carry(7), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := coreops.CheckCarry(tc.to, tc.from, tc.c)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, core.ErrInvalidConfig)) {
				t.Errorf("CheckCarry = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestParseCarry: the names round-trip and an unknown one is an error.
func TestParseCarry(t *testing.T) {
	for _, c := range []core.Carry{core.CarryReset, core.CarryAsIs, core.CarryProportional} {
		got, err := core.ParseCarry(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCarry(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := core.ParseCarry("additive"); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("ParseCarry(additive) = %v, want ErrInvalidConfig", err)
	}
	if s := core.Carry(9).String(); s != "Carry(9)" {
		t.Errorf("Carry(9).String() = %q", s)
	}
}

// TestSeedEveryAlgorithm: every row of the registry has a Seed of its State.Words length
// (or none), so every engine's carry table covers it.
func TestSeedEveryAlgorithm(t *testing.T) {
	for _, a := range core.Algorithms() {
		if s := coreops.SeedWords(a); s != "" && len(s) != a.Words {
			t.Errorf("%s: Seed %q for %d words", a.Name, s, a.Words)
		}
	}
}
