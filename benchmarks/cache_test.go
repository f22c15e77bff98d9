package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocache "github.com/go-redis/cache/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidisaside"

	"github.com/redstream-go/redstream/cache"
)

// The cache-aside benchmarks compare redstream's cache.GetOrLoad with rueidisaside and
// go-redis/cache on one redis-server:
//
//   - HotHit: the key is cached. With client-side caching (redstream's ClientSideCache,
//     rueidisaside always, go-redis/cache's TinyLFU) a hit should cost no round trip; without
//     it, one.
//   - MissLoad: every call is a miss on a new key, so it pays the whole load protocol.
//   - Stampede: 64 concurrent calls from 4 clients on a cold key; loads/op reports how many
//     times the loader ran (1 is the goal).
//
// Values are a small struct; redstream and rueidisaside store JSON, go-redis/cache msgpack
// (its only codec).

type product struct {
	ID    int    `json:"id" msgpack:"id"`
	Name  string `json:"name" msgpack:"name"`
	Price int    `json:"price" msgpack:"price"`
}

var sampleProduct = product{ID: 42, Name: "espresso machine", Price: 34900}

// asideImpl is one library's GetOrLoad.
type asideImpl struct {
	name string
	// get returns key's value, loading it with load on a miss.
	get func(ctx context.Context, key string, load func() (product, error)) (product, error)
}

var benchRun atomic.Int64

func init() { benchRun.Store(time.Now().UnixNano()) }

// prefix returns a key prefix unique to this benchmark run.
func prefix(name string) string { return fmt.Sprintf("bench:%d:%s:", benchRun.Add(1), name) }

func newRedstream(tb testing.TB, clientSide bool) asideImpl {
	cfg := cache.DefaultConfig()
	cfg.Name = tb.Name()
	cfg.KeyPrefix = prefix("redstream")
	cfg.ClientSideCache.Enabled = clientSide
	cfg.Breakdown.WaitInterval = 5 * time.Millisecond
	c, err := cache.New(redisClient(tb), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	name := "redstream"
	if clientSide {
		name += "-clientside"
	}
	return asideImpl{name: name, get: func(ctx context.Context, key string, load func() (product, error)) (product, error) {
		return cache.GetOrLoad(ctx, c, key, time.Hour, func(context.Context) (product, error) { return load() })
	}}
}

func newRueidisaside(tb testing.TB, keyPrefix string) asideImpl {
	ac, err := rueidisaside.NewClient(rueidisaside.ClientOption{ClientOption: rueidis.ClientOption{InitAddress: []string{redisAddr(tb)}}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ac.Close)
	typed := rueidisaside.NewTypedCacheAsideClient[product](ac,
		func(p *product) (string, error) { b, err := json.Marshal(p); return string(b), err },
		func(s string) (*product, error) { var p product; err := json.Unmarshal([]byte(s), &p); return &p, err })
	return asideImpl{name: "rueidisaside", get: func(ctx context.Context, key string, load func() (product, error)) (product, error) {
		p, err := typed.Get(ctx, time.Hour, keyPrefix+key, func(context.Context, string) (*product, error) {
			v, err := load()
			return &v, err
		})
		if err != nil {
			return product{}, err
		}
		return *p, nil
	}}
}

func newGoRedisCache(tb testing.TB, local bool, keyPrefix string) asideImpl {
	rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr(tb)})
	tb.Cleanup(func() { _ = rdb.Close() })
	opt := &gocache.Options{Redis: rdb}
	name := "go-redis-cache"
	if local {
		opt.LocalCache = gocache.NewTinyLFU(10000, time.Minute)
		name += "-tinylfu"
	}
	gc := gocache.New(opt)
	return asideImpl{name: name, get: func(ctx context.Context, key string, load func() (product, error)) (product, error) {
		var p product
		err := gc.Once(&gocache.Item{Ctx: ctx, Key: keyPrefix + key, Value: &p, TTL: time.Hour,
			Do: func(*gocache.Item) (any, error) { return load() }})
		return p, err
	}}
}

// allImpls returns every library, each on its own client(s) and key prefix.
func allImpls(tb testing.TB) []asideImpl {
	return []asideImpl{
		newRedstream(tb, true),
		newRedstream(tb, false),
		newRueidisaside(tb, prefix("aside")),
		newGoRedisCache(tb, false, prefix("gocache")),
		newGoRedisCache(tb, true, prefix("gocache-local")),
	}
}

func loadSample() (product, error) { return sampleProduct, nil }

func BenchmarkCacheHotHit(b *testing.B) {
	ctx := context.Background()
	for _, impl := range allImpls(b) {
		// Warm the key, and check the fixture: the value comes back intact.
		if p, err := impl.get(ctx, "hot", loadSample); err != nil || p != sampleProduct {
			b.Fatalf("%s: warm-up = %+v, %v", impl.name, p, err)
		}
		fail := func(p product, err error) bool { return err != nil || p.ID != sampleProduct.ID }
		b.Run(impl.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p, err := impl.get(ctx, "hot", loadSample); fail(p, err) {
					b.Fatalf("%+v, %v", p, err)
				}
			}
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if p, err := impl.get(ctx, "hot", loadSample); fail(p, err) {
						b.Errorf("%+v, %v", p, err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkCacheMissLoad(b *testing.B) {
	ctx := context.Background()
	for _, impl := range allImpls(b) {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			var loads atomic.Int64
			load := func() (product, error) { loads.Add(1); return sampleProduct, nil }
			run := benchRun.Add(1) // -count runs this again on the same clients
			i := 0
			for b.Loop() {
				i++
				if _, err := impl.get(ctx, fmt.Sprintf("miss:%d:%d", run, i), load); err != nil {
					b.Fatal(err)
				}
			}
			if int(loads.Load()) != i {
				b.Fatalf("%d loads for %d distinct keys: the fixture did not miss every time", loads.Load(), i)
			}
		})
	}
}

func BenchmarkCacheStampede(b *testing.B) {
	ctx := context.Background()
	const clients, perClient = 4, 16
	for _, f := range []struct {
		name string
		make func(tb testing.TB) []asideImpl // 4 clients sharing one key space, as 4 processes
	}{
		{"redstream", func(tb testing.TB) []asideImpl { return redstreams(tb, false, clients) }},
		{"redstream-clientside", func(tb testing.TB) []asideImpl { return redstreams(tb, true, clients) }},
		{"rueidisaside", func(tb testing.TB) []asideImpl {
			p, out := prefix("aside-stampede"), make([]asideImpl, clients)
			for i := range out {
				out[i] = newRueidisaside(tb, p)
			}
			return out
		}},
		{"go-redis-cache", func(tb testing.TB) []asideImpl {
			p, out := prefix("gocache-stampede"), make([]asideImpl, clients)
			for i := range out {
				out[i] = newGoRedisCache(tb, false, p)
			}
			return out
		}},
	} {
		b.Run(f.name, func(b *testing.B) {
			impls := f.make(b)
			var loads atomic.Int64
			load := func() (product, error) {
				loads.Add(1)
				time.Sleep(2 * time.Millisecond) // a query
				return sampleProduct, nil
			}
			b.ReportAllocs()
			run := benchRun.Add(1)
			n := 0
			for b.Loop() {
				n++
				key := fmt.Sprintf("cold:%d:%d", run, n)
				var wg sync.WaitGroup
				for g := range clients * perClient {
					wg.Add(1)
					go func(impl asideImpl) {
						defer wg.Done()
						if p, err := impl.get(ctx, key, load); err != nil || p.ID != sampleProduct.ID {
							b.Errorf("%+v, %v", p, err)
						}
					}(impls[g%clients])
				}
				wg.Wait()
			}
			if loads.Load() < int64(n) {
				b.Fatalf("%d loads for %d cold keys: the fixture was not cold", loads.Load(), n)
			}
			b.ReportMetric(float64(loads.Load())/float64(n), "loads/op")
		})
	}
}

// redstreams returns n redstream caches on n clients sharing one key prefix.
func redstreams(tb testing.TB, clientSide bool, n int) []asideImpl {
	cfg := cache.DefaultConfig()
	cfg.Name = tb.Name()
	cfg.KeyPrefix = prefix("redstream-stampede")
	cfg.ClientSideCache.Enabled = clientSide
	cfg.Breakdown.WaitInterval = 5 * time.Millisecond
	out := make([]asideImpl, n)
	for i := range out {
		c, err := cache.New(redisClient(tb), cfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(c.Close)
		out[i] = asideImpl{name: "redstream", get: func(ctx context.Context, key string, load func() (product, error)) (product, error) {
			return cache.GetOrLoad(ctx, c, key, time.Hour, func(context.Context) (product, error) { return load() })
		}}
	}
	return out
}
