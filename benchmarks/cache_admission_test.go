package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocache "github.com/go-redis/cache/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
)

// BenchmarkLocalTierZipf compares the hit ratio of local tiers smaller than the keys read:
// Zipf (s = 1.1) reads over 20,000 keys, with room for about 1,000 entries, after 20,000
// reads of warm-up. Contenders: redstream's client-side caching on rueidis's default store
// (admits everything, LRU), on cache.NewAdmissionStore (TinyLFU), and go-redis/cache with
// its TinyLFU local cache (1,000 entries). Each reports "<name>-hit-ratio" (reads answered
// from process memory) and "<name>-ns/op" (wall time per read, misses going to Redis). The
// rueidis stores are bounded in bytes: the bound is 1,000 times the size of an entry, measured
// on the first entries stored.
func BenchmarkLocalTierZipf(b *testing.B) {
	ctx := context.Background()
	const space, warm, entries = 20_000, 20_000, 1000
	reads := max(b.N, 20_000)
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 1)), 1.1, 1, space-1)
	keys := make([]string, warm+reads)
	for i := range keys {
		keys[i] = fmt.Sprintf("z%d", z.Uint64())
	}
	if distinct := len(uniq(keys)); distinct < 5*entries {
		b.Fatalf("the workload reads %d distinct keys, want many more than the tier's %d", distinct, entries)
	}
	load := func(context.Context) (product, error) { return sampleProduct, nil }
	entrySize := measureEntry(b, load)
	type contender struct {
		name string
		get  func(key string) error
		hits func() uint64
	}
	redstreamOn := func(name string, storeFn rueidis.NewCacheStoreFn) contender {
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr(b)},
			NewCacheStoreFn: storeFn, CacheSizeEachConn: entries * entrySize})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(client.Close)
		cfg := cache.DefaultConfig()
		cfg.Name, cfg.KeyPrefix = b.Name()+"/"+name, prefix(name)
		cfg.ClientSideCache.Enabled, cfg.ClientSideCache.TTL = true, time.Hour
		cfg.Timeout = 2 * time.Second // misses go to Redis on a shared machine: no timeouts here
		c, err := cache.New(client, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		return contender{name: name,
			get:  func(key string) error { _, err := cache.GetOrLoad(ctx, c, key, time.Hour, load); return err },
			hits: func() uint64 { return c.Stats().LocalHits }}
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr(b)})
	b.Cleanup(func() { _ = rdb.Close() })
	local := &countingLocal{LocalCache: gocache.NewTinyLFU(entries, time.Hour)}
	gc := gocache.New(&gocache.Options{Redis: rdb, LocalCache: local})
	gp := prefix("gocache-zipf")
	cs := []contender{
		redstreamOn("redstream-admit-all", nil),
		redstreamOn("redstream-tinylfu", cache.NewAdmissionStore),
		{name: "go-redis-cache-tinylfu", get: func(key string) error {
			var p product
			return gc.Once(&gocache.Item{Ctx: ctx, Key: gp + key, Value: &p, TTL: time.Hour,
				Do: func(*gocache.Item) (any, error) { return load(ctx) }})
		}, hits: local.hits.Load},
	}
	b.ResetTimer()
	for _, c := range cs {
		for _, k := range keys[:warm] {
			if err := c.get(k); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
		before, t0 := c.hits(), time.Now()
		for _, k := range keys[warm:] {
			if err := c.get(k); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
		b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(reads), c.name+"-ns/op")
		b.ReportMetric(float64(c.hits()-before)/float64(reads), c.name+"-hit-ratio")
	}
	b.ReportMetric(float64(entrySize), "entry-bytes")
}

// measureEntry returns the bytes rueidis counts for one cached entry of the benchmark
// (key, command and message), from the first entries a store receives.
func measureEntry(b *testing.B, load func(context.Context) (product, error)) int {
	probe := &sizeProbe{}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr(b)},
		NewCacheStoreFn: func(rueidis.CacheStoreOption) rueidis.CacheStore { return rueidis.NewSimpleCacheAdapter(probe) }})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	cfg := cache.DefaultConfig()
	cfg.Name, cfg.KeyPrefix = b.Name()+"/probe", prefix("redstream-admit-all") // same key length
	cfg.ClientSideCache.Enabled = true
	c, err := cache.New(client, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range 100 {
		if _, err := cache.GetOrLoad(context.Background(), c, fmt.Sprintf("z%d", 10000+i), time.Hour, load); err != nil {
			b.Fatal(err)
		}
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if probe.n == 0 {
		b.Fatal("no entry reached the probe store")
	}
	return probe.bytes / probe.n
}

// sizeProbe is a rueidis SimpleCache that keeps nothing and sums the sizes it is given.
type sizeProbe struct {
	mu       sync.Mutex
	n, bytes int
}

func (p *sizeProbe) Get(string) rueidis.RedisMessage { return rueidis.RedisMessage{} }
func (p *sizeProbe) Set(key string, val rueidis.RedisMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.bytes += len(key) + val.CacheSize()
}
func (p *sizeProbe) Del(string) {}
func (p *sizeProbe) Flush()     {}

// countingLocal counts the hits of a go-redis/cache local cache.
type countingLocal struct {
	gocache.LocalCache
	hits atomic.Uint64
}

func (l *countingLocal) Get(key string) ([]byte, bool) {
	b, ok := l.LocalCache.Get(key)
	if ok {
		l.hits.Add(1)
	}
	return b, ok
}

func uniq(keys []string) map[string]struct{} {
	m := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		m[k] = struct{}{}
	}
	return m
}
