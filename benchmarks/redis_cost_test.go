package benchmarks

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// BenchmarkRedisPathCost is the cost of one decision on the allowing path, per algorithm,
// next to the floor of any Redis-side decision, interleaved (see interleave_test.go), from
// 64 goroutines over 100k keys: Redis CPU per decision (the script's usec in INFO
// commandstats, which includes the commands it calls; and the server's whole CPU from INFO
// cpu, which adds reading, parsing and writing), and the client process's CPU per decision.
//
// The floors: an EVALSHA of `return 1` with one key (the least a script costs), and a bare
// GET of an existing key (the least any command costs). redis_rate runs its own GCRA script.
// Every limiter admits every request (a burst of a million, earned back over hours).
//
//	go test -run xxx -bench RedisPathCost -benchtime 1x
func BenchmarkRedisPathCost(b *testing.B) {
	rc, gc := rlServer(b, 64)
	ctx := context.Background()
	pickKey := func(r *rand.Rand) string { return rlKeys[r.IntN(len(rlKeys))] }
	var cs []redisContender
	for _, spec := range []redstream.Spec{
		bigBucket, redstream.LeakyBucket(1e6, 0.001), redstream.SlidingWindow(time.Hour, 1<<20),
		redstream.SlidingCounter(time.Hour, 1e6), redstream.FixedWindow(time.Hour, 1e9),
	} {
		l, err := redisbackend.NewLimiter(rc, spec, redisbackend.Options{KeyPrefix: rlPrefix("cost")})
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, redisContender{name: "redstream-" + string(spec.Algorithm), decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
			d, err := l.AllowN(ctx, pickKey(r), time.Time{}, 1)
			return d.Allowed, err
		}})
		if spec.Algorithm == redstream.AlgorithmTokenBucket {
			cs = append(cs, redisContender{name: "redstream-token-bucket-explicit-time", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
				d, err := l.AllowN(ctx, pickKey(r), time.Now(), 1)
				return d.Allowed, err
			}})
		}
	}
	rr := redis_rate.NewLimiter(gc)
	rrPrefix := rlPrefix("cost-rr")
	limit := redis_rate.Limit{Rate: 1, Burst: 1_000_000, Period: 1000 * time.Second}
	cs = append(cs, redisContender{name: "redis_rate", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
		res, err := rr.Allow(ctx, rrPrefix+pickKey(r), limit)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}})
	noop := rueidis.NewLuaScript("return 1")
	cs = append(cs, redisContender{name: "floor-evalsha-return-1", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
		v, err := noop.Exec(ctx, rc, []string{pickKey(r)}, nil).AsInt64()
		return v == 1, err
	}})
	getPrefix := rlPrefix("cost-get")
	if err := rc.Do(ctx, rc.B().Set().Key(getPrefix).Value("1767225600000000").Build()).Error(); err != nil {
		b.Fatal(err)
	}
	cs = append(cs, redisContender{name: "floor-get", cmds: []string{"get"}, decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
		err := rc.Do(ctx, rc.B().Get().Key(getPrefix).Build()).Error()
		return err == nil, err
	}})
	for b.Loop() {
		res := interleaveRedis(b, redisClient(b), 64, cs)
		report(b, cs, res, [][2]string{{"redstream-token-bucket", "redis_rate"}})
	}
}
