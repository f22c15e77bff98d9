package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// A hot key under its limit: one key limited to 1M/s with a burst of 1G, requested as fast as 64
// goroutines can, so every request is admitted. Interleaved (see interleave_test.go), on the
// benchmarks' Redis. Contenders: redstream's token bucket with leased quota
// (redisbackend.Options.Quota), without it (one script call per decision), and
// go-redis/redis_rate v10 (one script call per decision).
//
//	go test -run '^$' -bench RedisLeasedHotKey -benchtime 1x

func BenchmarkRedisLeasedHotKey(b *testing.B) {
	const burst, rate = 1_000_000_000, 1_000_000
	rc, gc := rlServer(b, 64)
	spec := redstream.TokenBucket(burst, rate)
	// A loaded machine: measure, do not time out.
	timeout := 2 * time.Second
	leased, err := redisbackend.NewLimiter(rc, spec, redisbackend.Options{KeyPrefix: rlPrefix("lease-on"), Timeout: timeout, Quota: redisbackend.QuotaOptions{Enabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	plain, err := redisbackend.NewLimiter(rc, spec, redisbackend.Options{KeyPrefix: rlPrefix("lease-off"), Timeout: timeout})
	if err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(gc)
	rrLimit := redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second}
	rrKey := rlPrefix("lease-rr") + "hot"
	// allowed fails the run on a denial: the fixture is a key under its limit.
	allowed := func(name string, ok bool) (bool, error) {
		if !ok {
			return false, fmt.Errorf("%s denied a request of a key under its limit", name)
		}
		return ok, nil
	}
	cs := []redisContender{
		{name: "redstream-leases", decide: func(ctx context.Context, _ *rand.Rand) (bool, error) {
			d, err := leased.AllowN(ctx, "hot", time.Time{}, 1)
			if err != nil {
				return false, err
			}
			return allowed("redstream-leases", d.Allowed)
		}},
		{name: "redstream-no-leases", decide: func(ctx context.Context, _ *rand.Rand) (bool, error) {
			d, err := plain.AllowN(ctx, "hot", time.Time{}, 1)
			if err != nil {
				return false, err
			}
			return allowed("redstream-no-leases", d.Allowed)
		}},
		{name: "redis_rate", decide: func(ctx context.Context, _ *rand.Rand) (bool, error) {
			res, err := rr.Allow(ctx, rrKey, rrLimit)
			if err != nil {
				return false, err
			}
			return allowed("redis_rate", res.Allowed > 0)
		}},
	}
	ratios := [][2]string{
		{"redstream-leases", "redis_rate"},
		{"redstream-leases", "redstream-no-leases"},
		{"redstream-no-leases", "redis_rate"},
	}
	b.Run("workload=hot-key-under-limit/goroutines=64", func(b *testing.B) {
		for b.Loop() {
			res := interleaveRedis(b, redisClient(b), 64, cs)
			report(b, cs, res, ratios)
		}
	})
}
