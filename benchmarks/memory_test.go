package benchmarks

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/memory"
	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"
)

// The in-process engines against the peers people compare them to, each comparison run as
// interleaved rounds (interleave_test.go) and reported as ratios:
//
//   - one hot key on the wall clock: memory.Limiter.Allow vs golang.org/x/time/rate
//     Limiter.Allow (which has no keys at all: the floor for one key);
//   - the same with an explicit time (AllowN vs rate.Limiter.AllowN), next to the floor
//     of any keyed engine: core's GCRA step plus one Go map lookup of the key;
//   - one hot key of every algorithm, explicit times;
//   - 100k and 1M distinct keys, serial and parallel, vs sethvargo/go-limiter's memorystore;
//   - bytes of memory per tracked key, for every algorithm (and memorystore).
//
// Every limiter is configured so that the measured requests are admitted.
//
//	go test -run xxx -bench 'Memory(HotKey|Algorithms|ManyKeys)' -benchtime 2000000x
//
// The ratio metrics read "redstream/<peer>": redstream's time per decision over the peer's,
// in the same rounds (below 1: redstream is faster); -p25 and -p75 give their spread. The
// ns/op column is redstream's median.

func newMemory(b *testing.B, spec redstream.Spec) *memory.Limiter {
	b.Helper()
	l, err := memory.NewLimiter(spec, memory.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// hotSpec admits every request of a benchmark: a burst of 1e9 refilled at 1e6/s.
var hotSpec = redstream.TokenBucket(1e9, 1e6)

// sink keeps the compiler from dropping the floor's work.
var sink int64

func BenchmarkMemoryHotKey(b *testing.B) {
	ctx := context.Background()
	b.Run("op=Allow", func(b *testing.B) {
		l := newMemory(b, hotSpec)
		x := rate.NewLimiter(1e6, 1e9)
		interleave(b,
			contender{"redstream", func(n int) {
				for range n {
					if d, _ := l.AllowN(ctx, "user:1", time.Time{}, 1); !d.Allowed {
						b.Fatal("denied")
					}
				}
			}},
			contender{"xtime-rate", func(n int) {
				for range n {
					if !x.Allow() {
						b.Fatal("denied")
					}
				}
			}},
		)
	})
	b.Run("op=AllowN-explicit-time", func(b *testing.B) {
		l := newMemory(b, hotSpec)
		x := rate.NewLimiter(1e6, 1e9)
		lim, err := hotSpec.Core()
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		us := now.UnixMicro()
		// The floor of a keyed engine: find the key's state in a Go map, run core's step,
		// store the state back in place (through the pointer the map holds).
		m := map[string]*core.State{"user:1": new(core.State)}
		var st core.State
		interleave(b,
			contender{"redstream", func(n int) {
				for range n {
					if d, _ := l.AllowN(ctx, "user:1", now, 1); !d.Allowed {
						b.Fatal("denied")
					}
				}
			}},
			contender{"xtime-rate", func(n int) {
				for range n {
					if !x.AllowN(now, 1) {
						b.Fatal("denied")
					}
				}
			}},
			contender{"core-step+map", func(n int) {
				for range n {
					var d core.Decision
					if err := lim.StepState(m["user:1"], us, 1, &d); err != nil || !d.Allowed {
						b.Fatal("denied")
					}
				}
			}},
			// core's step alone (core.Limit.StepState on one State): no key, no lock, no clock.
			contender{"core-step", func(n int) {
				for range n {
					var d core.Decision
					if err := lim.StepState(&st, us, 1, &d); err != nil || !d.Allowed {
						b.Fatal("denied")
					}
				}
				sink = st.Words[0]
			}},
		)
	})
}

// BenchmarkMemoryAlgorithms decides on one hot key of every algorithm with explicit times
// one µs apart, each against core's own step on one state (the floor), so the ratio is the
// engine's overhead: keyed table, lock or compare-and-swap, checks and conversion.
func BenchmarkMemoryAlgorithms(b *testing.B) {
	ctx := context.Background()
	start := time.UnixMicro(1767225600000000)
	for _, spec := range []redstream.Spec{
		redstream.TokenBucket(1e6, 1e6),
		redstream.LeakyBucket(1e6, 1e6),
		redstream.FixedWindow(time.Second, 1e9),
		redstream.SlidingCounter(time.Second, 1e9),
		redstream.SlidingWindow(time.Millisecond, 16),
	} {
		b.Run("alg="+string(spec.Algorithm), func(b *testing.B) {
			l := newMemory(b, spec)
			lim, err := spec.Core()
			if err != nil {
				b.Fatal(err)
			}
			now, us := start, start.UnixMicro()
			var (
				st core.State
				d  core.Decision
			)
			interleave(b,
				contender{"redstream", func(n int) {
					for range n {
						now = now.Add(time.Microsecond)
						if _, err := l.AllowN(ctx, "user:1", now, 1); err != nil {
							b.Fatal(err)
						}
					}
				}},
				contender{"core-step", func(n int) {
					for range n {
						us++
						if err := lim.StepState(&st, us, 1, &d); err != nil {
							b.Fatal(err)
						}
					}
				}},
			)
		})
	}
}

// manySpec keeps every key tracked for the whole run: a key used once recovers only after
// 1000 s, and admits a million requests before any denial.
var manySpec = redstream.TokenBucket(1e6, 0.001)

// keyFixture is a set of distinct keys with a memory limiter and a memorystore that both
// hold every key. Fixtures are built once per size and shared by the benchmarks.
//
// The benchmarks look keys up in random order, with strings equal to but not the same as
// the ones stored (as keys built from each request are), so neither engine profits from
// pointer-equal keys or from its state happening to sit in insertion order in memory.
type keyFixture struct {
	keys   []string // as stored
	lookup []string // equal copies, shuffled
	mem    *memory.Limiter
	store  limiter.Store
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[int]*keyFixture{}
)

func fixture(b *testing.B, n int) *keyFixture {
	b.Helper()
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f, ok := fixtures[n]; ok {
		return f
	}
	f := &keyFixture{keys: make([]string, n), mem: newMemory(b, manySpec)}
	var err error
	f.store, err = memorystore.New(&memorystore.Config{Tokens: 1_000_000, Interval: time.Hour, InitialAlloc: n})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range f.keys {
		f.keys[i] = "user:" + strconv.Itoa(i)
		if d, err := f.mem.AllowN(ctx, f.keys[i], time.Time{}, 1); err != nil || !d.Allowed {
			b.Fatalf("fill: %+v, %v", d, err)
		}
		if _, _, _, ok, err := f.store.Take(ctx, f.keys[i]); err != nil || !ok {
			b.Fatalf("fill memorystore: %v, %v", ok, err)
		}
	}
	f.lookup = make([]string, n)
	for i, k := range f.keys {
		f.lookup[i] = string([]byte(k))
	}
	rand.Shuffle(n, func(i, j int) { f.lookup[i], f.lookup[j] = f.lookup[j], f.lookup[i] })
	fixtures[n] = f
	f.check(b)
	return f
}

// check asserts that both engines really hold every key of the fixture.
func (f *keyFixture) check(b *testing.B) {
	b.Helper()
	if got := f.mem.TrackedKeys(); got != len(f.keys) {
		b.Fatalf("memory.Limiter tracks %d keys, want %d", got, len(f.keys))
	}
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		k := f.keys[rand.IntN(len(f.keys))]
		if _, remaining, err := f.store.Get(ctx, k); err != nil || remaining == 0 || remaining >= 1_000_000 {
			b.Fatalf("memorystore does not hold %q (remaining %d, %v)", k, remaining, err)
		}
	}
}

func BenchmarkMemoryManyKeys(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100_000, 1_000_000} {
		name := strconv.Itoa(n/1000) + "k"
		if n >= 1_000_000 {
			name = strconv.Itoa(n/1_000_000) + "M"
		}
		// Each goroutine (one in serial rounds) walks the shuffled keys from a random
		// start; the fixture is checked before and after.
		redstreamRun := func(f *keyFixture) func(int) {
			return func(ops int) {
				i := rand.IntN(n)
				for range ops {
					if i++; i == n {
						i = 0
					}
					if d, _ := f.mem.AllowN(ctx, f.lookup[i], time.Time{}, 1); !d.Allowed {
						b.Error("denied")
						return
					}
				}
			}
		}
		storeRun := func(f *keyFixture) func(int) {
			return func(ops int) {
				i := rand.IntN(n)
				for range ops {
					if i++; i == n {
						i = 0
					}
					if _, _, _, ok, _ := f.store.Take(ctx, f.lookup[i]); !ok {
						b.Error("denied")
						return
					}
				}
			}
		}
		b.Run("keys="+name+"/mode=serial", func(b *testing.B) {
			f := fixture(b, n)
			interleave(b, contender{"redstream", redstreamRun(f)}, contender{"memorystore", storeRun(f)})
			f.check(b)
		})
		b.Run("keys="+name+"/mode=parallel", func(b *testing.B) {
			f := fixture(b, n)
			interleaveParallel(b, contender{"redstream", redstreamRun(f)}, contender{"memorystore", storeRun(f)})
			f.check(b)
		})
	}
}

// heapInUse returns the bytes of live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemoryBytesPerKey reports the heap each tracked key costs (B/key), keys excluded
// (the caller owns the key strings; the engine keeps a reference, not a copy). Each key is
// used once; the sliding log then holds one timestamp in a ring of 4. The figure depends on
// how full the hash tables happen to be (between 7/16 and 7/8): 1M keys is close to the
// emptiest case, 200k close to the fullest.
func BenchmarkMemoryBytesPerKey(b *testing.B) {
	ctx := context.Background()
	specs := []redstream.Spec{
		manySpec,
		redstream.LeakyBucket(1e6, 0.001),
		redstream.SlidingWindow(time.Hour, 100),
		redstream.SlidingCounter(time.Hour, 100),
		redstream.FixedWindow(time.Hour, 100),
	}
	for _, n := range []int{200_000, 1_000_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "user:" + strconv.Itoa(i)
		}
		size := strconv.Itoa(n/1000) + "k"
		for _, spec := range specs {
			b.Run("keys="+size+"/lib=redstream/alg="+string(spec.Algorithm), func(b *testing.B) {
				var perKey float64
				for b.Loop() {
					before := heapInUse()
					l := newMemory(b, spec)
					for _, k := range keys {
						l.AllowN(ctx, k, time.Time{}, 1)
					}
					after := heapInUse()
					if got := l.TrackedKeys(); got != n {
						b.Fatalf("tracks %d keys, want %d", got, n)
					}
					perKey = float64(after-before) / float64(n)
					runtime.KeepAlive(l)
				}
				b.ReportMetric(perKey, "B/key")
			})
		}
		b.Run("keys="+size+"/lib=sethvargo-memorystore/alg=token-bucket", func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := heapInUse()
				s, err := memorystore.New(&memorystore.Config{Tokens: 10, Interval: time.Hour, InitialAlloc: 1})
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range keys {
					s.Take(ctx, k)
				}
				after := heapInUse()
				perKey = float64(after-before) / float64(n)
				s.Close(ctx)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}
