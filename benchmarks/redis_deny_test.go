package benchmarks

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// Deny-heavy workloads: the path that matters under abuse, where most requests are over
// their limit. Interleaved (see interleave_test.go), 64 goroutines, on the benchmarks' Redis:
//
//   - hot key: one key limited to 100/s (burst 100), requested as fast as 64 goroutines can
//     (hundreds of times its limit);
//   - abusive keys: 10k keys, 10% of them abusive: an abusive key gets 100x the requests of
//     a normal one (91.7% of all requests), under one limit of 1 per 2 s (burst 1) per key:
//     at 40k decisions/s a normal key asks about 0.4/s (about its limit), an abusive one
//     about 40/s (some 80x its limit; more at higher throughput).
//
// Contenders: redstream's token bucket with local denials (the default) and without,
// go-redis/redis_rate v10, and sethvargo/go-limiter's memorystore, which keeps its state in
// process and so is no Redis peer: it is the in-process reference, for scale.
//
//	go test -run xxx -bench RedisDenyHeavy -benchtime 1x

// denyContenders returns the four contenders for one limit (burst requests, earned back at
// burst per period), deciding the key pick returns.
func denyContenders(b *testing.B, burst int, period time.Duration, pick func(r *rand.Rand) string) []redisContender {
	b.Helper()
	rc, gc := rlServer(b, 64)
	spec := redstream.TokenBucket(float64(burst), float64(burst)/period.Seconds())
	local, err := redisbackend.NewLimiter(rc, spec, redisbackend.Options{KeyPrefix: rlPrefix("deny-local")})
	if err != nil {
		b.Fatal(err)
	}
	remote, err := redisbackend.NewLimiter(rc, spec, redisbackend.Options{KeyPrefix: rlPrefix("deny-remote"), DisableLocalDenials: true})
	if err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(gc)
	rrLimit := redis_rate.Limit{Rate: burst, Burst: burst, Period: period}
	rrPrefix := rlPrefix("deny-rr")
	ms, err := memorystore.New(&memorystore.Config{Tokens: uint64(burst), Interval: period})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ms.Close(context.Background()) })
	return []redisContender{
		{name: "redstream-local-denials", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
			d, err := local.AllowN(ctx, pick(r), time.Time{}, 1)
			return d.Allowed, err
		}},
		{name: "redstream-no-local-denials", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
			d, err := remote.AllowN(ctx, pick(r), time.Time{}, 1)
			return d.Allowed, err
		}},
		{name: "redis_rate", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
			res, err := rr.Allow(ctx, rrPrefix+pick(r), rrLimit)
			if err != nil {
				return false, err
			}
			return res.Allowed > 0, nil
		}},
		{name: "go-limiter-memorystore(in-process)", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
			_, _, _, ok, err := ms.Take(ctx, pick(r))
			return ok, err
		}},
	}
}

var denyRatios = [][2]string{
	{"redstream-local-denials", "redis_rate"},
	{"redstream-local-denials", "redstream-no-local-denials"},
	{"redstream-no-local-denials", "redis_rate"},
}

func BenchmarkRedisDenyHeavy(b *testing.B) {
	b.Run("workload=hot-key/goroutines=64", func(b *testing.B) {
		cs := denyContenders(b, 100, time.Second, func(*rand.Rand) string { return "hot" })
		for b.Loop() {
			res := interleaveRedis(b, redisClient(b), 64, cs)
			report(b, cs, res, denyRatios)
		}
	})
	b.Run("workload=10k-keys-10pct-abusive/goroutines=64", func(b *testing.B) {
		keys := make([]string, 10_000)
		for i := range keys {
			keys[i] = "k:" + strconv.Itoa(i)
		}
		const abusive = 1000 // keys[:1000]; they get 100x a normal key's requests
		pick := func(r *rand.Rand) string {
			if r.IntN(109) < 100 { // 100*1000 / (100*1000 + 9000) of the requests
				return keys[r.IntN(abusive)]
			}
			return keys[abusive+r.IntN(len(keys)-abusive)]
		}
		cs := denyContenders(b, 1, 2*time.Second, pick)
		for b.Loop() {
			res := interleaveRedis(b, redisClient(b), 64, cs)
			report(b, cs, res, denyRatios)
		}
	})
}
