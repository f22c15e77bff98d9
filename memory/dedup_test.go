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
)

func newDedup(t *testing.T, spec redstream.DedupSpec, opts Options) redstream.Deduplicator {
	t.Helper()
	d, err := NewDeduplicator(spec, opts)
	if err != nil {
		t.Fatalf("NewDeduplicator(%+v): %v", spec, err)
	}
	return d
}

func TestNewDeduplicator(t *testing.T) {
	t.Run("set", func(t *testing.T) {
		if _, ok := newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupSet}, Options{}).(*setDedup); !ok {
			t.Error("not a *setDedup")
		}
	})
	t.Run("bloom defaults", func(t *testing.T) {
		d, ok := newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupBloom}, Options{}).(*bloomDedup)
		if !ok {
			t.Fatal("not a *bloomDedup")
		}
		want, _ := core.NewBloom(1_000_000, 0.03, 1) // the defaults of DedupSpec
		if got := d.params(); got != want {
			t.Errorf("Params = %+v, want %+v", got, want)
		}
	})
	t.Run("bloom shards", func(t *testing.T) {
		d := newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: 1000, FPRate: 0.01, Shards: 4}, Options{})
		want, _ := core.NewBloom(1000, 0.01, 4)
		if got := d.(*bloomDedup).params(); got != want {
			t.Errorf("Params = %+v, want %+v", got, want)
		}
	})
	t.Run("windowed defaults", func(t *testing.T) {
		d := newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupWindowed}, Options{})
		w, ok := d.(*windowDedup)
		if !ok {
			t.Fatal("not a *windowDedup")
		}
		if w.window() != time.Hour { // the default window
			t.Errorf("Window = %v, want 1h", w.window())
		}
		if _, ok := d.(redstream.TimedDeduplicator); !ok {
			t.Error("does not implement redstream.TimedDeduplicator")
		}
	})
}

func TestNewDeduplicatorErrors(t *testing.T) {
	tests := []struct {
		name string
		spec redstream.DedupSpec
		opts Options
	}{
		{"unknown strategy", redstream.DedupSpec{Strategy: "cuckoo"}, Options{}},
		{"no strategy", redstream.DedupSpec{}, Options{}},
		{"bloom insertions negative", redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: -1}, Options{}},
		{"bloom fp rate 1", redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: 1}, Options{}},
		{"bloom fp rate negative", redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: -0.1}, Options{}},
		{"bloom fp rate NaN", redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: math.NaN()}, Options{}},
		{"bloom shards negative", redstream.DedupSpec{Strategy: redstream.DedupBloom, Shards: -1}, Options{}},
		{"bloom above MaxBloomBits", redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: 1 << 40, FPRate: 0.01}, Options{}},
		{"windowed window negative", redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: -time.Second}, Options{}},
		{"windowed window below 1µs", redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Nanosecond}, Options{}},
		{"set bad shards", redstream.DedupSpec{Strategy: redstream.DedupSet}, Options{Shards: 6}},
		{"bloom bad shards", redstream.DedupSpec{Strategy: redstream.DedupBloom}, Options{Shards: 6}},
		{"windowed bad threshold", redstream.DedupSpec{Strategy: redstream.DedupWindowed}, Options{SweepThreshold: -2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDeduplicator(tt.spec, tt.opts)
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("error = %v, want ErrInvalidConfig", err)
			}
			if d != nil {
				t.Errorf("returned %#v with an error, want a nil interface", d)
			}
			if !strings.HasPrefix(err.Error(), "memory: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
		})
	}
	if _, err := newBloomDedup(redstream.DedupSpec{Insertions: -1, FPRate: 0.01}, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("newBloomDedup(-1, 0.01): %v, want ErrInvalidConfig", err)
	}
	if _, err := newWindowDedup(0, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("newWindowDedup(0): %v, want ErrInvalidConfig", err)
	}
}

// allDedups returns one deduplicator of each strategy.
func allDedups(t *testing.T, opts Options) map[string]redstream.Deduplicator {
	t.Helper()
	return map[string]redstream.Deduplicator{
		"set":      newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupSet}, opts),
		"bloom":    newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: 10_000, FPRate: 0.001}, opts),
		"windowed": newDedup(t, redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}, opts),
	}
}

// TestDedupBasics: new, then duplicate; MarkSeen; the empty element; UniqueCount; Clear.
func TestDedupBasics(t *testing.T) {
	clk := &fakeClock{now: t0}
	ctx := context.Background()
	for name, d := range allDedups(t, Options{Clock: clk.Now}) {
		t.Run(name, func(t *testing.T) {
			must := func(got bool, err error, want bool, what string) {
				t.Helper()
				if err != nil || got != want {
					t.Fatalf("%s = %v, %v; want %v", what, got, err, want)
				}
			}
			got, err := d.IsDuplicate(ctx, "order-1")
			must(got, err, false, "IsDuplicate(new)")
			got, err = d.CheckAndMark(ctx, "order-1")
			must(got, err, false, "CheckAndMark(new)")
			got, err = d.CheckAndMark(ctx, "order-1")
			must(got, err, true, "CheckAndMark(again)")
			got, err = d.IsDuplicate(ctx, "order-1")
			must(got, err, true, "IsDuplicate(seen)")
			if err := d.MarkSeen(ctx, "order-2"); err != nil {
				t.Fatal(err)
			}
			got, err = d.IsDuplicate(ctx, "order-2")
			must(got, err, true, "IsDuplicate(marked)")

			// The empty element is never a duplicate and never recorded.
			for i := 0; i < 2; i++ {
				got, err = d.CheckAndMark(ctx, "")
				must(got, err, false, `CheckAndMark("")`)
				if err := d.MarkSeen(ctx, ""); err != nil {
					t.Fatal(err)
				}
				got, err = d.IsDuplicate(ctx, "")
				must(got, err, false, `IsDuplicate("")`)
			}
			if n, err := d.UniqueCount(ctx); err != nil || n != 2 {
				t.Fatalf("UniqueCount = %d, %v; want 2", n, err)
			}
			if err := d.Clear(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := d.UniqueCount(ctx); err != nil || n != 0 {
				t.Fatalf("UniqueCount after Clear = %d, %v; want 0", n, err)
			}
			got, err = d.CheckAndMark(ctx, "order-1")
			must(got, err, false, "CheckAndMark after Clear")
		})
	}
}

// TestSeedWindowed: exactly one window after the last sighting an element is not a
// duplicate, and a duplicate sighting refreshes the last-seen time.
func TestSeedWindowed(t *testing.T) {
	ctx := context.Background()
	const w = time.Hour
	d, err := newWindowDedup(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(got bool, err error, want bool, what string) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s = %v, %v; want %v", what, got, err, want)
		}
	}
	got, err := d.CheckAndMarkAt(ctx, "order-1", t0)
	check(got, err, false, "CheckAndMarkAt(t0)")
	got, err = d.IsDuplicateAt(ctx, "order-1", t0.Add(w-time.Microsecond))
	check(got, err, true, "IsDuplicateAt(t0+window-1µs)")
	got, err = d.IsDuplicateAt(ctx, "order-1", t0.Add(w))
	check(got, err, false, "IsDuplicateAt(t0+window)")

	// A duplicate sighting at t0+30m refreshes last-seen: at t0+window it is still a
	// duplicate, and only at t0+30m+window it is new again.
	got, err = d.CheckAndMarkAt(ctx, "order-1", t0.Add(30*time.Minute))
	check(got, err, true, "CheckAndMarkAt(t0+30m)")
	got, err = d.IsDuplicateAt(ctx, "order-1", t0.Add(w))
	check(got, err, true, "IsDuplicateAt(t0+window) after the refresh")
	got, err = d.IsDuplicateAt(ctx, "order-1", t0.Add(30*time.Minute+w-time.Microsecond))
	check(got, err, true, "IsDuplicateAt(t0+30m+window-1µs)")
	got, err = d.CheckAndMarkAt(ctx, "order-1", t0.Add(30*time.Minute+w))
	check(got, err, false, "CheckAndMarkAt(t0+30m+window)")

	// Time going backwards never brings an expired element back: the deduplicator runs at
	// its high-water mark.
	got, err = d.IsDuplicateAt(ctx, "order-1", t0)
	check(got, err, true, "IsDuplicateAt(t0) after a later write")
}

func TestWindowedUniqueCountAndPruning(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: t0}
	d, err := newWindowDedup(time.Minute, Options{Clock: clk.Now, Shards: 1, SweepThreshold: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		d.MarkSeen(ctx, "a"+strconv.Itoa(i))
	}
	clk.Advance(30 * time.Second)
	d.MarkSeen(ctx, "b") // sweeps: nothing expired yet
	if n, _ := d.UniqueCount(ctx); n != 5 {
		t.Fatalf("UniqueCount = %d, want 5", n)
	}
	clk.Advance(30 * time.Second) // the a's are exactly one window old
	if n, _ := d.UniqueCount(ctx); n != 1 {
		t.Fatalf("UniqueCount = %d, want 1 (only b is live)", n)
	}
	// Writes prune: fill the shard up to its mark and the expired a's are gone.
	for i := 0; i < 8; i++ {
		d.MarkSeen(ctx, "c"+strconv.Itoa(i))
	}
	if got := d.t.Len(); got > 9 {
		t.Errorf("map holds %d entries, want the expired ones pruned (at most 9)", got)
	}
	for i := 0; i < 4; i++ {
		if dup, _ := d.IsDuplicate(ctx, "a"+strconv.Itoa(i)); dup {
			t.Errorf("expired a%d is a duplicate", i)
		}
	}
}

func TestDedupBadTime(t *testing.T) {
	ctx := context.Background()
	d, err := newWindowDedup(time.Second, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Unix(-1, 0), time.UnixMicro(core.MaxTime + 1)} {
		if _, err := d.IsDuplicateAt(ctx, "x", at); !errors.Is(err, redstream.ErrInvalidTime) {
			t.Errorf("IsDuplicateAt(%v): %v, want ErrInvalidTime", at, err)
		}
		if _, err := d.CheckAndMarkAt(ctx, "x", at); !errors.Is(err, redstream.ErrInvalidTime) {
			t.Errorf("CheckAndMarkAt(%v): %v, want ErrInvalidTime", at, err)
		}
		if _, err := d.CheckAndMarkAt(ctx, "x", at); !errors.Is(err, redstream.ErrInvalidTime) {
			t.Errorf("CheckAndMarkAt(%v): %v, want ErrInvalidTime", at, err)
		}
	}
	if n, _ := d.UniqueCount(ctx); n != 0 {
		t.Errorf("UniqueCount after bad times = %d, want 0", n)
	}
}

// TestBloomMatchesCore: the filter sets exactly the bits core.Bloom.Locate names.
func TestBloomMatchesCore(t *testing.T) {
	for _, shards := range []int{1, 3} {
		b, err := core.NewBloom(500, 0.01, shards)
		if err != nil {
			t.Fatal(err)
		}
		d, err := newBloom(b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[[2]uint64]bool{}
		for i := 0; i < 300; i++ {
			e := "element-" + strconv.Itoa(i)
			d.MarkSeen(context.Background(), e)
			shard, pos := b.Locate([]byte(e), nil)
			for _, p := range pos {
				want[[2]uint64{uint64(shard), p}] = true
			}
		}
		got := 0
		for s := 0; s < b.Shards; s++ {
			for p := uint64(0); p < b.ShardBits; p++ {
				set := d.words[uint64(s)*d.shardWrds+p/64]&(1<<(p%64)) != 0
				if set != want[[2]uint64{uint64(s), p}] {
					t.Fatalf("shards=%d: bit %d of shard %d = %v, want %v", shards, p, s, set, !set)
				}
				if set {
					got++
				}
			}
		}
		if got != len(want) {
			t.Fatalf("shards=%d: %d bits set, want %d", shards, got, len(want))
		}
	}
}

// TestBloomAccuracy: no false negatives, a false-positive rate near the target, and Count
// close to the number of distinct elements. The hash is deterministic, so is the test.
func TestBloomAccuracy(t *testing.T) {
	const n, p = 20_000, 0.01
	ctx := context.Background()
	d, err := newBloomDedup(redstream.DedupSpec{Insertions: n, FPRate: p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if dup, _ := d.CheckAndMark(ctx, "in-"+strconv.Itoa(i)); dup {
			// A false positive on insertion: allowed, but it must not be counted.
			continue
		}
	}
	for i := 0; i < n; i++ {
		if dup, _ := d.IsDuplicate(ctx, "in-"+strconv.Itoa(i)); !dup {
			t.Fatalf("false negative for in-%d", i)
		}
	}
	fp := 0
	const probes = 50_000
	for i := 0; i < probes; i++ {
		if dup, _ := d.IsDuplicate(ctx, "out-"+strconv.Itoa(i)); dup {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 2*p {
		t.Errorf("false-positive rate %.4f, want about %v", rate, p)
	}
	uc, _ := d.UniqueCount(ctx)
	if uc > n || uc < n*98/100 {
		t.Errorf("UniqueCount = %d, want at most %d and close to it", uc, n)
	}
	if c := d.estimate(); math.Abs(float64(c)-n) > 0.03*n {
		t.Errorf("Count = %d, want %d within 3%%", c, n)
	}
}

// TestDedupHammer: 64 goroutines check-and-mark the same 200 new elements; each element is
// new to exactly one of them.
func TestDedupHammer(t *testing.T) {
	const goroutines, elements = 64, 200
	clk := func() time.Time { return t0 }
	for name, d := range allDedups(t, Options{Clock: clk}) {
		t.Run(name, func(t *testing.T) {
			var news [elements]atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < elements; i++ {
						dup, err := d.CheckAndMark(context.Background(), "e"+strconv.Itoa(i))
						if err != nil {
							t.Error(err)
							return
						}
						if !dup {
							news[i].Add(1)
						}
					}
				}()
			}
			wg.Wait()
			for i := range news {
				if got := news[i].Load(); got != 1 {
					t.Fatalf("element e%d was new to %d goroutines, want exactly 1", i, got)
				}
			}
			if n, _ := d.UniqueCount(context.Background()); n != elements {
				t.Errorf("UniqueCount = %d, want %d", n, elements)
			}
		})
	}
}

func TestDedupAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts are not meaningful under -cover or -race")
	}
	ctx := context.Background()
	for name, d := range allDedups(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			d.MarkSeen(ctx, "order-1")
			if got := testing.AllocsPerRun(1000, func() { d.CheckAndMark(ctx, "order-1") }); got != 0 {
				t.Errorf("CheckAndMark of a known element allocates %v, want 0", got)
			}
			if got := testing.AllocsPerRun(1000, func() { d.IsDuplicate(ctx, "order-2") }); got != 0 {
				t.Errorf("IsDuplicate allocates %v, want 0", got)
			}
		})
	}
}
