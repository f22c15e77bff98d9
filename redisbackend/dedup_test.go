package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

func TestNewDeduplicatorErrors(t *testing.T) {
	c := nopClient(t)
	tests := []struct {
		name string
		dn   string
		spec redstream.DedupSpec
		opts DedupOptions
	}{
		{"unknown strategy", "d", redstream.DedupSpec{Strategy: "BLOOM_FILTERS"}, DedupOptions{}},
		{"no strategy", "d", redstream.DedupSpec{}, DedupOptions{}},
		{"empty name", "", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{}},
		{"negative insertions", "d", redstream.DedupSpec{Strategy: redstream.DedupBloom, Insertions: -1}, DedupOptions{}},
		{"p = 1", "d", redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: 1}, DedupOptions{}},
		{"p < 0", "d", redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: -0.1}, DedupOptions{}},
		{"p NaN", "d", redstream.DedupSpec{Strategy: redstream.DedupBloom, FPRate: math.NaN()}, DedupOptions{}},
		{"negative window", "d", redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: -time.Second}, DedupOptions{}},
		{"brace in prefix", "d", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{KeyPrefix: "{p}"}},
		{"negative SetTTL", "d", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{SetTTL: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDeduplicator(c, tt.dn, tt.spec, tt.opts)
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := NewDeduplicator(nil, "d", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("nil client: err = %v, want ErrInvalidConfig", err)
	}
	if _, err := newBloomDeduplicator(c, "d", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("newBloomDeduplicator with the set strategy: err = %v, want ErrInvalidConfig", err)
	}
}

// TestDedupFactoryDefaults checks the seed's factory defaults.
func TestDedupFactoryDefaults(t *testing.T) {
	c := nopClient(t)
	d, err := NewDeduplicator(c, "d", redstream.DedupSpec{Strategy: redstream.DedupBloom}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := d.(*bloomDedup).Params()
	if b.Insertions != 1_000_000 || b.FPRate != 0.03 {
		t.Errorf("Bloom defaults = n %d, p %g; want 1000000, 0.03", b.Insertions, b.FPRate)
	}
	t.Logf("default Bloom filter: m = %d bits (%.2f bits per element, %d KiB), k = %d, shards = %d",
		b.Bits, d.(*bloomDedup).BitsPerElement(), b.Bits/8/1024, b.K, b.Shards)
	w, err := NewDeduplicator(c, "d", redstream.DedupSpec{Strategy: redstream.DedupWindowed}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.(*windowDedup).Window(); got != time.Hour {
		t.Errorf("windowed default = %v, want 1h", got)
	}
	s, err := NewDeduplicator(c, "orders", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.(*setDedup).Key(), "streaming:dedup:{orders}:set"; got != want {
		t.Errorf("set key = %q, want %q", got, want)
	}
}

func TestDedupBadInput(t *testing.T) {
	c := nopClient(t)
	ctx := context.Background()
	defer func(old int) { maxBulk = old }(maxBulk)
	maxBulk = 1 << 20
	big := strings.Repeat("e", 1<<20)
	for _, s := range []redstream.DedupStrategy{redstream.DedupSet, redstream.DedupWindowed} {
		d, err := NewDeduplicator(c, uniq("bad"), redstream.DedupSpec{Strategy: s}, DedupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.CheckAndMark(ctx, big); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: CheckAndMark(1 MB) with a 1 MB limit: err = %v, want ErrTooLarge", s, err)
		}
		if _, err := d.IsDuplicate(ctx, big); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: IsDuplicate(1 MB): err = %v, want ErrTooLarge", s, err)
		}
		for _, e := range []string{""} {
			if dup, err := d.CheckAndMark(ctx, e); dup || err != nil {
				t.Errorf("%s: CheckAndMark(%q) = %v, %v; want false, nil", s, e, dup, err)
			}
		}
		if n, err := d.UniqueCount(ctx); n != 0 || err != nil {
			t.Errorf("%s: UniqueCount after only bad input = %d, %v; want 0", s, n, err)
		}
	}
	w, _ := newWindowDeduplicator(c, uniq("bad"), time.Second, DedupOptions{})
	if _, err := w.CheckAndMarkAt(ctx, "e", time.UnixMicro(-1)); !errors.Is(err, redstream.ErrInvalidTime) {
		t.Errorf("CheckAndMarkAt before the epoch: err = %v, want ErrInvalidTime", err)
	}
	if _, err := w.IsDuplicateAt(ctx, "e", time.UnixMicro(-1)); !errors.Is(err, redstream.ErrInvalidTime) {
		t.Errorf("IsDuplicateAt before the epoch: err = %v, want ErrInvalidTime", err)
	}
}

// TestDedupServerClock: two clients, the server's clock, racing on the same elements:
// exactly one caller is told each element is new, for every strategy.
func TestDedupServerClock(t *testing.T) {
	addr := redistest.Addr(t)
	c1, c2 := redistest.NewClient(t, addr), redistest.NewClient(t, addr)
	ctx := context.Background()
	for _, spec := range []redstream.DedupSpec{
		{Strategy: redstream.DedupSet}, {Strategy: redstream.DedupWindowed, Window: time.Hour},
		{Strategy: redstream.DedupBloom, Insertions: 10000, FPRate: 0.001, Shards: 2},
	} {
		t.Run(string(spec.Strategy), func(t *testing.T) {
			name := uniq("race")
			d1, err := NewDeduplicator(c1, name, spec, DedupOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d2, _ := NewDeduplicator(c2, name, spec, DedupOptions{})
			const elems, workers = 200, 8
			var news [elems]atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				d := d1
				if w%2 == 1 {
					d = d2
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < elems; i++ {
						dup, err := d.CheckAndMark(ctx, "e"+strconv.Itoa(i))
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
					t.Errorf("element e%d was new for %d callers, want exactly 1", i, got)
				}
			}
			u1, _ := d1.UniqueCount(ctx)
			u2, _ := d2.UniqueCount(ctx)
			if spec.Strategy == redstream.DedupBloom {
				// UniqueCount counts this deduplicator's own successful adds.
				if u1+u2 != elems {
					t.Errorf("UniqueCount %d + %d = %d, want %d", u1, u2, u1+u2, elems)
				}
			} else if u1 != elems || u2 != elems {
				t.Errorf("UniqueCount = %d, %d; want %d", u1, u2, elems)
			}
		})
	}
}

func TestSetTTL(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	d, err := newSetDeduplicator(c, uniq("ttl"), DedupOptions{SetTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MarkSeen(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.Do(ctx, c.B().Pttl().Key(d.Key()).Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 60000 {
		t.Errorf("PTTL = %d, %v; want in (0, 60000]", ttl, err)
	}
	forever, _ := newSetDeduplicator(c, uniq("ttl"), DedupOptions{})
	dups, err := forever.CheckAndMarkBatch(ctx, []string{"a", "", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, false, false, true}; fmt.Sprint(dups) != fmt.Sprint(want) {
		t.Errorf("CheckAndMarkBatch = %v, want %v", dups, want)
	}
	if ttl, _ := c.Do(ctx, c.B().Pttl().Key(forever.Key()).Build()).AsInt64(); ttl != -1 {
		t.Errorf("PTTL without SetTTL = %d, want -1 (no expiry)", ttl)
	}
	if err := forever.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if dup, _ := forever.IsDuplicate(ctx, "a"); dup {
		t.Error("IsDuplicate after Remove = true")
	}
}

func TestWindowDedup(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	d, err := newWindowDeduplicator(c, uniq("win"), time.Minute, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		op   string
		at   time.Duration
		want bool
	}{
		{"check-and-mark", 0, false},
		{"check-and-mark", time.Second, true}, // refreshes last-seen to 1s
		{"is-duplicate", time.Second + time.Minute - 1, true},
		{"is-duplicate", time.Second + time.Minute, false}, // exactly a window later: new
		{"check-and-mark", 30 * time.Second, true},         // before the mark: runs at 1s
		{"check-and-mark", 2 * time.Minute, false},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		var got bool
		var err error
		if s.op == "is-duplicate" {
			got, err = d.IsDuplicateAt(ctx, "e", now)
		} else {
			got, err = d.CheckAndMarkAt(ctx, "e", now)
		}
		if err != nil || got != s.want {
			t.Errorf("step %d %s at +%v = %v, %v; want %v", i, s.op, s.at, got, err, s.want)
		}
	}
	if n, err := d.UniqueCountAt(ctx, t0.Add(2*time.Minute)); n != 1 || err != nil {
		t.Errorf("UniqueCountAt = %d, %v; want 1", n, err)
	}
	if n, err := d.UniqueCountAt(ctx, t0.Add(3*time.Minute)); n != 0 || err != nil {
		t.Errorf("UniqueCountAt a window later = %d, %v; want 0", n, err)
	}
	ttl, err := d.RemainingTTL(ctx)
	if err != nil || ttl <= time.Minute || ttl > time.Minute+core60s {
		t.Errorf("RemainingTTL = %v, %v; want in (1m, 2m]: the window + 60 s", ttl, err)
	}
	if err := d.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := d.RemainingTTL(ctx); ttl != 0 {
		t.Errorf("RemainingTTL after Clear = %v, want 0", ttl)
	}
}

const core60s = 60 * time.Second

// TestBloomFalsePositiveRate inserts n elements and measures the false-positive rate over
// 100,000 fresh ones: within ±15% of p.
func TestBloomFalsePositiveRate(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		n      int64
		p      float64
		shards int
	}{{20000, 0.03, 1}, {20000, 0.01, 1}, {20000, 0.01, 4}} {
		t.Run(fmt.Sprintf("n=%d,p=%g,shards=%d", tc.n, tc.p, tc.shards), func(t *testing.T) {
			d, err := newBloomDeduplicator(c, uniq("fp"), redstream.DedupSpec{Insertions: tc.n, FPRate: tc.p, Shards: tc.shards}, DedupOptions{})
			if err != nil {
				t.Fatal(err)
			}
			const batch = 2000
			for i := int64(0); i < tc.n; i += batch {
				es := make([]string, 0, batch)
				for j := i; j < min(i+batch, tc.n); j++ {
					es = append(es, "in:"+strconv.FormatInt(j, 10))
				}
				if _, err := d.CheckAndMarkBatch(ctx, es); err != nil {
					t.Fatal(err)
				}
			}
			fp := 0
			const fresh = 100000
			for i := 0; i < fresh; i += batch {
				es := make([]string, batch)
				for j := range es {
					es[j] = "out:" + strconv.Itoa(i+j)
				}
				dups, err := d.IsDuplicateBatch(ctx, es)
				if err != nil {
					t.Fatal(err)
				}
				for _, dup := range dups {
					if dup {
						fp++
					}
				}
			}
			rate := float64(fp) / fresh
			t.Logf("false-positive rate %.4f (target %g), %.2f bits per element, k = %d", rate, tc.p, d.BitsPerElement(), d.Params().K)
			if rate < tc.p*0.85 || rate > tc.p*1.15 {
				t.Errorf("false-positive rate %.4f, want within ±15%% of %g", rate, tc.p)
			}
			est, err := d.Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(est-tc.n)) > 0.05*float64(tc.n) {
				t.Errorf("Count() = %d, want within 5%% of %d", est, tc.n)
			}
			if u, _ := d.UniqueCount(ctx); u > tc.n || u < tc.n*97/100 {
				t.Errorf("UniqueCount = %d, want about %d (adds that set a bit)", u, tc.n)
			}
			if err := d.Clear(ctx); err != nil {
				t.Fatal(err)
			}
			if u, _ := d.UniqueCount(ctx); u != 0 {
				t.Errorf("UniqueCount after Clear = %d", u)
			}
			if est, _ := d.Count(ctx); est != 0 {
				t.Errorf("Count after Clear = %d", est)
			}
		})
	}
}

// TestBloomShardsSpreadOverCluster: a sharded filter's keys land in different slots and the
// filter works on the real cluster.
func TestBloomShardsSpreadOverCluster(t *testing.T) {
	c := redistest.ClusterClient(t)
	ctx := context.Background()
	d, err := newBloomDeduplicator(c, uniq("shards"), redstream.DedupSpec{Insertions: 1000, FPRate: 0.01, Shards: 8}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slots := map[uint16]bool{}
	for _, k := range d.Keys() {
		slots[slotOf(k)] = true
	}
	if len(slots) < 4 {
		t.Errorf("8 shards in %d slots, want them spread", len(slots))
	}
	es := make([]string, 500)
	for i := range es {
		es[i] = "e" + strconv.Itoa(i)
	}
	first, err := d.CheckAndMarkBatch(ctx, es)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.CheckAndMarkBatch(ctx, es)
	if err != nil {
		t.Fatal(err)
	}
	newOnes := 0
	for i := range es {
		if !first[i] {
			newOnes++
		}
		if !again[i] {
			t.Fatalf("element %d not a duplicate the second time", i)
		}
	}
	if newOnes < 490 {
		t.Errorf("%d of 500 fresh elements new, want nearly all", newOnes)
	}
	if n, _ := d.Count(ctx); n < 450 || n > 550 {
		t.Errorf("Count = %d, want about 500", n)
	}
}

// TestBloomLargeFilter: a filter over one Redis string's 2^32 bits is sharded automatically.
func TestBloomLargeFilter(t *testing.T) {
	d, err := newBloomDeduplicator(nopClient(t), "big", redstream.DedupSpec{Insertions: 1 << 30, FPRate: 0.001}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := d.Params()
	if p.Shards < 2 || p.ShardBits > 1<<32 || len(d.Keys()) != p.Shards {
		t.Errorf("params %+v with %d keys: want several shards of at most 2^32 bits", p, len(d.Keys()))
	}
}
