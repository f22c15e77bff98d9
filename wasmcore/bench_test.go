package wasmcore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/memory"
)

// benchSpecs admit almost everything at one request per µs, so the benchmarks measure the
// admitting path with real state changes.
var benchSpecs = []redstream.Spec{
	redstream.TokenBucket(1e6, 1e6),
	redstream.LeakyBucket(1e6, 1e6),
	redstream.FixedWindow(time.Second, 1e9),
	redstream.SlidingCounter(time.Second, 1e9),
	redstream.SlidingWindow(time.Millisecond, 16),
}

// nativeStep returns a function deciding with core directly on one key's state: the floor
// any engine can reach.
func nativeStep(b *testing.B, spec redstream.Spec) func(now int64) {
	lim, err := spec.Core()
	if err != nil {
		b.Fatal(err)
	}
	var (
		st core.State
		d  core.Decision
	)
	return func(now int64) { _ = lim.StepState(&st, now, 1, &d) }
}

// BenchmarkDecision compares, per algorithm, one decision on a hot key: core called natively,
// one step export called on an instance (the ABI's cost), the wasm Limiter (pool, host state,
// step) and the memory Limiter (the native engine).
func BenchmarkDecision(b *testing.B) {
	ctx := context.Background()
	rt := testRuntime(b)
	start := time.UnixMicro(1767225600000000)
	for _, spec := range benchSpecs {
		b.Run(string(spec.Algorithm)+"/core", func(b *testing.B) {
			step := nativeStep(b, spec)
			now := start.UnixMicro()
			b.ReportAllocs()
			for b.Loop() {
				now++
				step(now)
			}
		})
		b.Run(string(spec.Algorithm)+"/wasm-call", func(b *testing.B) {
			l, err := NewLimiter(spec, Options{Runtime: rt})
			if err != nil {
				b.Fatal(err)
			}
			in, err := rt.acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer rt.release(in)
			var (
				st   core.State
				d    core.Decision
				next coreops.Next
			)
			a := &l.abi[0]
			now := start.UnixMicro()
			b.ReportAllocs()
			for b.Loop() {
				now++
				if err := in.limitStep(ctx, a, &st, now, 1, &d, &next); err != nil {
					b.Fatal(err)
				}
				if d.Allowed {
					coreops.CommitState(l.limits[0], &st, next)
				}
			}
		})
		for _, engine := range []string{"wasm-engine", "memory-engine"} {
			b.Run(string(spec.Algorithm)+"/"+engine, func(b *testing.B) {
				l := benchLimiter(b, engine, spec, rt)
				now := start
				b.ReportAllocs()
				for b.Loop() {
					now = now.Add(time.Microsecond)
					if _, err := l.AllowN(ctx, "hot", now, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func benchLimiter(b *testing.B, engine string, spec redstream.Spec, rt *Runtime) redstream.Limiter {
	b.Helper()
	var (
		l   redstream.Limiter
		err error
	)
	if engine == "memory-engine" {
		l, err = memory.NewLimiter(spec, memory.Options{})
	} else {
		l, err = NewLimiter(spec, Options{Runtime: rt})
	}
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkDecisionParallel decides from GOMAXPROCS goroutines, on one hot key and on 10,000
// keys, for the token bucket (the wasm Runtime has one instance per CPU).
func BenchmarkDecisionParallel(b *testing.B) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, Config{CacheDir: TestCacheDir})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	const nkeys = 10000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	start := time.UnixMicro(1767225600000000)
	spec := redstream.TokenBucket(1e6, 1e6)
	for _, engine := range []string{"wasm-engine", "memory-engine"} {
		for _, many := range []bool{false, true} {
			name := engine + "/hot-key"
			if many {
				name = engine + "/10k-keys"
			}
			b.Run(name, func(b *testing.B) {
				l := benchLimiter(b, engine, spec, rt)
				if many {
					for _, k := range keys {
						if _, err := l.AllowN(ctx, k, start, 1); err != nil {
							b.Fatal(err)
						}
					}
					if tk, ok := l.(interface{ TrackedKeys() int }); !ok || tk.TrackedKeys() != nkeys {
						b.Fatalf("fixture holds %v keys, want %d", tk, nkeys)
					}
				}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						key := "hot"
						if many {
							key = keys[i%nkeys]
						}
						i++
						if _, err := l.AllowN(ctx, key, start, 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkInstantiate measures creating one instance and reports its linear memory.
func BenchmarkInstantiate(b *testing.B) {
	ctx := context.Background()
	rt := testRuntime(b)
	var size uint32
	b.ReportAllocs()
	for b.Loop() {
		in, err := rt.instantiate(ctx)
		if err != nil {
			b.Fatal(err)
		}
		size = in.mem.Size()
		in.mod.Close(ctx)
	}
	b.ReportMetric(float64(size), "memory-bytes/instance")
	b.ReportMetric(float64(len(module)), "module-bytes")
}

// BenchmarkEngines decides on one hot key of every algorithm (explicit times one µs apart)
// with the wasm engine, the memory engine and core's own step, in alternating rounds
// (wasm, memory, core; then memory, core, wasm; ...) so that machine drift falls on all
// three alike, each round timed by the thread's CPU time where the platform has it
// (cputime_linux_test.go). It reports each one's median ns/op over the rounds and the median ratios
// wasm/memory and wasm/core, with their 25th and 75th percentiles.
func BenchmarkEngines(b *testing.B) {
	ctx := context.Background()
	rt := testRuntime(b)
	start := time.UnixMicro(1767225600000000)
	for _, spec := range benchSpecs {
		b.Run(string(spec.Algorithm), func(b *testing.B) {
			engine := func(l redstream.Limiter) func(n int) {
				now := start
				return func(n int) {
					for range n {
						now = now.Add(time.Microsecond)
						if _, err := l.AllowN(ctx, "hot", now, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			step := nativeStep(b, spec)
			us := start.UnixMicro()
			runs := []func(n int){
				engine(benchLimiter(b, "wasm-engine", spec, rt)),
				engine(benchLimiter(b, "memory-engine", spec, rt)),
				func(n int) {
					for range n {
						us++
						step(us)
					}
				},
			}
			names := []string{"wasm", "memory", "core"}
			const rounds = 15
			per := max(500, b.N/rounds)
			ns := make([][]float64, len(runs))
			for _, run := range runs {
				run(per / 4) // warm up
			}
			runtime.LockOSThread() // the thread's CPU time is the goroutine's
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			for r := range rounds {
				for k := range runs {
					i := (r + k) % len(runs)
					t0 := cpuNow()
					runs[i](per)
					ns[i] = append(ns[i], float64((cpuNow()-t0).Nanoseconds())/float64(per))
				}
			}
			b.StopTimer()
			for i, name := range names {
				b.ReportMetric(quantile(ns[i], 0.5), name+"-ns/op")
			}
			for i := 1; i < len(runs); i++ {
				ratios := make([]float64, rounds)
				for r := range ratios {
					ratios[r] = ns[0][r] / ns[i][r]
				}
				unit := "wasm/" + names[i]
				b.ReportMetric(quantile(ratios, 0.5), unit)
				b.ReportMetric(quantile(ratios, 0.25), unit+"-p25")
				b.ReportMetric(quantile(ratios, 0.75), unit+"-p75")
			}
		})
	}
}

// quantile returns the q-quantile of v (nearest rank).
func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
