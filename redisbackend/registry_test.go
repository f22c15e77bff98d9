package redisbackend

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// specOf returns a spec of algorithm a in the fields of its shape.
func specOf(a core.Algorithm) redstream.Spec {
	if a.Shape == core.Bucket {
		return redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Capacity: 3, Rate: 2}
	}
	return redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Window: time.Second, Limit: 3}
}

// TestAlgorithmTables ranges over core's registry for every table the Redis engine reads:
// multi.lua and peek.lua decide every algorithm (by its registry code), the single-limit
// path finds a script for every algorithm, and every row of algScripts is an algorithm of
// the registry.
func TestAlgorithmTables(t *testing.T) {
	for _, a := range core.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			for _, s := range []*script{scriptMulti, scriptPeek} {
				if code, err := codeIn(s, a.Name); err != nil || code != a.Code {
					t.Errorf("%s: code %q, %v; want %q", s.name, code, err, a.Code)
				}
			}
			if _, _, err := singleScript(a.Name); err != nil {
				t.Error(err)
			}
		})
	}
	for name := range algScripts {
		if _, err := core.Lookup(name); err != nil {
			t.Errorf("algScripts row %q: %v", name, err)
		}
	}
	for name := range localKinds {
		if _, err := core.Lookup(name); err != nil {
			t.Errorf("localKinds row %q: %v", name, err)
		}
	}
}

// without removes the algorithm named name from the tables the test says, until t ends:
// the single-limit scripts (algScripts) and the dispatch of multi.lua and peek.lua, as a
// stale package lua would lack it.
func without(t *testing.T, name string, single, multi, peek bool) {
	t.Helper()
	if as, ok := algScripts[name]; ok && single {
		delete(algScripts, name)
		t.Cleanup(func() { algScripts[name] = as })
	}
	for _, c := range []struct {
		s  *script
		on bool
	}{{scriptMulti, multi}, {scriptPeek, peek}} {
		if !c.on {
			continue
		}
		s, old := c.s, c.s.algorithms
		s.algorithms = slices.DeleteFunc(slices.Clone(old), func(n string) bool { return n == name })
		t.Cleanup(func() { s.algorithms = old })
	}
}

// TestMissingAlgorithmRefused: an algorithm of core's registry that a table of the Redis
// engine lacks is refused when the limiter is built, with an error wrapping
// redstream.ErrInvalidConfig (never a panic on the first call), on every backend and for
// single-limit, multi-limit and peeked limiters alike.
func TestMissingAlgorithmRefused(t *testing.T) {
	a, err := core.Lookup("fixed")
	if err != nil {
		t.Fatal(err)
	}
	spec := specOf(a)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			for _, tt := range []struct {
				name                string
				single, multi, peek bool
			}{
				{"no script at all", true, true, false},
				{"no peek dispatch", false, false, true},
				{"no multi dispatch", false, true, false},
			} {
				t.Run(tt.name, func(t *testing.T) {
					without(t, a.Name, tt.single, tt.multi, tt.peek)
					_, errSingle := NewLimiter(c, spec, Options{})
					_, errMulti := NewMultiLimiter(c, []redstream.Spec{spec, redstream.TokenBucket(5, 1)}, Options{})
					wantSingle := tt.peek || tt.single
					if got := errors.Is(errSingle, redstream.ErrInvalidConfig); got != wantSingle {
						t.Errorf("NewLimiter: %v, want ErrInvalidConfig %t", errSingle, wantSingle)
					}
					if !errors.Is(errMulti, redstream.ErrInvalidConfig) {
						t.Errorf("NewMultiLimiter: %v, want ErrInvalidConfig", errMulti)
					}
				})
			}
		})
	}
}

// TestSingleViaMulti: an algorithm without a single-limit script of its own (the path a
// new algorithm of core's registry takes) decides through multi.lua with one limit exactly
// as through its own script, on every backend, and is peeked alike.
func TestSingleViaMulti(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			for _, a := range core.Algorithms() {
				t.Run(a.Name, func(t *testing.T) {
					spec := specOf(a)
					own := mustLimiter(t, c, spec, Options{KeyPrefix: uniq("own"), DisableLocalDenials: true})
					without(t, a.Name, true, false, false)
					via := mustLimiter(t, c, spec, Options{KeyPrefix: uniq("via"), DisableLocalDenials: true})
					if via.script != scriptMulti {
						t.Fatalf("script %s, want multi.lua", via.script.name)
					}
					now := t0
					for i := 0; i < 8; i++ {
						now = now.Add(time.Duration(i%3) * 300 * time.Millisecond)
						want, err := own.AllowN(ctx, "k", now, 1)
						if err != nil {
							t.Fatal(err)
						}
						got, err := via.AllowN(ctx, "k", now, 1)
						if err != nil {
							t.Fatal(err)
						}
						if got != want {
							t.Fatalf("request %d: via multi.lua %+v, own script %+v", i, got, want)
						}
						pw, err := own.PeekN(ctx, "k", now, 1)
						if err != nil {
							t.Fatal(err)
						}
						pg, err := via.PeekN(ctx, "k", now, 1)
						if err != nil || pg != pw {
							t.Fatalf("peek %d: via multi.lua %+v, %v; own script %+v", i, pg, err, pw)
						}
					}
					ds, err := via.AllowBatch(ctx, []string{"x", "y", "x"}, now, 1)
					if err != nil || len(ds) != 3 || !ds[0].Allowed {
						t.Fatalf("AllowBatch via multi.lua: %+v, %v", ds, err)
					}
				})
			}
		})
	}
}
