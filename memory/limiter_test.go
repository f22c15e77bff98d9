package memory

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/engine"
	"pgregory.net/rapid"
)

// t0 is a realistic base time for tests with explicit times.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// allSpecs has one small spec per algorithm, each with a limit of 3.
var allSpecs = []redstream.Spec{
	redstream.TokenBucket(3, 1),
	redstream.LeakyBucket(3, 1),
	redstream.SlidingWindow(time.Second, 3),
	redstream.SlidingCounter(time.Second, 3),
	redstream.FixedWindow(time.Second, 3),
}

func newLimiter(t *testing.T, spec redstream.Spec, opts Options) *Limiter {
	t.Helper()
	l, err := NewLimiter(spec, opts)
	if err != nil {
		t.Fatalf("NewLimiter(%v): %v", spec, err)
	}
	return l
}

// step is one request of a scripted scenario and the decision it must get.
type step struct {
	at      time.Duration // since t0
	n       int64
	allowed bool
	check   func(t *testing.T, d redstream.Decision) // extra checks, optional
}

func runSteps(t *testing.T, l redstream.Limiter, key string, steps []step) {
	t.Helper()
	for i, s := range steps {
		n := s.n
		if n == 0 {
			n = 1
		}
		d, err := l.AllowN(context.Background(), key, t0.Add(s.at), n)
		if err != nil {
			t.Fatalf("step %d (t0+%v): %v", i, s.at, err)
		}
		if d.Allowed != s.allowed {
			t.Fatalf("step %d (t0+%v): Allowed = %v, want %v (%+v)", i, s.at, d.Allowed, s.allowed, d)
		}
		if s.check != nil {
			s.check(t, d)
		}
	}
}

func retryAfter(want time.Duration) func(*testing.T, redstream.Decision) {
	return func(t *testing.T, d redstream.Decision) {
		t.Helper()
		if d.RetryAfter != want {
			t.Errorf("RetryAfter = %v, want %v", d.RetryAfter, want)
		}
	}
}

func delay(want time.Duration) func(*testing.T, redstream.Decision) {
	return func(t *testing.T, d redstream.Decision) {
		t.Helper()
		if d.Delay != want {
			t.Errorf("Delay = %v, want %v", d.Delay, want)
		}
	}
}

// TestSeedSlidingWindow: window 1000 ms, limit 5: 5 admitted, the 6th denied, admitted again
// once the first falls out; a timestamp exactly one window old no longer counts.
func TestSeedSlidingWindow(t *testing.T) {
	l := newLimiter(t, redstream.SlidingWindow(1000*time.Millisecond, 5), Options{})
	ms := time.Millisecond
	runSteps(t, l, "user:1", []step{
		{at: 0, allowed: true},
		{at: 100 * ms, allowed: true},
		{at: 200 * ms, allowed: true},
		{at: 300 * ms, allowed: true},
		{at: 400 * ms, allowed: true},
		{at: 500 * ms, allowed: false, check: retryAfter(500 * ms)},
		{at: 999 * ms, allowed: false, check: retryAfter(1 * ms)},
		{at: 1000 * ms, allowed: true}, // the entry at 0 is exactly one window old
		{at: 1000 * ms, allowed: false, check: retryAfter(100 * ms)},
		{at: 1100 * ms, allowed: true},
	})
}

// TestSeedTokenBucket: capacity 10, 5/s: a new key admits a burst of 10, then one every 200 ms.
func TestSeedTokenBucket(t *testing.T) {
	l := newLimiter(t, redstream.TokenBucket(10, 5), Options{})
	var steps []step
	for i := 0; i < 10; i++ {
		steps = append(steps, step{at: 0, allowed: true})
	}
	ms := time.Millisecond
	steps = append(steps,
		step{at: 0, allowed: false, check: retryAfter(200 * ms)},
		step{at: 199 * ms, allowed: false, check: retryAfter(1 * ms)},
		step{at: 200 * ms, allowed: true},
		step{at: 200 * ms, allowed: false},
		step{at: 400 * ms, allowed: true},
		step{at: 600 * ms, allowed: true},
		step{at: 799 * ms, allowed: false},
		step{at: 800 * ms, allowed: true},
	)
	runSteps(t, l, "user:1", steps)
	// A long pause refills the whole burst, and no more.
	d, err := l.AllowN(context.Background(), "user:1", t0.Add(time.Hour), 1)
	if err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("after an hour: %+v, %v; want allowed with Remaining 9", d, err)
	}
}

// TestSeedLeakyBucket: capacity 2, leak 1/s: admits 2, denies the 3rd, admits one more after
// 1 s; Delay spaces the admitted requests 1 s apart (shaping).
func TestSeedLeakyBucket(t *testing.T) {
	l := newLimiter(t, redstream.LeakyBucket(2, 1), Options{})
	s := time.Second
	runSteps(t, l, "user:1", []step{
		{at: 0, allowed: true, check: delay(0)},
		{at: 0, allowed: true, check: delay(1 * s)},
		{at: 0, allowed: false, check: retryAfter(1 * s)},
		{at: 999 * time.Millisecond, allowed: false},
		{at: 1 * s, allowed: true, check: delay(1 * s)},
		{at: 1 * s, allowed: false},
		{at: 10 * s, allowed: true, check: delay(0)}, // drained: no wait
	})
}

// TestLeakyEqualsTokenBucket: as a meter the leaky bucket admits exactly what the token
// bucket of the same capacity and rate admits.
func TestLeakyEqualsTokenBucket(t *testing.T) {
	tb := newLimiter(t, redstream.TokenBucket(4, 10), Options{})
	lb := newLimiter(t, redstream.LeakyBucket(4, 10), Options{})
	at := t0
	for i := 0; i < 500; i++ {
		at = at.Add(time.Duration(i%7*13) * time.Millisecond)
		n := int64(i%3 + 1)
		a, _ := tb.AllowN(context.Background(), "k", at, n)
		b, _ := lb.AllowN(context.Background(), "k", at, n)
		b.Delay = 0
		if a != b {
			t.Fatalf("request %d: token bucket %+v, leaky bucket %+v", i, a, b)
		}
	}
}

func TestNewLimiterErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		spec redstream.Spec
		opts Options
	}{
		{"sliding window 0", redstream.SlidingWindow(0, 5), Options{}},
		{"sliding window negative", redstream.SlidingWindow(-time.Second, 5), Options{}},
		{"sliding window below 1µs", redstream.SlidingWindow(time.Nanosecond, 5), Options{}},
		{"sliding limit 0", redstream.SlidingWindow(time.Second, 0), Options{}},
		{"sliding limit negative", redstream.SlidingWindow(time.Second, -1), Options{}},
		{"counter window 0", redstream.SlidingCounter(0, 5), Options{}},
		{"counter limit 0", redstream.SlidingCounter(time.Second, 0), Options{}},
		{"fixed window 0", redstream.FixedWindow(0, 5), Options{}},
		{"fixed limit negative", redstream.FixedWindow(time.Second, -5), Options{}},
		{"token capacity 0", redstream.TokenBucket(0, 5), Options{}},
		{"token capacity below 1", redstream.TokenBucket(0.5, 5), Options{}},
		{"token capacity NaN", redstream.TokenBucket(nan, 5), Options{}},
		{"token capacity Inf", redstream.TokenBucket(inf, 5), Options{}},
		{"token rate 0", redstream.TokenBucket(10, 0), Options{}},
		{"token rate negative", redstream.TokenBucket(10, -1), Options{}},
		{"token rate NaN", redstream.TokenBucket(10, nan), Options{}},
		{"token rate Inf", redstream.TokenBucket(10, inf), Options{}},
		{"token rate above 1e6", redstream.TokenBucket(10, 2e6), Options{}},
		{"leaky capacity 0", redstream.LeakyBucket(0, 1), Options{}},
		{"leaky rate NaN", redstream.LeakyBucket(2, nan), Options{}},
		{"leaky rate -Inf", redstream.LeakyBucket(2, math.Inf(-1)), Options{}},
		{"unknown algorithm", redstream.Spec{Algorithm: "gcra2"}, Options{}},
		{"zero spec", redstream.Spec{}, Options{}},
		{"shards not a power of two", redstream.TokenBucket(1, 1), Options{Shards: 3}},
		{"shards negative", redstream.TokenBucket(1, 1), Options{Shards: -1}},
		{"shards too many", redstream.TokenBucket(1, 1), Options{Shards: MaxShards * 2}},
		{"sweep threshold negative", redstream.TokenBucket(1, 1), Options{SweepThreshold: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLimiter(tt.spec, tt.opts)
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("NewLimiter(%v, %+v) error = %v, want ErrInvalidConfig", tt.spec, tt.opts, err)
			}
			if l != nil {
				t.Errorf("NewLimiter returned a limiter with an error")
			}
			if !strings.HasPrefix(err.Error(), "memory: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
			m, err := NewMultiLimiter([]redstream.Spec{redstream.TokenBucket(1, 1), tt.spec}, tt.opts)
			if !errors.Is(err, redstream.ErrInvalidConfig) || m != nil {
				t.Errorf("NewMultiLimiter with it: %v, %v; want ErrInvalidConfig", m, err)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	future := time.UnixMicro(core.MaxTime + 1)
	tests := []struct {
		name  string
		key   string
		at    time.Time
		n     int64
		clock func() time.Time
		want  error
	}{
		{"empty key", "", t0, 1, nil, redstream.ErrEmptyKey},
		{"cost 0", "k", t0, 0, nil, redstream.ErrInvalidCost},
		{"cost negative", "k", t0, -3, nil, redstream.ErrInvalidCost},
		{"cost above the limit", "k", t0, 4, nil, redstream.ErrCostTooLarge},
		{"cost far above the limit", "k", t0, math.MaxInt64, nil, redstream.ErrCostTooLarge},
		{"time before the epoch", "k", time.Unix(-1, 0), 1, nil, redstream.ErrInvalidTime},
		{"time after MaxTime", "k", future, 1, nil, redstream.ErrInvalidTime},
		{"clock before the epoch", "k", time.Time{}, 1, func() time.Time { return time.Unix(-10, 0) }, redstream.ErrInvalidTime},
		{"clock returns the zero time", "k", time.Time{}, 1, func() time.Time { return time.Time{} }, redstream.ErrInvalidTime},
	}
	for _, spec := range allSpecs {
		for _, tt := range tests {
			t.Run(string(spec.Algorithm)+"/"+tt.name, func(t *testing.T) {
				opts := Options{Clock: tt.clock}
				l := newLimiter(t, spec, opts)
				m, err := NewMultiLimiter([]redstream.Spec{spec, redstream.FixedWindow(time.Hour, 100)}, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, lim := range []interface {
					redstream.Limiter
					TrackedKeys() int
				}{l, m} {
					d, err := lim.AllowN(context.Background(), tt.key, tt.at, tt.n)
					if !errors.Is(err, tt.want) {
						t.Fatalf("%T.AllowN error = %v, want %v", lim, err, tt.want)
					}
					if !strings.HasPrefix(err.Error(), "memory: ") {
						t.Errorf("error %q does not start with the package name", err)
					}
					if d != (redstream.Decision{}) {
						t.Errorf("decision with an error = %+v, want zero", d)
					}
					if got := lim.TrackedKeys(); got != 0 {
						t.Errorf("TrackedKeys after bad input = %d, want 0", got)
					}
				}
			})
		}
	}
}

// reference decides like proptest's model: core's step over per-key state, no eviction.
type reference struct {
	p      core.Limit
	states map[string]*core.State
}

func newReference(p core.Limit) *reference {
	return &reference{p: p, states: map[string]*core.State{}}
}

func (r *reference) decide(key string, now, n int64) (core.Decision, error) {
	s := r.states[key]
	if s == nil {
		s = new(core.State)
		r.states[key] = s
	}
	var d core.Decision
	err := r.p.StepState(s, now, n, &d)
	return d, err
}

// TestTimeGoesBackwards: an earlier time has core's defined answer in every algorithm, and
// never a negative Remaining or RetryAfter.
func TestTimeGoesBackwards(t *testing.T) {
	offsets := []time.Duration{0, 0, 300 * time.Millisecond, -2 * time.Second, 0, -time.Hour,
		1500 * time.Millisecond, 1400 * time.Millisecond, -time.Millisecond, 5 * time.Second, 3 * time.Second}
	for _, spec := range allSpecs {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l := newLimiter(t, spec, Options{})
			ref := newReference(l.limits[0])
			for i, off := range offsets {
				at := t0.Add(off)
				want, werr := ref.decide("k", at.UnixMicro(), 1)
				got, err := l.AllowN(context.Background(), "k", at, 1)
				if err != nil || werr != nil {
					t.Fatalf("request %d: %v (reference %v)", i, err, werr)
				}
				if w := engine.Decision(want); got != w {
					t.Fatalf("request %d at t0%+v:\n got %+v\nwant %+v", i, off, got, w)
				}
				if got.Remaining < 0 || got.RetryAfter < 0 || got.Delay < 0 {
					t.Fatalf("request %d: negative field in %+v", i, got)
				}
			}
		})
	}
}

// fakeClock is an injected clock tests move by hand.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestInjectedClock(t *testing.T) {
	clk := &fakeClock{now: t0}
	l := newLimiter(t, redstream.TokenBucket(1, 1), Options{Clock: clk.Now})
	ctx := context.Background()
	if d, _ := l.AllowN(ctx, "k", time.Time{}, 1); !d.Allowed {
		t.Fatalf("first Allow denied: %+v", d)
	}
	if d, _ := l.AllowN(ctx, "k", time.Time{}, 1); d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("second Allow at the same clock time: %+v, want denied with RetryAfter 1s", d)
	}
	clk.Advance(time.Second)
	if d, _ := l.AllowN(ctx, "k", time.Time{}, 1); !d.Allowed {
		t.Fatalf("Allow a second later denied: %+v", d)
	}
	if clk.reads != 3 {
		t.Errorf("clock read %d times, want 3", clk.reads)
	}
	// An explicit time is used as given and the clock is not read.
	if d, _ := l.AllowN(ctx, "k", t0.Add(time.Hour), 1); !d.Allowed {
		t.Fatalf("AllowAt an hour later denied: %+v", d)
	}
	if clk.reads != 3 {
		t.Errorf("AllowAt read the clock")
	}
}

// TestDefaultClock: without Options.Clock the limiter follows time.Now.
func TestDefaultClock(t *testing.T) {
	l := newLimiter(t, redstream.TokenBucket(1, 1e6), Options{})
	before := time.Now()
	d, err := l.AllowN(context.Background(), "k", time.Time{}, 1)
	after := time.Now()
	if err != nil || !d.Allowed {
		t.Fatalf("Allow: %+v, %v", d, err)
	}
	got := engine.MonoMicros()
	if got < before.UnixMicro()-1000 || got > after.Add(time.Second).UnixMicro() {
		t.Errorf("default clock %d µs, time.Now between %d and %d", got, before.UnixMicro(), after.UnixMicro())
	}
	// The TAT the default clock stored is within a second of time.Now.
	tat, _ := l.buckets.TAT("k")
	if diff := tat - after.UnixMicro(); diff < -1e6 || diff > 1e6 {
		t.Errorf("stored TAT %d is %d µs away from time.Now", tat, diff)
	}
}

// TestAllocs: a decision on a known key allocates nothing, in every algorithm, with the
// default clock and with explicit times (the sliding log reuses its ring buffer).
func TestAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts are not meaningful under -cover or -race")
	}
	ctx := context.Background()
	for _, spec := range allSpecs {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l := newLimiter(t, spec, Options{})
			at := t0
			l.AllowN(ctx, "user:1", at, 1)
			if got := testing.AllocsPerRun(1000, func() {
				at = at.Add(170 * time.Millisecond) // keeps admitting and expiring entries
				l.AllowN(ctx, "user:1", at, 1)
			}); got != 0 {
				t.Errorf("AllowAt allocates %v per call, want 0", got)
			}
			l.AllowN(ctx, "user:2", time.Time{}, 1)
			if got := testing.AllocsPerRun(1000, func() { l.AllowN(ctx, "user:2", time.Time{}, 1) }); got != 0 {
				t.Errorf("Allow allocates %v per call, want 0", got)
			}
		})
	}
	t.Run("multi", func(t *testing.T) {
		m, err := NewMultiLimiter(allSpecs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		at := t0
		m.AllowN(ctx, "user:1", at, 1)
		if got := testing.AllocsPerRun(1000, func() {
			at = at.Add(170 * time.Millisecond)
			m.AllowN(ctx, "user:1", at, 1)
		}); got != 0 {
			t.Errorf("multi AllowAt allocates %v per call, want 0", got)
		}
	})
}

// TestHammer: 64 goroutines race on one key over a frozen clock; exactly the limit is
// admitted, in every algorithm and in a multi-limit.
func TestHammer(t *testing.T) {
	const limit, goroutines, tries = 100, 64, 20
	specs := []redstream.Spec{
		redstream.TokenBucket(limit, 0.001),
		redstream.LeakyBucket(limit, 0.001),
		redstream.SlidingWindow(time.Hour, limit),
		redstream.SlidingCounter(time.Hour, limit),
		redstream.FixedWindow(time.Hour, limit),
	}
	frozen := func() time.Time { return t0 }
	limiters := map[string]redstream.Limiter{}
	for _, spec := range specs {
		limiters[string(spec.Algorithm)] = newLimiter(t, spec, Options{Clock: frozen})
	}
	m, err := NewMultiLimiter(append(specs, redstream.FixedWindow(time.Hour, limit+50)), Options{Clock: frozen})
	if err != nil {
		t.Fatal(err)
	}
	limiters["multi"] = m
	for name, l := range limiters {
		t.Run(name, func(t *testing.T) {
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < tries; i++ {
						d, err := l.AllowN(context.Background(), "hot", time.Time{}, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if got := admitted.Load(); got != limit {
				t.Errorf("admitted %d of %d requests, want exactly %d", got, goroutines*tries, limit)
			}
		})
	}
}

// TestEviction checks the sweep rule on one shard with threshold 4: a new key arriving at a
// shard that holds its mark of keys sweeps the recovered ones; the mark becomes
// max(threshold, 2 × keys left).
func TestEviction(t *testing.T) {
	for _, spec := range allSpecs {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l := newLimiter(t, spec, Options{Shards: 1, SweepThreshold: 4})
			ctx := context.Background()
			use := func(key string, at time.Time) {
				t.Helper()
				if d, err := l.AllowN(ctx, key, at, 1); err != nil || !d.Allowed {
					t.Fatalf("AllowAt(%q): %+v, %v", key, d, err)
				}
			}
			for i := 0; i < 4; i++ {
				use("a"+strconv.Itoa(i), t0)
			}
			if got := l.TrackedKeys(); got != 4 {
				t.Fatalf("TrackedKeys = %d, want 4", got)
			}
			// At the same instant nothing has recovered: the sweep keeps all 4 and the
			// mark becomes 8.
			use("b0", t0)
			if got := l.TrackedKeys(); got != 5 {
				t.Fatalf("TrackedKeys = %d, want 5", got)
			}
			for i := 1; i < 3; i++ {
				use("b"+strconv.Itoa(i), t0)
			}
			if got := l.TrackedKeys(); got != 7 {
				t.Fatalf("TrackedKeys = %d, want 7 (below the mark of 8)", got)
			}
			// An hour later every key has recovered: the 8th key arrives below the mark...
			later := t0.Add(time.Hour)
			use("c0", later)
			if got := l.TrackedKeys(); got != 8 {
				t.Fatalf("TrackedKeys = %d, want 8", got)
			}
			// ...and the 9th finds the shard at its mark and sweeps the 7 recovered keys;
			// c0, just used, stays.
			use("c1", later)
			if got := l.TrackedKeys(); got != 2 {
				t.Fatalf("TrackedKeys after the sweep = %d, want 2", got)
			}
			// A swept key starts over as a new key.
			d, err := l.AllowN(ctx, "a0", later, 1)
			if err != nil || !d.Allowed || d.Remaining != 2 {
				t.Fatalf("swept key: %+v, %v; want allowed with Remaining 2", d, err)
			}
		})
	}
}

// TestEvictionBoundsMemory: 200k distinct keys, each used once while time moves on, leave
// at most about Shards × SweepThreshold keys tracked.
func TestEvictionBoundsMemory(t *testing.T) {
	specs := append([]redstream.Spec{}, allSpecs...)
	for i := range specs {
		specs[i].Rate *= 1000 // buckets recover within a few ms
		specs[i].Window /= 1000
	}
	for _, spec := range specs {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l := newLimiter(t, spec, Options{Shards: 8})
			m, err := NewMultiLimiter([]redstream.Spec{spec, spec}, Options{Shards: 8})
			if err != nil {
				t.Fatal(err)
			}
			at := t0
			peak := 0
			for i := 0; i < 200_000; i++ {
				at = at.Add(10 * time.Microsecond)
				key := "k" + strconv.Itoa(i)
				if _, err := l.AllowN(context.Background(), key, at, 1); err != nil {
					t.Fatal(err)
				}
				if _, err := m.AllowN(context.Background(), key, at, 1); err != nil {
					t.Fatal(err)
				}
				if i%1000 == 0 {
					peak = max(peak, l.TrackedKeys(), m.TrackedKeys())
				}
			}
			if bound := 8 * DefaultSweepThreshold; peak > bound {
				t.Errorf("peak TrackedKeys = %d, want at most %d", peak, bound)
			}
			if peak == 0 {
				t.Errorf("peak TrackedKeys = 0: the fixture tracked no key")
			}
		})
	}
}

// TestEvictionIsInvisible: with time moving forward, a limiter that sweeps on almost every
// new key decides exactly like one that never sweeps.
func TestEvictionIsInvisible(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(1, 3).Draw(rt, "limits")
		specs := make([]redstream.Spec, k)
		for i := range specs {
			specs[i] = rapid.SampledFrom(allSpecs).Draw(rt, "spec")
		}
		sweeping := Options{Shards: 1, SweepThreshold: 1}
		keeping := Options{Shards: 1, SweepThreshold: 1 << 30}
		a, _ := NewLimiter(specs[0], sweeping)
		b, _ := NewLimiter(specs[0], keeping)
		ma, _ := NewMultiLimiter(specs, sweeping)
		mb, _ := NewMultiLimiter(specs, keeping)
		at := t0
		for i := rapid.IntRange(1, 200).Draw(rt, "steps"); i > 0; i-- {
			at = at.Add(time.Duration(rapid.Int64Range(0, 1500).Draw(rt, "dt")) * time.Millisecond)
			key := rapid.SampledFrom([]string{"a", "b", "c", "d", "e"}).Draw(rt, "key")
			n := rapid.Int64Range(1, 3).Draw(rt, "n")
			for _, pair := range [][2]redstream.Limiter{{a, b}, {ma, mb}} {
				da, ea := pair[0].AllowN(context.Background(), key, at, n)
				db, eb := pair[1].AllowN(context.Background(), key, at, n)
				if da != db || (ea == nil) != (eb == nil) {
					rt.Fatalf("%T at %v key %q n %d: sweeping %+v %v, keeping %+v %v", pair[0], at, key, n, da, ea, db, eb)
				}
			}
		}
	})
}

// TestHammerWhileRebuilding: goroutines race on a hot key while others keep adding keys to
// the same shard, so the shard's slots are rebuilt (swept and grown) under the lock-free
// bucket deciders all the time. Exactly the limit of the hot key is admitted, and every
// key is tracked.
func TestHammerWhileRebuilding(t *testing.T) {
	const limit, goroutines, tries = 200, 16, 200
	for _, tc := range []struct {
		spec redstream.Spec
		hot  string
	}{
		{redstream.TokenBucket(limit, 0.001), "hot"},
		{redstream.LeakyBucket(limit, 0.001), "hot"},
		{redstream.TokenBucket(limit, 0.001), "a hot key longer than fifteen bytes"},
	} {
		spec := tc.spec
		t.Run(string(spec.Algorithm)+"/"+tc.hot, func(t *testing.T) {
			l := newLimiter(t, spec, Options{Shards: 1, SweepThreshold: 1, Clock: func() time.Time { return t0 }})
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < tries; i++ {
						if g%2 == 1 {
							key := "k" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
							if g%4 == 1 {
								key = "a-key-longer-than-fifteen-bytes:" + key
							}
							if d, err := l.AllowN(context.Background(), key, time.Time{}, 1); err != nil || !d.Allowed {
								t.Errorf("new key %s: %+v, %v", key, d, err)
								return
							}
							continue
						}
						d, err := l.AllowN(context.Background(), tc.hot, time.Time{}, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if got := admitted.Load(); got != limit {
				t.Errorf("hot key admitted %d, want exactly %d", got, limit)
			}
			if got, want := l.TrackedKeys(), 1+goroutines/2*tries; got != want {
				t.Errorf("TrackedKeys = %d, want %d", got, want)
			}
		})
	}
}

// TestKeyForms: keys that differ only in length, trailing zero bytes or around the length
// at which keys stop being packed inline all get buckets of their own.
func TestKeyForms(t *testing.T) {
	var keys []string
	seen := map[string]bool{}
	const maxShortKey = 15 // the longest key the bucket table keeps inline
	for n := 1; n <= 2*maxShortKey+2; n++ {
		for _, k := range []string{strings.Repeat("k", n), strings.Repeat("k", n-1) + "\x00", "\x00" + strings.Repeat("\xff", n-1)} {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	for _, spec := range []redstream.Spec{redstream.TokenBucket(1, 0.001), redstream.LeakyBucket(1, 0.001)} {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			l := newLimiter(t, spec, Options{Shards: 2})
			ctx := context.Background()
			for _, k := range keys {
				if d, err := l.AllowN(ctx, k, t0, 1); err != nil || !d.Allowed {
					t.Fatalf("first request for %q: %+v, %v", k, d, err)
				}
			}
			for _, k := range keys {
				if d, err := l.AllowN(ctx, k, t0, 1); err != nil || d.Allowed {
					t.Fatalf("second request for %q: %+v, %v; want denied", k, d, err)
				}
			}
			if got := l.TrackedKeys(); got != len(keys) {
				t.Errorf("TrackedKeys = %d, want %d", got, len(keys))
			}
		})
	}
}
