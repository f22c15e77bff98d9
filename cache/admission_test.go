package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// zipfKeys returns n reads of keys "z0".."z<space-1>" drawn from a Zipf distribution
// (s = 1.1), the same for every call with one seed.
func zipfKeys(seed uint64, space, n int) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed)), 1.1, 1, uint64(space-1))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "z" + fmt.Sprint(z.Uint64())
	}
	return keys
}

// TestAdmissionHitRatio: on a Zipf workload over 20,000 keys whose tier holds about 5% of
// them, reads from process memory hit more often with NewAdmissionStore than with rueidis's
// default store of the same byte size, which admits everything.
func TestAdmissionHitRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("60,000 reads against a real server")
	}
	ctx := context.Background()
	srv := redistest.NewServer(t)
	const space, warm, measured = 20_000, 20_000, 40_000
	value := strings.Repeat("v", 100)
	setup := redistest.NewClient(t, srv.Addr)
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	cfg.ClientSideCache.TTL = time.Hour
	seeder := newCache(t, setup, cfg)
	for i := 0; i < space; i += 500 {
		cmds := make(rueidis.Commands, 0, 500)
		for j := i; j < i+500; j++ {
			cmds = append(cmds, setup.B().Set().Key(seeder.Key(fmt.Sprintf("z%d", j))).Value(`"`+value+`"`).Build())
		}
		for _, r := range setup.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One entry takes about 250 bytes in the store (the value, its key and command, the
	// message); 1,000 of them fit.
	const tier = 1000 * 250
	ratio := map[string]float64{}
	for _, store := range []string{"admit-all", "tinylfu"} {
		opt := rueidis.ClientOption{InitAddress: []string{srv.Addr}, CacheSizeEachConn: tier}
		if store == "tinylfu" {
			opt.NewCacheStoreFn = NewAdmissionStore
		}
		client, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(client.Close)
		c := newCache(t, client, cfg)
		keys := zipfKeys(1, space, warm+measured)
		for _, k := range keys[:warm] {
			if _, err := Get[string](ctx, c, k); err != nil {
				t.Fatalf("%s: Get(%s): %v", store, k, err)
			}
		}
		before := c.Stats().LocalHits
		for _, k := range keys[warm:] {
			if _, err := Get[string](ctx, c, k); err != nil {
				t.Fatalf("%s: Get(%s): %v", store, k, err)
			}
		}
		ratio[store] = float64(c.Stats().LocalHits-before) / measured
	}
	t.Logf("hit ratio from memory, Zipf 1.1 over %d keys, a tier of about 1,000 entries: admit-all %.3f, TinyLFU %.3f",
		space, ratio["admit-all"], ratio["tinylfu"])
	if ratio["tinylfu"] <= ratio["admit-all"] {
		t.Errorf("TinyLFU hit ratio %.3f, want above admitting everything (%.3f)", ratio["tinylfu"], ratio["admit-all"])
	}
}

// TestAdmittingBound: the store admits while it has room, never holds more bytes than its
// bound, refuses a key read less often than the entries it would evict, and admits one read
// more often.
func TestAdmittingBound(t *testing.T) {
	m := rueidis.RedisMessage{}
	size := len("k00") + m.CacheSize()
	a := newAdmitting(20 * size)
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		for range 3 {
			a.Get(k)
		}
		a.Set(k, m)
	}
	if a.lru.Len() != 20 || a.used != 20*size {
		t.Fatalf("%d entries, %d bytes; want 20 admitted while there is room (%d bytes)", a.lru.Len(), a.used, a.max)
	}
	a.Get("new")
	a.Set("new", m)
	if _, ok := a.items["new"]; ok {
		t.Errorf("a key read once was admitted over keys read 3 times")
	}
	for range 10 {
		a.Get("hot")
	}
	a.Set("hot", m)
	if _, ok := a.items["hot"]; !ok {
		t.Errorf("a key read 10 times was refused")
	}
	if a.used > a.max || a.lru.Len() != 20 {
		t.Errorf("%d bytes in %d entries, bound %d; want one entry evicted for it", a.used, a.lru.Len(), a.max)
	}
	a.Del("hot")
	if _, ok := a.items["hot"]; ok {
		t.Errorf("Del left the key")
	}
	a.Flush()
	if a.used != 0 || a.lru.Len() != 0 {
		t.Errorf("after Flush: %d bytes, %d entries", a.used, a.lru.Len())
	}
}

// BenchmarkAdmissionHit prices a hit from memory through NewAdmissionStore against
// rueidis's default store (GET with client-side caching, one hot key).
func BenchmarkAdmissionHit(b *testing.B) {
	ctx := context.Background()
	for _, store := range []string{"admit-all", "tinylfu"} {
		b.Run(store, func(b *testing.B) {
			opt := rueidis.ClientOption{InitAddress: []string{redistest.Addr(b)}}
			if store == "tinylfu" {
				opt.NewCacheStoreFn = NewAdmissionStore
			}
			client, err := rueidis.NewClient(opt)
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			cfg := testConfig(b)
			cfg.ClientSideCache.Enabled = true
			c := newCache(b, client, cfg)
			if err := c.Set(ctx, "hot", 1, time.Hour); err != nil {
				b.Fatal(err)
			}
			for range 3 {
				_, _ = Get[int](ctx, c, "hot")
			}
			before := c.Stats().LocalHits
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := Get[int](ctx, c, "hot"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if hits := c.Stats().LocalHits - before; hits < uint64(b.N)*9/10 {
				b.Fatalf("%d of %d reads from memory", hits, b.N)
			}
		})
	}
}
