package proptest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// modelLimiter is the reference model behind the Limiter interface, with an optional
// mutation applied to its answers. Unmutated it must pass; every mutant must be caught.
type modelLimiter struct {
	mu     sync.Mutex
	m      *limitModel
	mutate func(key string, n int64, d *core.Decision, err *error) (commit bool)
	// consumeOnDenial makes a denied request consume its cost anyway.
	consumeOnDenial bool
}

func (l *modelLimiter) AllowN(_ context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, err := l.m.decide(key, now, n, false)
	commit := err == nil && d.Allowed
	if l.mutate != nil {
		commit = l.mutate(key, n, &d, &err)
	}
	if commit {
		l.m.decide(key, now, n, true)
	}
	if l.consumeOnDenial && err == nil && !d.Allowed {
		l.forceConsume(key, now.UnixMicro(), n)
	}
	if err != nil {
		return redstream.Decision{}, err
	}
	return decisionOf(d), nil
}

// forceConsume records a request whatever the limit says.
func (l *modelLimiter) forceConsume(key string, now, n int64) {
	m := l.m
	s := m.states[key]
	if s == nil {
		s = new(core.State)
		m.states[key] = s
	}
	a, err := core.Lookup(m.p.Name())
	if err != nil {
		panic(err)
	}
	switch {
	case a.Shape == core.Bucket: // the GCRA buckets: the TAT moves n intervals on
		s.Words[0] = max(s.Words[0], now) + n*coreops.Ints(m.p)[0]
	case a.Words == 0: // the log: n entries at now (or the newest entry's time)
		at := now
		if s.Log != nil && s.Log.Len() > 0 {
			at = max(at, s.Log.At(s.Log.Len()-1))
		}
		coreops.CommitState(m.p, s, coreops.Next{0, n, at})
	default: // the windows: the count of the current window
		s.Words[1] += n
	}
}

func factory(mutate func(string, int64, *core.Decision, *error) bool) LimiterFactory {
	return func(spec redstream.Spec) (redstream.Limiter, error) {
		p, err := spec.Core()
		if err != nil {
			return nil, err
		}
		return &modelLimiter{m: newLimitModel(p), mutate: mutate}, nil
	}
}

// recTB is a rapid.TB that records a failure instead of failing the real test.
type recTB struct {
	failed bool
	out    strings.Builder
}

type stopNow struct{}

func (r *recTB) Helper()                           {}
func (r *recTB) Name() string                      { return "TestMutant" }
func (r *recTB) Logf(format string, args ...any)   { fmt.Fprintf(&r.out, format+"\n", args...) }
func (r *recTB) Log(args ...any)                   { fmt.Fprintln(&r.out, args...) }
func (r *recTB) Skipf(format string, args ...any)  { r.Logf(format, args...); r.SkipNow() }
func (r *recTB) Skip(args ...any)                  { r.Log(args...); r.SkipNow() }
func (r *recTB) SkipNow()                          { panic(stopNow{}) }
func (r *recTB) Errorf(format string, args ...any) { r.failed = true; r.Logf(format, args...) }
func (r *recTB) Error(args ...any)                 { r.failed = true; r.Log(args...) }
func (r *recTB) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recTB) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recTB) FailNow()                          { r.failed = true; panic(stopNow{}) }
func (r *recTB) Fail()                             { r.failed = true }
func (r *recTB) Failed() bool                      { return r.failed }

// caught runs the suite on a mutant and reports whether it failed.
func caught(check func(*recTB)) (failed bool, output string) {
	r := &recTB{}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stopNow); !ok {
					panic(p)
				}
			}
		}()
		check(r)
	}()
	return r.failed, r.out.String()
}

func TestReferenceModelPasses(t *testing.T) {
	TestLimiter(t, factory(nil), Options{Checks: 200})
	TestMultiLimiter(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
		ms := &multiModel{}
		for _, s := range specs {
			p, err := s.Core()
			if err != nil {
				return nil, err
			}
			ms.limits = append(ms.limits, newLimitModel(p))
		}
		return &multiLimiter{m: ms}, nil
	}, Options{Checks: 200})
}

type multiLimiter struct {
	mu sync.Mutex
	m  *multiModel
}

func (l *multiLimiter) AllowN(_ context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, err := l.m.decide(key, now, n)
	return decisionOf(d), err
}

// TestMutantsAreCaught shows the suite finds each kind of bug an engine port typically has.
func TestMutantsAreCaught(t *testing.T) {
	mutants := []struct {
		name   string
		algs   []redstream.Algorithm
		mutate func(key string, n int64, d *core.Decision, err *error) bool
	}{
		{"RetryAfter off by 1µs", redstream.Algorithms(), func(_ string, _ int64, d *core.Decision, err *error) bool {
			if !d.Allowed && *err == nil {
				d.RetryAfter++
			}
			return *err == nil && d.Allowed
		}},
		{"empty key accepted", redstream.Algorithms(), func(key string, _ int64, d *core.Decision, err *error) bool {
			if key == "" {
				*err = nil
				*d = core.Decision{Allowed: true}
			}
			return false
		}},
		{"ErrCostTooLarge reported as denial", redstream.Algorithms(), func(_ string, _ int64, d *core.Decision, err *error) bool {
			if *err != nil && strings.Contains((*err).Error(), "exceeds") {
				*err = nil
				*d = core.Decision{}
			}
			return *err == nil && d.Allowed
		}},
		{"Remaining off by one", redstream.Algorithms(), func(_ string, _ int64, d *core.Decision, err *error) bool {
			if d.Remaining > 0 {
				d.Remaining--
			}
			return *err == nil && d.Allowed
		}},
	}
	for _, alg := range redstream.Algorithms() {
		t.Run("denied request consumes/"+string(alg), func(t *testing.T) {
			f := func(spec redstream.Spec) (redstream.Limiter, error) {
				l, err := factory(nil)(spec)
				l.(*modelLimiter).consumeOnDenial = true
				return l, err
			}
			if failed, _ := caught(func(r *recTB) { CheckLimiter(r, alg, f, 200) }); !failed {
				t.Fatal("mutant survived 200 cases")
			}
		})
	}
	for _, m := range mutants {
		for _, alg := range m.algs {
			t.Run(m.name+"/"+string(alg), func(t *testing.T) {
				failed, out := caught(func(r *recTB) { CheckLimiter(r, alg, factory(m.mutate), 200) })
				if !failed {
					t.Fatalf("mutant %q survived 200 cases", m.name)
				}
				if !strings.Contains(out, "AllowN") {
					t.Fatalf("failure output does not show the failing call:\n%s", out)
				}
			})
		}
	}
}

// TestNegativeRemainingIsCaught: an engine answering a negative Remaining fails on the
// Remaining >= 0 property, reported as such.
func TestNegativeRemainingIsCaught(t *testing.T) {
	for _, alg := range redstream.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			negative := func(_ string, _ int64, d *core.Decision, err *error) bool {
				if *err == nil && !d.Allowed {
					d.Remaining = -1
				}
				return *err == nil && d.Allowed
			}
			failed, out := caught(func(r *recTB) { CheckLimiter(r, alg, factory(negative), 200) })
			if !failed {
				t.Fatal("an engine answering Remaining = -1 survived 200 cases")
			}
			if !strings.Contains(out, "Remaining = -1") || !strings.Contains(out, "want >= 0") {
				t.Fatalf("failure output does not name the property:\n%s", out)
			}
		})
	}
}

// setDedup is a correct exact set; forgetEmpty turns it into a mutant that records "".
type setDedup struct {
	mu          sync.Mutex
	seen        map[string]bool
	recordEmpty bool
}

func (s *setDedup) IsDuplicate(_ context.Context, e string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return (e != "" || s.recordEmpty) && s.seen[e], nil
}
func (s *setDedup) MarkSeen(_ context.Context, e string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e != "" || s.recordEmpty {
		s.seen[e] = true
	}
	return nil
}
func (s *setDedup) CheckAndMark(ctx context.Context, e string) (bool, error) {
	dup, _ := s.IsDuplicate(ctx, e)
	return dup, s.MarkSeen(ctx, e)
}
func (s *setDedup) Clear(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.seen)
	return nil
}
func (s *setDedup) UniqueCount(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.seen)), nil
}

func TestDedupSuite(t *testing.T) {
	good := func(redstream.DedupSpec) (redstream.Deduplicator, error) {
		return &setDedup{seen: map[string]bool{}}, nil
	}
	TestDeduplicator(t, good, Options{Checks: 200, Strategies: []redstream.DedupStrategy{redstream.DedupSet}})
	bad := func(redstream.DedupSpec) (redstream.Deduplicator, error) {
		return &setDedup{seen: map[string]bool{}, recordEmpty: true}, nil
	}
	if failed, _ := caught(func(r *recTB) { CheckDeduplicator(r, redstream.DedupSet, bad, 200) }); !failed {
		t.Fatal("a set deduplicator that records the empty element survived")
	}
}

// TestMain turns off rapid's fail files: the mutation tests fail on purpose, and their
// counterexamples must not be written into the source tree.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := flag.Set("rapid.nofailfile", "true"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
