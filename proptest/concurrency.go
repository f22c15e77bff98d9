package proptest

import (
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"pgregory.net/rapid"
)

// ConcurrencyFactory returns a new concurrency limiter of specs: one spec of
// redstream.AlgorithmConcurrency and any rate limits, all-or-nothing on each key.
type ConcurrencyFactory func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error)

// TestConcurrencyLimiter runs the lease suite: a concurrency limit alone or with a rate
// limit of a random algorithm, and random sequences of Acquire, Release and Extend (of live,
// expired, released and forged leases) at explicit times, including the exact moment a lease
// expires and time going backwards. Every decision, every Expiry and every answer of Release
// and Extend must be the reference model's, built on core's step, ReleaseLease and
// ExtendLease.
func TestConcurrencyLimiter(t *testing.T, f ConcurrencyFactory, o Options) {
	t.Helper()
	n := CheckConcurrencyLimiter(t, f, o.checks(), o.maxSteps())
	t.Logf("concurrency: %d cases", n)
}

// leaseModel is the reference of a concurrency limiter: core's states of every limit per
// key, and the leases issued, in order.
type leaseModel struct {
	limits []core.Limit
	ci     int
	states map[string][]core.State
	leases []*modelLease
}

// modelLease is one issued lease: where its units are, and the engine's Lease for it.
type modelLease struct {
	at, n    int64
	released bool
	got      redstream.Lease
}

func (m *leaseModel) state(key string) []core.State {
	s := m.states[key]
	if s == nil {
		s = make([]core.State, len(m.limits))
		m.states[key] = s
	}
	return s
}

// acquire is the model's Acquire: every limit checked, all committed if all admit.
func (m *leaseModel) acquire(key string, now, n int64) (core.Decision, int64, error) {
	st := m.state(key)
	ds := make([]core.Decision, len(m.limits))
	nx := make([]coreops.Next, len(m.limits))
	for i, l := range m.limits {
		if err := coreops.CheckState(l, &st[i], now, n, &ds[i], &nx[i]); err != nil {
			return core.Decision{}, 0, err
		}
	}
	d := core.Combine(ds)
	if d.Allowed {
		for i, l := range m.limits {
			coreops.CommitState(l, &st[i], nx[i])
		}
		// A lease whose entries the log pruned is gone for good: its token must not release
		// or extend a later lease taken at its old time (time going back).
		lg := st[m.ci].Log
		for _, ml := range m.leases {
			if ml.got.Key == key && (lg == nil || lg.Len() == 0 || ml.at < lg.At(0)) {
				ml.released = true
			}
		}
	}
	return d, nx[m.ci][2], nil
}

func (m *leaseModel) release(ml *modelLease, key string, now int64) bool {
	if ml.released || !coreops.ReleaseLease(m.limits[m.ci], &m.state(key)[m.ci], ml.at, now, ml.n) {
		return false
	}
	ml.released = true
	return true
}

func (m *leaseModel) extend(ml *modelLease, key string, now int64) (int64, bool) {
	if ml.released {
		return 0, false
	}
	at, ok := coreops.ExtendLease(m.limits[m.ci], &m.state(key)[m.ci], ml.at, now, ml.n)
	if ok {
		ml.at = at
	}
	return at, ok
}

// drawLeaseSpecs draws a concurrency spec and, one time in three, a rate limit before or
// after it; it returns the specs and the concurrency spec's index.
func drawLeaseSpecs(rt *rapid.T) ([]redstream.Spec, int) {
	c := redstream.Concurrency(rapid.Int64Range(1, 6).Draw(rt, "limit"), rapid.SampledFrom(windows).Draw(rt, "ttl"))
	if rapid.IntRange(0, 2).Draw(rt, "rates") > 0 {
		return []redstream.Spec{c}, 0
	}
	var others []redstream.Algorithm
	for _, a := range redstream.Algorithms() {
		if a != redstream.AlgorithmConcurrency {
			others = append(others, a)
		}
	}
	r := drawSpec(rt, rapid.SampledFrom(others).Draw(rt, "rate"), "rate")
	if rapid.Bool().Draw(rt, "first") {
		return []redstream.Spec{r, c}, 1
	}
	return []redstream.Spec{c, r}, 0
}

// CheckConcurrencyLimiter runs at least checks cases of the lease suite (TestConcurrencyLimiter),
// each of at most maxSteps operations, and returns the number run. t may be any rapid.TB, so
// the suite runs outside go test too (redstream conformance).
func CheckConcurrencyLimiter(t rapid.TB, f ConcurrencyFactory, checks, maxSteps int) int {
	t.Helper()
	return repeat(t, checks, func(rt *rapid.T) {
		specs, ci := drawLeaseSpecs(rt)
		m := &leaseModel{ci: ci, states: map[string][]core.State{}}
		for _, s := range specs {
			p, err := s.Core()
			if err != nil {
				rt.Fatalf("generated an invalid spec %v: %v", s, err)
			}
			m.limits = append(m.limits, p)
		}
		l, err := f(specs)
		if err != nil {
			rt.Fatalf("factory(%v): %v", specs, err)
		}
		runLeases(rt, l, m, maxSteps)
	})
}

// leaseTime draws the next time: no step, a small one, about a lease TTL, the exact expiry
// of an issued lease (or 1 µs before), a long gap, or a step back.
func leaseTime(rt *rapid.T, m *leaseModel, now int64) int64 {
	ttl := m.limits[m.ci].Period()
	switch rapid.IntRange(0, 7).Draw(rt, "step") {
	case 1, 2:
		return now + rapid.Int64Range(1, max(1, ttl/4)).Draw(rt, "dt")
	case 3:
		return now + rapid.Int64Range(ttl/2, ttl*2).Draw(rt, "dt")
	case 4, 5:
		if len(m.leases) > 0 {
			ml := rapid.SampledFrom(m.leases).Draw(rt, "expiring")
			return ml.at + ttl - rapid.Int64Range(0, 1).Draw(rt, "before")
		}
	case 6:
		return now + rapid.Int64Range(ttl*3, ttl*20).Draw(rt, "gap")
	case 7:
		return max(0, now-rapid.Int64Range(1, ttl).Draw(rt, "back"))
	}
	return now
}

func runLeases(rt *rapid.T, l redstream.ConcurrencyLimiter, m *leaseModel, maxSteps int) {
	prefix := casePrefix()
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom(keyNames), 1, 2, rapid.ID[string]).Draw(rt, "keys")
	limit := int64(1 << 62)
	for _, p := range m.limits {
		limit = min(limit, p.Max())
	}
	now := t0 + rapid.Int64Range(0, 1e12).Draw(rt, "start")
	ttl := m.limits[m.ci].Period()
	steps := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		now = leaseTime(rt, m, now)
		at := time.UnixMicro(now)
		op := rapid.IntRange(0, 9).Draw(rt, "op")
		if len(m.leases) == 0 {
			op = 0
		}
		switch {
		case op < 5:
			key := prefix + rapid.SampledFrom(keys).Draw(rt, "key")
			n := rapid.Int64Range(1, limit).Draw(rt, "n")
			want, wat, werr := m.acquire(key, now, n)
			got, gerr := l.Acquire(rt.Context(), key, at, n)
			if (werr == nil) != (gerr == nil) {
				rt.Fatalf("step %d Acquire(%q, %d, n=%d): error %v, want %v", i, key, now, n, gerr, werr)
			}
			if werr != nil {
				continue
			}
			if w := decisionOf(want); got.Decision != w {
				rt.Fatalf("step %d Acquire(%q, %d, n=%d):\n got %+v\nwant %+v", i, key, now, n, got.Decision, w)
			}
			if !want.Allowed {
				continue
			}
			if got.Key != key || got.N != n || got.Token == 0 || got.Expiry.UnixMicro() != wat+ttl {
				rt.Fatalf("step %d Acquire(%q, %d, n=%d): lease %+v, want key %q, n %d, a token, expiry %d", i, key, now, n, got, key, n, wat+ttl)
			}
			m.leases = append(m.leases, &modelLease{at: wat, n: n, got: got})
		case op < 8:
			ml := rapid.SampledFrom(m.leases).Draw(rt, "lease")
			want := m.release(ml, ml.got.Key, now)
			got, err := l.Release(rt.Context(), ml.got, at)
			if err != nil || got != want {
				rt.Fatalf("step %d Release(%+v, %d) = %v, %v; want %v", i, ml.got, now, got, err, want)
			}
		case op < 9:
			ml := rapid.SampledFrom(m.leases).Draw(rt, "lease")
			wat, ok := m.extend(ml, ml.got.Key, now)
			got, err := l.Extend(rt.Context(), ml.got, at)
			switch {
			case !ok && !errors.Is(err, redstream.ErrLeaseLost):
				rt.Fatalf("step %d Extend(%+v, %d) = %+v, %v; want ErrLeaseLost", i, ml.got, now, got, err)
			case ok && (err != nil || got.Expiry.UnixMicro() != wat+ttl || got.Token != ml.got.Token):
				rt.Fatalf("step %d Extend(%+v, %d) = %+v, %v; want expiry %d", i, ml.got, now, got, err, wat+ttl)
			case ok:
				ml.got = got
			}
		default: // a forged lease: a live lease's key and size with another token
			forged := rapid.SampledFrom(m.leases).Draw(rt, "lease").got
			forged.Token ^= 1 << rapid.IntRange(0, 52).Draw(rt, "bit")
			for _, ml := range m.leases {
				if ml.got.Token == forged.Token {
					forged.Token = 0 // issued after all: a zero token, never issued
				}
			}
			if got, err := l.Release(rt.Context(), forged, at); err != nil || got {
				rt.Fatalf("step %d Release of a forged token %+v = %v, %v; want false", i, forged, got, err)
			}
		}
	}
}
