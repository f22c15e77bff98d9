package wasmcore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

var t0 = time.UnixMicro(1767225600000000) // 2026-01-01T00:00:00Z

// newTestRuntime returns a Runtime of its own (compiled code comes from the shared cache).
func newTestRuntime(t *testing.T, instances int) *Runtime {
	t.Helper()
	rt, err := NewRuntime(context.Background(), Config{Instances: instances, CacheDir: TestCacheDir})
	if err != nil {
		t.Fatalf("NewRuntime: %v", err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// faultyFn stands in for an export that traps or returns a status the ABI does not define.
type faultyFn struct {
	api.Function
	status uint64
	err    error
}

func (f faultyFn) CallWithStack(ctx context.Context, stack []uint64) error {
	if f.err != nil {
		return f.err
	}
	stack[0] = f.status
	return nil
}

// sabotage takes the pool's only instance and damages it.
func sabotage(t *testing.T, rt *Runtime, damage func(*instance)) {
	t.Helper()
	in, err := rt.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	damage(in)
	rt.release(in)
}

func TestBrokenInstanceIsReplaced(t *testing.T) {
	tests := []struct {
		name   string
		damage func(*instance)
	}{
		{"closed module", func(in *instance) { in.mod.Close(context.Background()) }},
		{"trap", func(in *instance) {
			in.fns[fnLimitStep] = faultyFn{Function: in.fns[fnLimitStep], err: errors.New("wasm error: unreachable")}
		}},
		{"internal status", func(in *instance) {
			in.fns[fnLimitStep] = faultyFn{Function: in.fns[fnLimitStep], status: uint64(wasmabi.StatusInternal)}
		}},
		{"undefined status", func(in *instance) {
			in.fns[fnLimitStep] = faultyFn{Function: in.fns[fnLimitStep], status: 42}
		}},
		{"negative status", func(in *instance) {
			in.fns[fnLimitStep] = faultyFn{Function: in.fns[fnLimitStep], status: api.EncodeI32(-3)}
		}},
	}
	rt := newTestRuntime(t, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			l, err := NewLimiter(redstream.TokenBucket(2, 1), Options{Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			if d, err := l.AllowN(ctx, "k", t0, 1); err != nil || !d.Allowed || d.Remaining != 1 {
				t.Fatalf("first decision = %+v, %v", d, err)
			}
			before := rt.Replaced()
			sabotage(t, rt, tt.damage)
			d, err := l.AllowN(ctx, "k", t0, 1)
			if !errors.Is(err, ErrTrapped) || d.Allowed {
				t.Fatalf("decision on a broken instance = %+v, %v; want a denial wrapping ErrTrapped", d, err)
			}
			if got := rt.Replaced() - before; got != 1 {
				t.Fatalf("%d instances replaced, want 1", got)
			}
			// The fresh instance decides, and the failed call left the key's state alone.
			if d, err := l.AllowN(ctx, "k", t0, 1); err != nil || !d.Allowed || d.Remaining != 0 {
				t.Fatalf("decision after replacement = %+v, %v; want allowed with 0 remaining", d, err)
			}
			if got := rt.Replaced() - before; got != 1 {
				t.Fatalf("%d instances replaced after a good call, want 1", got)
			}
		})
	}
}

// TestBadInputKeepsInstance checks that bad input comes back as the core sentinel error
// and never costs an instance.
func TestBadInputKeepsInstance(t *testing.T) {
	ctx := context.Background()
	rt := newTestRuntime(t, 1)
	tests := []struct {
		name string
		spec redstream.Spec
		key  string
		at   time.Time
		n    int64
		want error
	}{
		{"empty key", redstream.TokenBucket(5, 1), "", t0, 1, redstream.ErrEmptyKey},
		{"zero cost", redstream.LeakyBucket(5, 1), "k", t0, 0, redstream.ErrInvalidCost},
		{"negative cost", redstream.FixedWindow(time.Second, 5), "k", t0, -1, redstream.ErrInvalidCost},
		{"cost too large", redstream.SlidingWindow(time.Second, 5), "k", t0, 6, redstream.ErrCostTooLarge},
		{"cost too large counter", redstream.SlidingCounter(time.Second, 5), "k", t0, 6, redstream.ErrCostTooLarge},
		{"before epoch", redstream.TokenBucket(5, 1), "k", time.UnixMicro(-1), 1, redstream.ErrInvalidTime},
		{"after MaxTime", redstream.SlidingWindow(time.Second, 5), "k", time.UnixMicro(1<<52 + 1), 1, redstream.ErrInvalidTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLimiter(tt.spec, Options{Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			d, err := l.AllowN(ctx, tt.key, tt.at, tt.n)
			if !errors.Is(err, tt.want) || d != (redstream.Decision{}) {
				t.Fatalf("AllowN = %+v, %v; want a zero Decision and %v", d, err, tt.want)
			}
			// Bad input is never subject to a failure policy: fail-open returns it too.
			open, perr := redstream.WithFailurePolicy(l, redstream.FailOpen, nil)
			if perr != nil {
				t.Fatal(perr)
			}
			if _, err := open.AllowN(ctx, tt.key, tt.at, tt.n); !errors.Is(err, tt.want) {
				t.Fatalf("fail-open AllowN = %v, want %v (bad input, not a backend failure)", err, tt.want)
			}
		})
	}
	if got := rt.Replaced(); got != 0 {
		t.Fatalf("Replaced() = %d after bad input, want 0", got)
	}
}

func TestConfigErrors(t *testing.T) {
	rt := testRuntime(t)
	tests := []struct {
		name string
		make func() error
	}{
		{"instances negative", func() error { _, err := NewRuntime(context.Background(), Config{Instances: -1}); return err }},
		{"instances too many", func() error {
			_, err := NewRuntime(context.Background(), Config{Instances: maxInstances + 1})
			return err
		}},
		{"shards not a power of two", func() error {
			_, err := NewLimiter(redstream.TokenBucket(1, 1), Options{Runtime: rt, Shards: 3})
			return err
		}},
		{"sweep threshold", func() error {
			_, err := NewLimiter(redstream.TokenBucket(1, 1), Options{Runtime: rt, SweepThreshold: -1})
			return err
		}},
		{"bad spec", func() error { _, err := NewLimiter(redstream.TokenBucket(0, 1), Options{Runtime: rt}); return err }},
		{"unknown algorithm", func() error { _, err := NewLimiter(redstream.Spec{Algorithm: "x"}, Options{Runtime: rt}); return err }},
		{"log too long", func() error {
			_, err := NewLimiter(redstream.SlidingWindow(time.Second, 1<<20+1), Options{Runtime: rt})
			return err
		}},
		{"bad dedup", func() error {
			_, err := NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: 2}, Options{Runtime: rt})
			return err
		}},
		{"bloom too large", func() error {
			_, err := NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: 1 << 40, FPRate: 0.01}, Options{Runtime: rt})
			return err
		}},
		{"unknown strategy", func() error {
			_, err := NewDeduplicator(redstream.DedupSpec{Strategy: "x"}, Options{Runtime: rt})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.make(); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("error = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestWaitForInstanceHonorsContext(t *testing.T) {
	rt := newTestRuntime(t, 1)
	l, err := NewLimiter(redstream.TokenBucket(5, 1), Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	in, err := rt.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	d, err := l.AllowN(ctx, "k", t0, 1)
	if !errors.Is(err, context.DeadlineExceeded) || d.Allowed {
		t.Fatalf("AllowAt with every instance busy = %+v, %v; want DeadlineExceeded", d, err)
	}
	rt.release(in)
	if _, err := l.AllowN(context.Background(), "k", t0, 1); err != nil {
		t.Fatalf("AllowAt after release: %v", err)
	}
}

func TestClosedRuntime(t *testing.T) {
	rt := newTestRuntime(t, 2)
	l, err := NewLimiter(redstream.TokenBucket(5, 1), Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupWindowed}, Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.AllowN(context.Background(), "k", t0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllowAt after Close: %v, want ErrClosed", err)
	}
	if _, err := d.CheckAndMarkAt(context.Background(), "e", t0); !errors.Is(err, ErrClosed) {
		t.Fatalf("CheckAndMarkAt after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentDecisions hammers a limiter and a deduplicator from more goroutines than
// instances: exactly the capacity is admitted, every element is new exactly once.
func TestConcurrentDecisions(t *testing.T) {
	ctx := context.Background()
	rt := newTestRuntime(t, 2)
	const goroutines, perG, capacity = 8, 300, 1000
	l, err := NewLimiter(redstream.TokenBucket(capacity, 0.001), Options{Runtime: rt, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}, Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, fresh atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				dec, err := l.AllowN(ctx, "hot", t0, 1)
				if err != nil {
					errs <- err
					return
				}
				if dec.Allowed {
					allowed.Add(1)
				}
				if _, err := l.AllowN(ctx, fmt.Sprintf("k%d-%d", g, i), t0, 1); err != nil {
					errs <- err
					return
				}
				dup, err := d.CheckAndMarkAt(ctx, fmt.Sprintf("e%d", i), t0)
				if err != nil {
					errs <- err
					return
				}
				if !dup {
					fresh.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := allowed.Load(); got != capacity {
		t.Errorf("admitted %d of %d on the hot key, want exactly %d", got, goroutines*perG, capacity)
	}
	if got := fresh.Load(); got != perG {
		t.Errorf("%d elements reported new, want %d", got, perG)
	}
	if got := l.TrackedKeys(); got != 1+goroutines*perG {
		t.Errorf("TrackedKeys() = %d, want %d", got, 1+goroutines*perG)
	}
	if rt.Replaced() != 0 {
		t.Errorf("Replaced() = %d, want 0", rt.Replaced())
	}
}

// TestIdleKeysAreSwept checks that keys whose state has recovered do not accumulate.
func TestIdleKeysAreSwept(t *testing.T) {
	ctx := context.Background()
	for _, spec := range []redstream.Spec{redstream.TokenBucket(2, 10), redstream.SlidingWindow(time.Second, 2),
		redstream.FixedWindow(time.Second, 2), redstream.SlidingCounter(time.Second, 2)} {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l, err := NewLimiter(spec, Options{Runtime: testRuntime(t), Shards: 1, SweepThreshold: 16})
			if err != nil {
				t.Fatal(err)
			}
			now := t0
			for i := 0; i < 1000; i++ {
				if _, err := l.AllowN(ctx, fmt.Sprintf("k%d", i), now, 1); err != nil {
					t.Fatal(err)
				}
				now = now.Add(time.Second) // every earlier key is idle by the next call
			}
			if got := l.TrackedKeys(); got > 32 {
				t.Fatalf("TrackedKeys() = %d after 1000 keys that all recovered, want at most 32", got)
			}
		})
	}
}

func TestDeduplicatorStrategies(t *testing.T) {
	ctx := context.Background()
	rt := testRuntime(t)
	for _, s := range []redstream.DedupStrategy{redstream.DedupSet, redstream.DedupBloom, redstream.DedupWindowed} {
		t.Run(string(s), func(t *testing.T) {
			d, err := NewDeduplicator(redstream.DedupSpec{Strategy: s, Insertions: 1000, FPRate: 0.001}, Options{Runtime: rt, Clock: func() time.Time { return t0 }})
			if err != nil {
				t.Fatal(err)
			}
			if d.Strategy() != s {
				t.Fatalf("Strategy() = %q", d.Strategy())
			}
			for i := 0; i < 100; i++ {
				if dup, err := d.CheckAndMark(ctx, fmt.Sprint(i)); err != nil || dup {
					t.Fatalf("CheckAndMark(%d) = %v, %v; want a new element", i, dup, err)
				}
			}
			for i := 0; i < 100; i++ {
				if dup, err := d.IsDuplicate(ctx, fmt.Sprint(i)); err != nil || !dup {
					t.Fatalf("IsDuplicate(%d) = %v, %v; want a duplicate", i, dup, err)
				}
			}
			if dup, err := d.CheckAndMark(ctx, ""); err != nil || dup {
				t.Fatalf("CheckAndMark(\"\") = %v, %v", dup, err)
			}
			if n, err := d.UniqueCount(ctx); err != nil || n != 100 {
				t.Fatalf("UniqueCount() = %d, %v; want 100", n, err)
			}
			if err := d.Clear(ctx); err != nil {
				t.Fatal(err)
			}
			if dup, err := d.IsDuplicate(ctx, "1"); err != nil || dup {
				t.Fatalf("IsDuplicate after Clear = %v, %v", dup, err)
			}
			if n, _ := d.UniqueCount(ctx); n != 0 {
				t.Fatalf("UniqueCount() after Clear = %d", n)
			}
		})
	}
	t.Run("windowed time", func(t *testing.T) {
		d, err := NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Second}, Options{Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.CheckAndMarkAt(ctx, "e", time.UnixMicro(-1)); !errors.Is(err, redstream.ErrInvalidTime) {
			t.Fatalf("CheckAndMarkAt before the epoch: %v, want ErrInvalidTime", err)
		}
		if _, err := d.CheckAndMarkAt(ctx, "e", t0); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			at   time.Duration
			want bool
		}{{999999 * time.Microsecond, true}, {time.Second, false}} {
			if dup, err := d.IsDuplicateAt(ctx, "e", t0.Add(c.at)); err != nil || dup != c.want {
				t.Fatalf("IsDuplicateAt(+%v) = %v, %v; want %v", c.at, dup, err, c.want)
			}
		}
	})
}

// TestHotPathAllocations bounds allocations of a decision on a known key.
func TestHotPathAllocations(t *testing.T) {
	ctx := context.Background()
	rt := testRuntime(t)
	for _, spec := range []redstream.Spec{redstream.TokenBucket(1e6, 1), redstream.FixedWindow(time.Hour, 1e6),
		redstream.SlidingCounter(time.Hour, 1e6), redstream.SlidingWindow(time.Hour, 1e6)} {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l, err := NewLimiter(spec, Options{Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.AllowN(ctx, "k", t0, 1); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(200, func() {
				if _, err := l.AllowN(ctx, "k", t0, 1); err != nil {
					t.Fatal(err)
				}
			})
			budget := 0.0
			if spec.Algorithm == redstream.AlgorithmSlidingWindow {
				budget = 1 // the log's slice grows now and then
			}
			if allocs > budget {
				t.Fatalf("%v allocations per decision, want at most %v", allocs, budget)
			}
		})
	}
}

// TestCloseWakesWaiters checks that a call waiting for an instance returns ErrClosed when
// the Runtime is closed.
func TestCloseWakesWaiters(t *testing.T) {
	rt := newTestRuntime(t, 1)
	l, err := NewLimiter(redstream.TokenBucket(5, 1), Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	in, err := rt.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l.AllowN(context.Background(), "k", t0, 1)
		errc <- err
	}()
	for rt.waiters.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting call after Close: %v, want ErrClosed", err)
	}
	rt.release(in)
}

// TestNewRuntimeRejectsOtherModules checks that a module that is not redstream's core of
// this ABI is refused before any call.
func TestNewRuntimeRejectsOtherModules(t *testing.T) {
	for _, tt := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"garbage", []byte("not wasm"), "compiling"},
		{"empty module", []byte("\x00asm\x01\x00\x00\x00"), "not a WASI reactor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newRuntime(context.Background(), Config{Instances: 1}, tt.wasm)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("newRuntime = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
