// Package proptest holds redstream's exported conformance suites, in the style of
// testing/fstest.TestFS: given a factory for an engine, a suite generates random operation
// sequences with pgregory.net/rapid (keys, costs, time steps including backwards steps, exact
// boundaries and long gaps, parameter sets) and checks every answer against the reference
// model built on package core. Every engine's tests call these suites, and the redstream CLI
// runs them against any Redis-compatible server.
//
// Contracts the suites check, beyond equality with core:
//   - Errors: the same sentinel (ErrEmptyKey, ErrInvalidCost, ErrCostTooLarge,
//     ErrInvalidTime) for the same bad input, checked with errors.Is.
//   - Decisions are compared field by field, with explicit times (never the engine's clock).
//   - Remaining is never negative, in the engine's decision and in the model's.
//   - Set deduplicator: exact answers; UniqueCount is the number of distinct elements.
//   - Bloom deduplicator: exactly the answers of a filter over core.Bloom positions with the
//     spec's sizing and shards; UniqueCount counts the adds (MarkSeen or CheckAndMark) that
//     set at least one bit; Clear resets it to 0.
//   - Windowed deduplicator: core.WindowDedup at explicit times (TimedDeduplicator).
//   - Reservations ([TestReserver]): ReserveN decides as AllowN, a denial takes nothing from
//     any limit, Settle applies core's settlement once and refuses a second one with
//     ErrReservationDone.
//
// Factories must return an engine with fresh state on every call (for a Redis engine, use a
// fresh name or key prefix). Limiter keys are unique per generated case, so a limiter factory
// may share one backend between calls.
package proptest

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"pgregory.net/rapid"
)

// DefaultChecks is the default minimum number of generated cases per algorithm.
const DefaultChecks = 1000

// Options tunes a suite. The zero value runs every algorithm or strategy with DefaultChecks
// cases each.
type Options struct {
	// Checks is the minimum number of cases per algorithm (default DefaultChecks). With
	// go test -short it is divided by 5.
	Checks int
	// Algorithms restricts TestLimiter to these algorithms (default: all).
	Algorithms []redstream.Algorithm
	// Strategies restricts TestDeduplicator to these strategies (default: all).
	Strategies []redstream.DedupStrategy
	// MaxSteps is the largest number of operations in one case (default 60).
	MaxSteps int
}

func (o Options) checks() int {
	c := o.Checks
	if c <= 0 {
		c = DefaultChecks
	}
	if testing.Short() {
		c = (c + 4) / 5
	}
	return c
}

func (o Options) maxSteps() int {
	if o.MaxSteps <= 0 {
		return 60
	}
	return o.MaxSteps
}

// LimiterFactory returns a new limiter for spec.
type LimiterFactory func(spec redstream.Spec) (redstream.Limiter, error)

// MultiFactory returns a new all-or-nothing multi-limit limiter for specs.
type MultiFactory func(specs []redstream.Spec) (redstream.Limiter, error)

// DedupFactory returns a new deduplicator with empty state for spec.
type DedupFactory func(spec redstream.DedupSpec) (redstream.Deduplicator, error)

// TestLimiter runs the limiter suite for every algorithm in o (a subtest each).
func TestLimiter(t *testing.T, f LimiterFactory, o Options) {
	t.Helper()
	algs := o.Algorithms
	if len(algs) == 0 {
		algs = redstream.Algorithms()
	}
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			n := CheckLimiter(t, alg, f, o.checks())
			t.Logf("%s: %d cases", alg, n)
		})
	}
}

// TestMultiLimiter runs the multi-limit suite: one to three limits of random algorithms on
// one key, all-or-nothing.
func TestMultiLimiter(t *testing.T, f MultiFactory, o Options) {
	t.Helper()
	n := CheckMultiLimiter(t, f, o.checks(), o.maxSteps())
	t.Logf("multi: %d cases", n)
}

// TestDeduplicator runs the deduplicator suite for every strategy in o (a subtest each).
func TestDeduplicator(t *testing.T, f DedupFactory, o Options) {
	t.Helper()
	strats := o.Strategies
	if len(strats) == 0 {
		strats = []redstream.DedupStrategy{redstream.DedupSet, redstream.DedupBloom, redstream.DedupWindowed}
	}
	for _, s := range strats {
		t.Run(string(s), func(t *testing.T) {
			n := CheckDeduplicator(t, s, f, o.checks())
			t.Logf("%s: %d cases", s, n)
		})
	}
}

var (
	runNonce = rand.Uint32()
	caseSeq  atomic.Int64
)

// casePrefix returns a key prefix unique to this process run and case.
func casePrefix() string {
	return fmt.Sprintf("pt%08x:%d:", runNonce, caseSeq.Add(1))
}

// repeat runs prop until at least checks cases ran (rapid runs its -rapid.checks cases per
// Check call) or the test failed; it returns the number of cases run.
func repeat(t rapid.TB, checks int, prop func(*rapid.T)) int {
	t.Helper()
	cases := 0
	for cases < checks && !t.Failed() {
		before := cases
		rapid.Check(t, func(rt *rapid.T) {
			cases++
			prop(rt)
		})
		if cases == before {
			break
		}
	}
	return cases
}

// RapidChecks returns rapid's number of cases per Check call (its -rapid.checks flag).
func RapidChecks() int {
	if f := flag.Lookup("rapid.checks"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil {
			return n
		}
	}
	return 100
}

// CheckLimiter runs at least checks cases of the limiter suite for one algorithm and returns
// the number run. t may be any rapid.TB, so the suite runs outside go test too.
func CheckLimiter(t rapid.TB, alg redstream.Algorithm, f LimiterFactory, checks int) int {
	t.Helper()
	return repeat(t, checks, func(rt *rapid.T) {
		spec := drawSpec(rt, alg, "spec")
		p, err := spec.Core()
		if err != nil {
			rt.Fatalf("generated an invalid spec %v: %v", spec, err)
		}
		l, err := f(spec)
		if err != nil {
			rt.Fatalf("factory(%v): %v", spec, err)
		}
		m := newLimitModel(p)
		runLimiter(rt, l, spec, p.Max(), func(key string, now time.Time, n int64) (core.Decision, error) {
			return m.decide(key, now, n, true)
		}, 60)
	})
}

// CheckMultiLimiter runs at least checks cases of the multi-limit suite.
func CheckMultiLimiter(t rapid.TB, f MultiFactory, checks, maxSteps int) int {
	t.Helper()
	return repeat(t, checks, func(rt *rapid.T) {
		k := rapid.IntRange(1, 3).Draw(rt, "limits")
		specs := make([]redstream.Spec, k)
		mm := &multiModel{}
		limit := int64(1 << 62)
		for i := range specs {
			alg := rapid.SampledFrom(redstream.Algorithms()).Draw(rt, fmt.Sprintf("alg%d", i))
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
		runLimiter(rt, l, specs[0], limit, mm.decide, maxSteps)
	})
}

var sentinels = []error{redstream.ErrEmptyKey, redstream.ErrInvalidCost, redstream.ErrCostTooLarge, redstream.ErrInvalidTime}

func sameError(want, got error) bool {
	if (want == nil) != (got == nil) {
		return false
	}
	for _, s := range sentinels {
		if errors.Is(want, s) != errors.Is(got, s) {
			return false
		}
	}
	return true
}

var (
	// keyNames exercise key schemas: braces, spaces, binary bytes, unicode.
	keyNames = []string{"a", "b", "user:1", "{tag}", "x}{y", "with space", "\x00\xff\x01", "ключ", "{", "}"}
	// t0 is 2026-01-01T00:00:00Z in µs, a realistic base time.
	t0 int64 = 1767225600000000
)

// period returns the algorithm's natural time unit, used to scale time steps.
// It is, by the algorithm's shape, the bucket's emission interval (its first Int) or the
// window (its Period).
func period(spec redstream.Spec) int64 {
	l, err := spec.Core()
	if err != nil {
		return 1
	}
	if row, _ := core.Lookup(string(spec.Algorithm)); row.Shape == core.Bucket {
		return max(1, coreops.Ints(l)[0])
	}
	return max(1, l.Period())
}

func runLimiter(rt *rapid.T, l redstream.Limiter, spec redstream.Spec, limit int64,
	model func(string, time.Time, int64) (core.Decision, error), maxSteps int) {
	prefix := casePrefix()
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom(keyNames), 1, 3, rapid.ID[string]).Draw(rt, "keys")
	now := t0 + rapid.Int64Range(0, 1e12).Draw(rt, "start")
	per := period(spec)
	var last core.Decision
	steps := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		switch rapid.IntRange(0, 9).Draw(rt, "step") {
		case 0, 1, 2: // no time passes
		case 3: // a small step
			now += rapid.Int64Range(1, max(1, per/4)).Draw(rt, "dt")
		case 4: // about one period
			now += rapid.Int64Range(per/2, per*2).Draw(rt, "dt")
		case 5: // exactly at or just before the last RetryAfter/ResetAfter
			target := last.RetryAfter
			if target == 0 {
				target = last.ResetAfter
			}
			now += max(0, target-rapid.Int64Range(0, 1).Draw(rt, "before"))
		case 6: // a long gap
			now += rapid.Int64Range(per*3, per*100).Draw(rt, "gap")
		case 7: // time goes backwards
			now -= rapid.Int64Range(1, per*2).Draw(rt, "back")
		case 8: // exactly one period
			now += per
		case 9: // an aligned boundary
			now += per - now%per
		}
		key := prefix + rapid.SampledFrom(keys).Draw(rt, "key")
		n := int64(1)
		switch rapid.IntRange(0, 9).Draw(rt, "costkind") {
		case 0:
			n = rapid.Int64Range(-2, 0).Draw(rt, "n") // invalid
		case 1:
			n = limit + rapid.Int64Range(1, 3).Draw(rt, "n") // too large
		case 2, 3:
			n = rapid.Int64Range(1, limit).Draw(rt, "n")
		}
		at := time.UnixMicro(now)
		switch rapid.IntRange(0, 40).Draw(rt, "badkey") {
		case 0:
			key = ""
		case 1:
			at = time.UnixMicro(-rapid.Int64Range(1, 1e9).Draw(rt, "before-epoch"))
		}
		want, werr := model(key, at, n)
		got, gerr := l.AllowN(rt.Context(), key, at, n)
		if !sameError(werr, gerr) {
			rt.Fatalf("step %d AllowN(%q, %d, n=%d): error %v, want %v", i, key, at.UnixMicro(), n, gerr, werr)
		}
		if werr != nil {
			continue
		}
		if got.Remaining < 0 || want.Remaining < 0 {
			rt.Fatalf("step %d AllowN(%q, %d, n=%d): Remaining = %d (model %d), want >= 0", i, key, at.UnixMicro(), n, got.Remaining, want.Remaining)
		}
		if w := decisionOf(want); got != w {
			rt.Fatalf("step %d AllowN(%q, %d, n=%d):\n got %+v\nwant %+v", i, key, at.UnixMicro(), n, got, w)
		}
		last = want
	}
}
