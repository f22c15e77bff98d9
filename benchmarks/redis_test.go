package benchmarks

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// The Redis limiters against go-redis/redis_rate v10 (GCRA in Lua on go-redis), side by
// side on the same redis-server in one run:
//
//   - BenchmarkRedisLimiter: decisions/s, p50/p99 latency, Redis CPU and client CPU per
//     decision at 1, 16, 64 and 256 goroutines over 100k keys, for redstream's token bucket
//     (with coalesced decisions, the default, and with one script call per decision,
//     Options.DisableCoalescing), redis_rate and a no-op script through rueidis (the floor
//     of one EVALSHA round trip),
//     interleaved (interleave_test.go: alternating slices, medians, per-round ratios);
//   - BenchmarkRedisPathCost (redis_cost_test.go): every algorithm next to the floors;
//   - BenchmarkRedisDenyHeavy (redis_deny_test.go): the denying path, with and without
//     local denials;
//   - redstream's batch API (many keys per round trip);
//   - Redis memory per key (MEMORY USAGE) of every algorithm and of redis_rate.
//
// On the allowing path every limiter admits every measured request (a burst of a million,
// earned back over hours), so all do the same work, and every key outlives the run, so the
// fixture check can count them.
//
//	go test -run xxx -bench 'RedisLimiter|RedisPathCost|RedisDenyHeavy' -benchtime 1x
//	go test -run xxx -bench 'RedisBatch|RedisMemoryPerKey'

// rlKeys is the benchmarks' 100k distinct keys.
var rlKeys = func() []string {
	ks := make([]string, 100_000)
	for i := range ks {
		ks[i] = "user:" + strconv.Itoa(i)
	}
	return ks
}()

var rlRun atomic.Int64

// rlPrefix returns a key prefix unique to this run and benchmark.
func rlPrefix(name string) string {
	return fmt.Sprintf("rlbench:%d:%d:%s", time.Now().UnixNano()%1e9, rlRun.Add(1), name)
}

// decider makes one decision for key and reports whether it was admitted.
type decider func(ctx context.Context, key string) (bool, error)

// rlStats reads the calls and usec of EVALSHA from INFO commandstats.
func rlStats(tb testing.TB, c rueidis.Client) (calls, usec int64) {
	tb.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls = int64(n)
			case "usec":
				usec = int64(n)
			}
		}
	}
	return calls, usec
}

// rlServer returns clients to the benchmarks' Redis: rueidis for redstream and for
// INFO, go-redis for redis_rate.
func rlServer(b *testing.B, poolSize int) (rueidis.Client, *goredis.Client) {
	b.Helper()
	addr := redisAddr(b)
	rc := redisClient(b)
	gc := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: max(poolSize, 10)})
	b.Cleanup(func() { gc.Close() })
	return rc, gc
}

// rlCountKeys counts the keys under prefix, so a benchmark proves it really used many keys.
func rlCountKeys(b *testing.B, c rueidis.Client, prefix string) int {
	b.Helper()
	n := 0
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(context.Background(), node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(10000).Build()).AsScanEntry()
			if err != nil {
				b.Fatal(err)
			}
			n += len(e.Elements)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return n
}

// rlCheckKeys fails a benchmark run whose n random decisions touched far fewer distinct
// keys than expected.
func rlCheckKeys(b *testing.B, c rueidis.Client, prefix string, n int64) {
	b.Helper()
	// n random picks of 100k keys hit about 100k*(1-e^(-n/100k)) distinct ones.
	want := int(0.9 * 100_000 * (1 - math.Exp(-float64(n)/100_000)))
	if got := rlCountKeys(b, c, prefix); got < want {
		b.Fatalf("the run left %d keys under %s, want at least %d: the fixture did not spread over 100k keys", got, prefix, want)
	}
}

// bigBucket admits a million requests per key; a key's state lives for about 1000 s per
// request, so keys outlive the run.
var bigBucket = redstream.TokenBucket(1e6, 0.001)

func BenchmarkRedisLimiter(b *testing.B) {
	for _, g := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			rc, gc := rlServer(b, g)
			pick := func(r *rand.Rand) string { return rlKeys[r.IntN(len(rlKeys))] }
			p := rlPrefix("tb")
			l, err := redisbackend.NewLimiter(rc, bigBucket, redisbackend.Options{KeyPrefix: p})
			if err != nil {
				b.Fatal(err)
			}
			single, err := redisbackend.NewLimiter(rc, bigBucket, redisbackend.Options{KeyPrefix: rlPrefix("tb1"), DisableCoalescing: true})
			if err != nil {
				b.Fatal(err)
			}
			rp := rlPrefix("rr")
			rl := redis_rate.NewLimiter(gc)
			limit := redis_rate.Limit{Rate: 1, Burst: 1_000_000, Period: 1000 * time.Second}
			noop := rueidis.NewLuaScript("return 1")
			cs := []redisContender{
				{name: "redstream-token-bucket", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					d, err := l.AllowN(ctx, pick(r), time.Time{}, 1)
					return d.Allowed, err
				}},
				{name: "redstream-one-call-each", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					d, err := single.AllowN(ctx, pick(r), time.Time{}, 1)
					return d.Allowed, err
				}},
				{name: "redis_rate", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					res, err := rl.Allow(ctx, rp+pick(r), limit)
					if err != nil {
						return false, err
					}
					return res.Allowed > 0, nil
				}},
				{name: "floor-evalsha-return-1", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					v, err := noop.Exec(ctx, rc, []string{pick(r)}, nil).AsInt64()
					return v == 1, err
				}},
			}
			for b.Loop() {
				res := interleaveRedis(b, rc, g, cs)
				report(b, cs, res, [][2]string{{"redstream-token-bucket", "redis_rate"}, {"redstream-one-call-each", "redis_rate"},
					{"redstream-token-bucket", "redstream-one-call-each"}})
				var n int64
				for _, s := range res[0] {
					n += s.decisions
				}
				rlCheckKeys(b, rc, p, n)
			}
		})
	}
}

// BenchmarkRedisBatch measures AllowBatch: batches of 10, 100 and 1000 random keys of 100k
// per round trip, from 16 goroutines. decisions/s counts keys decided; Redis CPU per decision
// is the usec of EVALSHA (up to 128 keys per call) over the keys decided.
func BenchmarkRedisBatch(b *testing.B) {
	for _, size := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("lib=redstream/alg=token-bucket/batch=%d/goroutines=16", size), func(b *testing.B) {
			rc, _ := rlServer(b, 16)
			p := rlPrefix("batch")
			l, err := redisbackend.NewLimiter(rc, bigBucket, redisbackend.Options{KeyPrefix: p})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.AllowBatch(ctx, []string{"warm"}, time.Time{}, 1); err != nil {
				b.Fatal(err)
			}
			_, usec0 := rlStats(b, rc)
			batches := (b.N + size - 1) / size
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					keys := make([]string, size)
					for next.Add(1) <= int64(batches) {
						for i := range keys {
							keys[i] = rlKeys[r.IntN(len(rlKeys))]
						}
						ds, err := l.AllowBatch(ctx, keys, time.Time{}, 1)
						if err != nil || !ds[size-1].Allowed {
							failed.CompareAndSwap(nil, fmt.Sprint(err))
							return
						}
					}
				}(w)
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			if f := failed.Load(); f != nil {
				b.Fatal(f)
			}
			_, usec1 := rlStats(b, rc)
			b.ReportMetric(float64(batches*size)/el.Seconds(), "decisions/s")
			b.ReportMetric(float64(usec1-usec0)/float64(batches*size), "redis-cpu-µs/decision")
			rlCheckKeys(b, rc, p, int64(batches*size))
		})
	}
}

// BenchmarkRedisMemoryPerKey reports MEMORY USAGE of one key's state after one admitted
// request (and, for the sliding log, after 100), averaged over 1000 keys.
func BenchmarkRedisMemoryPerKey(b *testing.B) {
	type engine struct {
		name   string
		decide func(ctx context.Context, key string) error
		keyOf  func(key string) []string
	}
	rc, gc := rlServer(b, 10)
	ctx := context.Background()
	var engines []engine
	for _, spec := range []redstream.Spec{
		redstream.TokenBucket(100, 10), redstream.LeakyBucket(100, 10), redstream.SlidingWindow(time.Hour, 100),
		redstream.SlidingCounter(time.Hour, 100), redstream.FixedWindow(time.Hour, 100),
	} {
		l, err := redisbackend.NewLimiter(rc, spec, redisbackend.Options{KeyPrefix: rlPrefix("mem")})
		if err != nil {
			b.Fatal(err)
		}
		engines = append(engines, engine{"redstream/alg=" + string(spec.Algorithm), func(ctx context.Context, key string) error {
			_, err := l.AllowN(ctx, key, time.Time{}, 1)
			return err
		}, l.Keys})
	}
	sl, _ := redisbackend.NewLimiter(rc, redstream.SlidingWindow(time.Hour, 100), redisbackend.Options{KeyPrefix: rlPrefix("mem")})
	engines = append(engines, engine{"redstream/alg=sliding-100-entries", func(ctx context.Context, key string) error {
		_, err := sl.AllowN(ctx, key, time.Time{}, 1)
		for i := 1; i < 100 && err == nil; i++ {
			_, err = sl.AllowN(ctx, key, time.Time{}, 1)
		}
		return err
	}, sl.Keys})
	rp := rlPrefix("mem-rr")
	rr := redis_rate.NewLimiter(gc)
	engines = append(engines, engine{"redis_rate/alg=gcra", func(ctx context.Context, key string) error {
		_, err := rr.Allow(ctx, rp+key, redis_rate.PerSecond(10))
		return err
	}, func(key string) []string { return []string{"rate:" + rp + key} }})
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			const n = 1000
			var total int64
			for b.Loop() {
				total = 0
				for i := 0; i < n; i++ {
					k := rlKeys[i]
					if err := e.decide(ctx, k); err != nil {
						b.Fatal(err)
					}
					for _, rk := range e.keyOf(k) {
						u, err := rc.Do(ctx, rc.B().MemoryUsage().Key(rk).Build()).AsInt64()
						if err != nil {
							b.Fatalf("MEMORY USAGE %s: %v", rk, err)
						}
						total += u
					}
				}
			}
			b.ReportMetric(float64(total)/n, "bytes/key")
		})
	}
}
