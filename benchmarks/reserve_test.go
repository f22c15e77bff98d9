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
	"golang.org/x/time/rate"
)

// Reserve, then settle, against the peers that have a reservation:
//
//   - in process, one hot key: redstream.Reserve (memory) of 3 then Settle(1), and
//     Reserve then Cancel, vs golang.org/x/time/rate's ReserveN(now, 3) then Cancel, the
//     only in-process peer with a refund (it has no keys and no partial settlement);
//   - on Redis, 100k keys: redisbackend's ReserveN of 3 then Settle(1) (two round trips)
//     vs go-redis/redis_rate's AllowN of 3 (one round trip, nothing to settle), with
//     redstream's own AllowN beside them.
//
//	go test -run xxx -bench 'Reserve' -benchtime 200000x
//
// Ratios read "redstream/<peer>": time per reservation (and its settlement) over the
// peer's, in the same interleaved rounds.

func BenchmarkReserveMemory(b *testing.B) {
	ctx := context.Background()
	l := newMemory(b, hotSpec)
	x := rate.NewLimiter(1e6, 1e9)
	interleave(b,
		contender{"redstream-settle", func(n int) {
			for range n {
				r, err := redstream.Reserve(ctx, l, "user:1", 3)
				if err != nil || !r.Allowed {
					b.Fatal("denied", err)
				}
				if err := r.Settle(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		}},
		contender{"redstream-cancel", func(n int) {
			for range n {
				r, err := redstream.Reserve(ctx, l, "user:1", 3)
				if err != nil || !r.Allowed {
					b.Fatal("denied", err)
				}
				if err := r.Cancel(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}},
		contender{"xtime-rate", func(n int) {
			for range n {
				r := x.ReserveN(time.Now(), 3)
				if !r.OK() || r.Delay() > 0 {
					b.Fatal("denied")
				}
				r.Cancel()
			}
		}},
	)
}

func BenchmarkReserveRedis(b *testing.B) {
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			rc, gc := rlServer(b, g)
			pick := func(r *rand.Rand) string { return rlKeys[r.IntN(len(rlKeys))] }
			p := rlPrefix("rsv")
			// A loaded machine stalls calls past the default 100 ms; the comparison is of
			// throughput, not of the deadline.
			l, err := redisbackend.NewLimiter(rc, bigBucket, redisbackend.Options{KeyPrefix: p, Timeout: 2 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			rp := rlPrefix("rr")
			rl := redis_rate.NewLimiter(gc)
			limit := redis_rate.Limit{Rate: 1, Burst: 1_000_000, Period: 1000 * time.Second}
			cs := []redisContender{
				{name: "redstream-reserve-settle", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					res, err := l.ReserveN(ctx, pick(r), time.Time{}, 3)
					if err != nil || !res.Allowed {
						return false, err
					}
					return true, res.Settle(ctx, 1)
				}},
				{name: "redis_rate-allowN", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					res, err := rl.AllowN(ctx, rp+pick(r), limit, 3)
					if err != nil {
						return false, err
					}
					return res.Allowed > 0, nil
				}},
				{name: "redstream-allowN", decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					d, err := l.AllowN(ctx, pick(r), time.Time{}, 3)
					return d.Allowed, err
				}},
			}
			for b.Loop() {
				res := interleaveRedis(b, rc, g, cs)
				report(b, cs, res, [][2]string{{"redstream-reserve-settle", "redis_rate-allowN"}, {"redstream-allowN", "redis_rate-allowN"}})
				var n int64
				for _, s := range res[0] {
					n += s.decisions
				}
				rlCheckKeys(b, rc, p, n)
			}
		})
	}
}
