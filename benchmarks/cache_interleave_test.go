package benchmarks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redstream-go/redstream/cache"
)

// BenchmarkCacheInterleaved compares the cache-aside paths the libraries share in one
// interleaved run (see interleave): the ratios redstream/<peer> are time per operation,
// below 1 when redstream is faster. It also prices redstream's own options on the same
// paths: fail-safe (remembering the last value of each key) and eager refresh (a PTTL
// pipelined with each GET) and tags (the entry's tag tokens checked on each hit; the peers
// have no tags). rockscache is not compared: its module is not available from the
// module proxy this project builds with.
//
//   - HotHit/remote: the key is cached in Redis, read without a local tier (one round trip).
//   - HotHit/local: the key is in the client-side tier (rueidisaside always has one,
//     go-redis/cache its TinyLFU).
//   - MissLoad: every call misses on a new key and loads it.
func BenchmarkCacheInterleaved(b *testing.B) {
	ctx := context.Background()
	hot := func(impl asideImpl) contender {
		if p, err := impl.get(ctx, "hot", loadSample); err != nil || p != sampleProduct {
			b.Fatalf("%s: warm-up = %+v, %v", impl.name, p, err)
		}
		return contender{name: impl.name, run: func(n int) {
			for range n {
				if p, err := impl.get(ctx, "hot", loadSample); err != nil || p.ID != sampleProduct.ID {
					b.Fatalf("%s: %+v, %v", impl.name, p, err)
				}
			}
		}}
	}
	failSafe := func(c *cache.Config) { c.FailSafe.Enabled = true }
	eager := func(c *cache.Config) { c.EagerRefresh = 0.8 }
	tags := cache.Tags("user:1", "catalog")
	b.Run("HotHit/remote", func(b *testing.B) {
		interleave(b, hot(redstreamWith(b, "redstream", nil)), hot(redstreamWith(b, "redstream-failsafe", failSafe)),
			hot(redstreamWith(b, "redstream-eager", eager)), hot(redstreamWith(b, "redstream-tagged", nil, tags)),
			hot(newGoRedisCache(b, false, prefix("gocache"))))
	})
	b.Run("HotHit/local", func(b *testing.B) {
		local := func(c *cache.Config) { c.ClientSideCache.Enabled = true }
		localFS := func(c *cache.Config) { local(c); failSafe(c) }
		interleave(b, hot(redstreamWith(b, "redstream-clientside", local)), hot(redstreamWith(b, "redstream-clientside-failsafe", localFS)),
			hot(redstreamWith(b, "redstream-clientside-tagged", local, tags)),
			hot(newRueidisaside(b, prefix("aside"))), hot(newGoRedisCache(b, true, prefix("gocache-local"))))
	})
	b.Run("MissLoad", func(b *testing.B) {
		miss := func(impl asideImpl) contender {
			i := 0
			return contender{name: impl.name, run: func(n int) {
				for range n {
					i++
					if _, err := impl.get(ctx, fmt.Sprintf("miss:%d", i), loadSample); err != nil {
						b.Fatalf("%s: %v", impl.name, err)
					}
				}
			}}
		}
		interleave(b, miss(redstreamWith(b, "redstream", nil)), miss(redstreamWith(b, "redstream-failsafe", failSafe)),
			miss(newRueidisaside(b, prefix("aside-miss"))), miss(newGoRedisCache(b, false, prefix("gocache-miss"))))
	})
}

// redstreamWith returns a redstream cache named name, DefaultConfig changed by edit; opts
// go to every GetOrLoad.
func redstreamWith(tb testing.TB, name string, edit func(*cache.Config), opts ...cache.Option) asideImpl {
	cfg := cache.DefaultConfig()
	cfg.Name = tb.Name() + "/" + name
	cfg.KeyPrefix = prefix(name)
	if edit != nil {
		edit(&cfg)
	}
	c, err := cache.New(redisClient(tb), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return asideImpl{name: name, get: func(ctx context.Context, key string, load func() (product, error)) (product, error) {
		return cache.GetOrLoad(ctx, c, key, time.Hour, func(context.Context) (product, error) { return load() }, opts...)
	}}
}
