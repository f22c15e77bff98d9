package core

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

const ms = Millisecond

// base is 2026-01-01T00:00:00Z in µs.
const base int64 = 1767225600000000

func TestSeedSlidingWindow(t *testing.T) {
	p, err := NewSlidingLog(1000*ms, 5)
	if err != nil {
		t.Fatal(err)
	}
	var l Log
	for i := int64(0); i < 5; i++ {
		d, err := p.Step(&l, base+i*100*ms, 1)
		if err != nil || !d.Allowed || d.Remaining != 4-i {
			t.Fatalf("request %d: got %+v, %v; want allowed with %d remaining", i+1, d, err, 4-i)
		}
	}
	d, _ := p.Step(&l, base+500*ms, 1)
	if d.Allowed {
		t.Fatalf("6th request allowed: %+v", d)
	}
	// The first entry (at base) expires at base+1000ms: RetryAfter points exactly there.
	if want := 500 * ms; d.RetryAfter != want {
		t.Fatalf("RetryAfter = %d, want %d", d.RetryAfter, want)
	}
	if d, _ := p.Step(&l, base+1000*ms-1, 1); d.Allowed {
		t.Fatalf("admitted 1 µs before the first entry is a full window old: %+v", d)
	}
	// Exactly window old no longer counts.
	if d, _ := p.Step(&l, base+1000*ms, 1); !d.Allowed {
		t.Fatalf("not admitted when the first entry is exactly a window old: %+v", d)
	}
}

func TestSeedTokenBucket(t *testing.T) {
	b, err := NewTokenBucket(10, 5)
	if err != nil {
		t.Fatal(err)
	}
	if b.Interval != 200*ms || b.Burst != 10 {
		t.Fatalf("params %+v, want interval 200ms, burst 10", b)
	}
	var tat int64
	for i := 0; i < 10; i++ {
		var d Decision
		tat, d, _ = b.Step(tat, base, 1)
		if !d.Allowed {
			t.Fatalf("burst request %d denied: %+v", i+1, d)
		}
	}
	tat, d, _ := b.Step(tat, base, 1)
	if d.Allowed || d.RetryAfter != 200*ms {
		t.Fatalf("11th: %+v, want denied with RetryAfter 200ms", d)
	}
	// Then one every 200 ms.
	for k := int64(1); k <= 5; k++ {
		now := base + k*200*ms
		if _, d, _ := b.Step(tat, now-1, 1); d.Allowed {
			t.Fatalf("admitted 1µs before slot %d", k)
		}
		tat, d, _ = b.Step(tat, now, 1)
		if !d.Allowed {
			t.Fatalf("slot %d denied: %+v", k, d)
		}
		if _, d, _ := b.Step(tat, now, 1); d.Allowed {
			t.Fatalf("two admitted in slot %d", k)
		}
	}
}

func TestSeedLeakyBucket(t *testing.T) {
	b, err := NewLeakyBucket(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	var tat int64
	var d Decision
	tat, d, _ = b.Step(tat, base, 1)
	if !d.Allowed || d.Delay != 0 || d.Remaining != 1 {
		t.Fatalf("1st: %+v, want allowed, no delay, 1 remaining", d)
	}
	tat, d, _ = b.Step(tat, base, 1)
	if !d.Allowed || d.Delay != Second {
		t.Fatalf("2nd: %+v, want allowed with a 1s shaping delay", d)
	}
	tat, d, _ = b.Step(tat, base, 1)
	if d.Allowed || d.RetryAfter != Second {
		t.Fatalf("3rd: %+v, want denied, retry after 1s", d)
	}
	if _, d, _ = b.Step(tat, base+Second, 1); !d.Allowed {
		t.Fatalf("after 1s: %+v, want allowed", d)
	}
}

func TestConstructorsRejectBadParameters(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name string
		err  error
	}{
		{"token capacity 0", func() error { _, err := NewTokenBucket(0, 5); return err }()},
		{"token capacity negative", func() error { _, err := NewTokenBucket(-1, 5); return err }()},
		{"token capacity NaN", func() error { _, err := NewTokenBucket(nan, 5); return err }()},
		{"token capacity Inf", func() error { _, err := NewTokenBucket(inf, 5); return err }()},
		{"token capacity below 1", func() error { _, err := NewTokenBucket(0.5, 5); return err }()},
		{"token rate 0", func() error { _, err := NewTokenBucket(10, 0); return err }()},
		{"token rate negative", func() error { _, err := NewTokenBucket(10, -3); return err }()},
		{"token rate NaN", func() error { _, err := NewTokenBucket(10, nan); return err }()},
		{"token rate Inf", func() error { _, err := NewTokenBucket(10, inf); return err }()},
		{"token rate above 1e6", func() error { _, err := NewTokenBucket(10, 2e6); return err }()},
		{"token tolerance too long", func() error { _, err := NewTokenBucket(1e12, 1e-3); return err }()},
		{"leaky capacity 0", func() error { _, err := NewLeakyBucket(0, 1); return err }()},
		{"leaky rate NaN", func() error { _, err := NewLeakyBucket(2, nan); return err }()},
		{"sliding window 0", func() error { _, err := NewSlidingLog(0, 5); return err }()},
		{"sliding window negative", func() error { _, err := NewSlidingLog(-1, 5); return err }()},
		{"sliding limit 0", func() error { _, err := NewSlidingLog(Second, 0); return err }()},
		{"sliding limit negative", func() error { _, err := NewSlidingLog(Second, -5); return err }()},
		{"sliding limit above MaxLogLimit", func() error { _, err := NewSlidingLog(Second, MaxLogLimit+1); return err }()},
		{"bloom p subnormal", func() error { _, err := NewBloom(10, 5e-324, 1); return err }()},
		{"counter window 0", func() error { _, err := NewSlidingCounter(0, 5); return err }()},
		{"counter limit x window too large", func() error { _, err := NewSlidingCounter(86400*Second, 1<<30); return err }()},
		{"fixed limit 0", func() error { _, err := NewFixedWindow(Second, 0); return err }()},
		{"fixed window too long", func() error { _, err := NewFixedWindow(MaxDuration+1, 1); return err }()},
		{"dedup window 0", func() error { _, err := NewWindowDedup(0); return err }()},
		{"bloom n 0", func() error { _, err := NewBloom(0, 0.01, 1); return err }()},
		{"bloom p 0", func() error { _, err := NewBloom(10, 0, 1); return err }()},
		{"bloom p 1", func() error { _, err := NewBloom(10, 1, 1); return err }()},
		{"bloom p NaN", func() error { _, err := NewBloom(10, nan, 1); return err }()},
		{"bloom shards negative", func() error { _, err := NewBloom(10, 0.1, -1); return err }()},
		{"backoff max < initial", func() error { _, err := NewBackoff(10, 5, 2, JitterNone); return err }()},
		{"backoff multiplier < 1", func() error { _, err := NewBackoff(1, 5, 0.5, JitterNone); return err }()},
		{"backoff multiplier NaN", func() error { _, err := NewBackoff(1, 5, nan, JitterNone); return err }()},
		{"backoff multiplier Inf", func() error { _, err := NewBackoff(1, 5, inf, JitterNone); return err }()},
		{"backoff jitter unknown", func() error { _, err := NewBackoff(1, 5, 2, Jitter(9)); return err }()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, ErrInvalidConfig) {
				t.Fatalf("got %v, want an error wrapping ErrInvalidConfig", c.err)
			}
			if !strings.HasPrefix(c.err.Error(), "redstream: ") {
				t.Fatalf("message %q does not start with the package name", c.err)
			}
		})
	}
}

// stepper adapts each limiter to one signature for the generic tests below.
type stepper struct {
	name  string
	limit int64
	step  func(now, n int64) (Decision, error)
}

func steppers(t *testing.T) []stepper {
	t.Helper()
	tb, _ := NewTokenBucket(5, 10)
	lb, _ := NewLeakyBucket(3.5, 2)
	sl, _ := NewSlidingLog(Second, 4)
	sc, _ := NewSlidingCounter(Second, 6)
	fw, _ := NewFixedWindow(Second, 3)
	var tat1, tat2 int64
	var log Log
	var s1, s2 WindowState
	return []stepper{
		{"token", tb.Burst, func(now, n int64) (Decision, error) {
			var d Decision
			var err error
			tat1, d, err = tb.Step(tat1, now, n)
			return d, err
		}},
		{"leaky", lb.Burst, func(now, n int64) (Decision, error) {
			var d Decision
			var err error
			tat2, d, err = lb.Step(tat2, now, n)
			return d, err
		}},
		{"sliding", sl.Limit, func(now, n int64) (Decision, error) { return sl.Step(&log, now, n) }},
		{"counter", sc.Limit, func(now, n int64) (Decision, error) {
			var d Decision
			var err error
			s1, d, err = sc.Step(s1, now, n)
			return d, err
		}},
		{"fixed", fw.Limit, func(now, n int64) (Decision, error) {
			var d Decision
			var err error
			s2, d, err = fw.Step(s2, now, n)
			return d, err
		}},
	}
}

func TestBadCostAndTime(t *testing.T) {
	for _, s := range steppers(t) {
		t.Run(s.name, func(t *testing.T) {
			for _, c := range []struct {
				now, n int64
				want   error
			}{
				{base, 0, ErrInvalidCost},
				{base, -1, ErrInvalidCost},
				{base, s.limit + 1, ErrCostTooLarge},
				{base, math.MaxInt64, ErrCostTooLarge},
				{-1, 1, ErrInvalidTime},
				{MaxTime + 1, 1, ErrInvalidTime},
			} {
				if _, err := s.step(c.now, c.n); !errors.Is(err, c.want) {
					t.Errorf("step(now=%d, n=%d) = %v, want %v", c.now, c.n, err, c.want)
				}
			}
			// A cost of exactly the limit is admitted on a fresh key at the epoch and at MaxTime.
			if d, err := s.step(0, s.limit); err != nil || !d.Allowed {
				t.Errorf("full-limit request at the epoch: %+v, %v", d, err)
			}
		})
	}
}

// TestRetryAfterIsExact checks, under random traffic including backwards time, that a denied
// request is still denied 1 µs before RetryAfter and admitted exactly at it, that nothing is
// ever negative, and that ResetAfter returns the key to its initial state.
func TestRetryAfterIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		for _, s := range steppers(t) {
			now := base + r.Int64N(10*Second)
			for i := 0; i < 40; i++ {
				now += r.Int64N(300*ms) - 50*ms
				n := 1 + r.Int64N(s.limit)
				d, err := s.step(now, n)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if d.Remaining < 0 || d.RetryAfter < 0 || d.ResetAfter < 0 || d.Delay < 0 || d.Remaining > d.Limit {
					t.Fatalf("%s: out-of-range decision %+v", s.name, d)
				}
				if d.Allowed {
					continue
				}
				if d.RetryAfter == 0 {
					t.Fatalf("%s: denied with RetryAfter 0: %+v", s.name, d)
				}
				// Probing at RetryAfter-1 must not admit (and so must not change state).
				if d2, _ := s.step(now+d.RetryAfter-1, n); d2.Allowed {
					t.Fatalf("%s: admitted 1µs before RetryAfter %d (n=%d)", s.name, d.RetryAfter, n)
				}
				if d2, _ := s.step(now+d.RetryAfter, n); !d2.Allowed {
					t.Fatalf("%s: denied at RetryAfter %d (n=%d): %+v", s.name, d.RetryAfter, n, d2)
				}
				now += d.RetryAfter
			}
		}
	}
}

func TestTimeGoingBackwards(t *testing.T) {
	b, _ := NewTokenBucket(2, 1)
	tat, _, _ := b.Step(0, base, 2)
	// An earlier time sees the bucket as it was left, never negative.
	_, d, err := b.Step(tat, base-10*Second, 1)
	if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != 11*Second {
		t.Fatalf("backwards token bucket: %+v, %v", d, err)
	}
	p, _ := NewSlidingLog(Second, 2)
	var l Log
	p.Step(&l, base, 1)
	d, _ = p.Step(&l, base-5*Second, 1)
	if !d.Allowed || l.Newest() != base {
		t.Fatalf("backwards log: %+v, newest %d: the entry must be recorded at the newest time", d, l.Newest())
	}
	if d.ResetAfter != 6*Second {
		t.Fatalf("ResetAfter %d is measured from the caller's now, want 6s", d.ResetAfter)
	}
	fw, _ := NewFixedWindow(Second, 1)
	s, _, _ := fw.Step(WindowState{}, base+Second, 1)
	if _, d, _ := fw.Step(s, base, 1); d.Allowed {
		t.Fatalf("a request from an earlier window must count against the stored one")
	}
}

func TestSlidingCounterErrorAgainstLog(t *testing.T) {
	// The estimate's admissions over steady random traffic stay close to the exact log's.
	window, limit := Second, int64(100)
	sc, _ := NewSlidingCounter(window, limit)
	sl, _ := NewSlidingLog(window, limit)
	r := rand.New(rand.NewPCG(3, 4))
	var s WindowState
	var l Log
	var admittedC, admittedL, overshoot int64
	now := base
	for i := 0; i < 200000; i++ {
		now += r.Int64N(window / limit) // about 2x the limit offered
		var d Decision
		s, d, _ = sc.Step(s, now, 1)
		if d.Allowed {
			admittedC++
		}
		dl, _ := sl.Step(&l, now, 1)
		if dl.Allowed {
			admittedL++
		}
		if d.Allowed && !dl.Allowed {
			overshoot++
		}
	}
	rel := math.Abs(float64(admittedC-admittedL)) / float64(admittedL)
	t.Logf("sliding counter admitted %d, exact log %d (%.2f%% apart), counter admitted %d the log denied",
		admittedC, admittedL, 100*rel, overshoot)
	if rel > 0.05 {
		t.Fatalf("sliding counter is %.1f%% away from the exact log", 100*rel)
	}
}

func TestWindowDedup(t *testing.T) {
	w, _ := NewWindowDedup(Second)
	if w.IsDuplicate(0, false, base) {
		t.Fatal("unseen element is a duplicate")
	}
	last := base
	if !w.IsDuplicate(last, true, base+Second-1) {
		t.Fatal("not a duplicate 1µs before the window ends")
	}
	if w.IsDuplicate(last, true, base+Second) {
		t.Fatal("exactly window after the last sighting is still a duplicate")
	}
	// A duplicate sighting refreshes last-seen: seen at base, base+0.9s, so still a
	// duplicate at base+1.5s.
	last = w.Effective(last, base+900*ms)
	if !w.IsDuplicate(last, true, base+1500*ms) {
		t.Fatal("a duplicate sighting did not refresh the last-seen time")
	}
	// Backwards time runs at the high-water mark: an expired entry stays expired.
	high := base + 5*Second
	if w.IsDuplicate(base, true, w.Effective(high, base+10*ms)) {
		t.Fatal("an expired entry came back when time went backwards")
	}
	if !w.Expired(base, base+Second) || w.Expired(base, base+Second-1) {
		t.Fatal("Expired boundary wrong")
	}
}

func TestBloomSizingAndFalsePositiveRate(t *testing.T) {
	b, err := NewBloom(1_000_000, 0.03, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Bits != 7298441 || b.K != 5 || b.Shards != 1 {
		t.Fatalf("seed default sizing: %+v, want m=7298441, k=5", b)
	}
	for _, c := range []struct {
		n      int64
		p      float64
		shards int
	}{{20000, 0.01, 1}, {20000, 0.03, 4}, {5000, 0.1, 1}} {
		t.Run(fmt.Sprintf("n=%d p=%g shards=%d", c.n, c.p, c.shards), func(t *testing.T) {
			b, _ := NewBloom(c.n, c.p, c.shards)
			bits := make([][]bool, b.Shards)
			for i := range bits {
				bits[i] = make([]bool, b.ShardBits)
			}
			var pos []uint64
			for i := int64(0); i < c.n; i++ {
				var s int
				s, pos = b.Locate([]byte(fmt.Sprintf("in-%d", i)), pos[:0])
				for _, p := range pos {
					bits[s][p] = true
				}
			}
			fp := 0
			const probes = 100000
			for i := 0; i < probes; i++ {
				s, ps := b.Locate([]byte(fmt.Sprintf("out-%d", i)), pos[:0])
				all := true
				for _, p := range ps {
					all = all && bits[s][p]
				}
				if all {
					fp++
				}
			}
			rate := float64(fp) / probes
			t.Logf("fp rate %.4f (target %g), %.2f bits per element, k=%d", rate, c.p, float64(b.Bits)/float64(c.n), b.K)
			if math.Abs(rate-c.p) > 0.15*c.p {
				t.Fatalf("fp rate %.4f is not within ±15%% of %g", rate, c.p)
			}
		})
	}
}

func TestBloomShardsLargeFilters(t *testing.T) {
	b, err := NewBloom(MaxCount/4, 0.001, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.ShardBits > MaxShardBits || uint64(b.Shards)*b.ShardBits < b.Bits {
		t.Fatalf("shards %d of %d bits do not hold %d bits within the string limit", b.Shards, b.ShardBits, b.Bits)
	}
}

func TestBackoff(t *testing.T) {
	b, err := NewBackoff(100*ms, 10*Second, 2, JitterNone)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ attempt, want int64 }{
		{-1, 0}, {0, 0}, {1, 100 * ms}, {2, 200 * ms}, {3, 400 * ms}, {7, 6400 * ms},
		{8, 10 * Second}, {100, 10 * Second}, {math.MaxInt64, 10 * Second},
	} {
		if got := b.Base(c.attempt); got != c.want {
			t.Errorf("Base(%d) = %d, want %d", c.attempt, got, c.want)
		}
	}
	// A truncating fixed point (1µs * 1.5 = 1µs) returns at once, whatever the attempt.
	stuck, _ := NewBackoff(1, 10, 1.5, JitterNone)
	if got := stuck.Base(1 << 62); got != 1 {
		t.Errorf("fixed-point Base = %d, want 1", got)
	}
	fixed, _ := NewBackoff(50*ms, 50*ms, 1, JitterNone)
	if got := fixed.Base(1 << 40); got != 50*ms {
		t.Errorf("fixed Base = %d", got)
	}
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int64) int64 {
		if n <= 0 {
			t.Fatalf("rnd called with %d", n)
		}
		return r.Int64N(n)
	}
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated} {
		bj, _ := NewBackoff(100*ms, 10*Second, 2, j)
		prev := int64(0)
		for attempt := int64(1); attempt < 50; attempt++ {
			d := bj.Delay(attempt, prev, rnd)
			base := bj.Base(attempt)
			lo, hi := int64(0), base
			switch j {
			case JitterEqual:
				lo = base - base/2
			case JitterDecorrelated:
				lo, hi = 100*ms, 10*Second
			}
			if d < lo || d > hi {
				t.Fatalf("%v attempt %d: delay %d outside [%d, %d]", j, attempt, d, lo, hi)
			}
			prev = d
		}
	}
}

func TestCombine(t *testing.T) {
	d := Combine([]Decision{
		{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 5},
		{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 9, ResetAfter: 20},
	})
	if d.Allowed || d.Limit != 3 || d.Remaining != 0 || d.RetryAfter != 9 || d.ResetAfter != 20 {
		t.Fatalf("Combine = %+v", d)
	}
	if !Combine(nil).Allowed {
		t.Fatal("Combine of nothing denies")
	}
}
