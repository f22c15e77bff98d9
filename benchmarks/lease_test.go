package benchmarks

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// BenchmarkLeaseAcquireRelease: one Acquire and one Release of redisbackend's
// ConcurrencyLimiter (a lease of one slot, limit 1: a lock) against the hand-written Redis
// lock it replaces, on the same rueidis client and server: SET key token NX PX, then a
// compare-and-delete script (the safe release: only the holder's token deletes the key).
// No Redis semaphore library is available as a Go module here, so the plain lock is the
// peer. Both are two round trips; the lease also counts units by expiry (a sorted set) and
// supports limits above 1, extensions and rate limits in the same call. The contenders run
// in interleaved rounds timed by the wall clock; read the ratio lease/setnx (time per
// acquire+release, lease over lock), not the absolute ns/op.
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	client := redisClient(b)
	ctx := context.Background()
	leases, err := redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(1, 10*time.Second)},
		redisbackend.Options{KeyPrefix: "bench-lease", Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	unlock := rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	var seq int64
	lease := func(n int) {
		for range n {
			l, err := leases.Acquire(ctx, "job", time.Time{}, 1)
			if err != nil || !l.Allowed {
				b.Fatalf("acquire: %+v, %v", l, err)
			}
			if ok, err := leases.Release(ctx, l, time.Time{}); !ok || err != nil {
				b.Fatalf("release: %v, %v", ok, err)
			}
		}
	}
	lock := func(n int) {
		for range n {
			seq++
			tok := strconv.FormatInt(seq, 10)
			err := client.Do(ctx, client.B().Set().Key("bench-lock:job").Value(tok).Nx().PxMilliseconds(10000).Build()).Error()
			if err != nil {
				b.Fatalf("lock: %v", err)
			}
			if v, err := unlock.Exec(ctx, client, []string{"bench-lock:job"}, []string{tok}).AsInt64(); v != 1 || err != nil {
				b.Fatalf("unlock: %d, %v", v, err)
			}
		}
	}
	runRounds(b, []contender{{"lease", lease}, {"setnx", lock}}, func(c contender, n int) time.Duration {
		t0 := time.Now()
		c.run(n)
		return time.Since(t0)
	})
}
