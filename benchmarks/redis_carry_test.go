package benchmarks

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/redisbackend"
)

// A limit raised on a live service: 100k keys hold state under a token bucket of burst 1M,
// then the policy's rate is doubled, and the new limiter keeps each key's state
// (redisbackend.Options.Previous with core.CarryAsIs: carry.lua seeds a key from its previous
// key on its first decision, then decides it; every later call checks the new key exists).
// Interleaved (see interleave_test.go), 64 goroutines, every request admitted. Contenders:
// the limiter after the change (carrying), the same spec with no previous one (a change that
// starts every key afresh, the behaviour before limit changes kept state), and
// go-redis/redis_rate v10, which has no limit changes (its key carries no spec, so a change
// keeps the state as it is: the cheapest possible, with no strategy).
//
//	go test -run '^$' -bench RedisLimitChange -benchtime 1x
func BenchmarkRedisLimitChange(b *testing.B) {
	rc, gc := rlServer(b, 64)
	ctx := context.Background()
	prefix := rlPrefix("carry")
	before, after := redstream.TokenBucket(1e6, 0.001), redstream.TokenBucket(1e6, 0.002)
	old, err := redisbackend.NewLimiter(rc, before, redisbackend.Options{KeyPrefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	// The keys' state under the previous limit, written from 64 goroutines.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := g; i < len(rlKeys); i += 64 {
				if _, err := old.AllowN(ctx, rlKeys[i], time.Time{}, 1); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	carrying, err := redisbackend.NewLimiter(rc, after, redisbackend.Options{KeyPrefix: prefix, Timeout: 5 * time.Second,
		Previous: []redstream.Spec{before}, Carry: core.CarryAsIs})
	if err != nil {
		b.Fatal(err)
	}
	fresh, err := redisbackend.NewLimiter(rc, after, redisbackend.Options{KeyPrefix: rlPrefix("carry-fresh"), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(gc)
	rrPrefix := rlPrefix("carry-rr")
	limit := redis_rate.Limit{Rate: 2, Burst: 1_000_000, Period: 1000 * time.Second}
	pickKey := func(r *rand.Rand) string { return rlKeys[r.IntN(len(rlKeys))] }
	decide := func(l redstream.Limiter) func(context.Context, *rand.Rand) (bool, error) {
		return func(ctx context.Context, r *rand.Rand) (bool, error) {
			d, err := l.AllowN(ctx, pickKey(r), time.Time{}, 1)
			return d.Allowed, err
		}
	}
	cs := []redisContender{
		{name: "redstream-carry-as-is", decide: decide(carrying)},
		{name: "redstream-no-previous", decide: decide(fresh)},
		{name: "redis_rate", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
			res, err := rr.Allow(ctx, rrPrefix+pickKey(r), limit)
			if err != nil {
				return false, err
			}
			return res.Allowed > 0, nil
		}},
	}
	ratios := [][2]string{
		{"redstream-carry-as-is", "redis_rate"},
		{"redstream-carry-as-is", "redstream-no-previous"},
		{"redstream-no-previous", "redis_rate"},
	}
	b.Run("workload=100k-keys-after-a-raise/goroutines=64", func(b *testing.B) {
		for b.Loop() {
			res := interleaveRedis(b, redisClient(b), 64, cs)
			report(b, cs, res, ratios)
		}
	})
}
