package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

// BenchmarkRedisDedup: CheckAndMark of new elements (every check admitted as new) at 1, 64 and
// 256 goroutines, interleaved on one redis-server: redstream's set deduplicator with coalesced
// checks (the default) and with one call per check (DedupOptions.DisableCoalescing), its
// windowed deduplicator (coalesced), and the hand-written check a team writes without a
// library, a go-redis SADD whose reply says whether the element was new (the floor of an
// exact set check: one plain command, no script).
func BenchmarkRedisDedup(b *testing.B) {
	for _, g := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			rc, gc := rlServer(b, g)
			name := rlPrefix("dedup")
			newDedup := func(suffix string, spec redstream.DedupSpec, opts redisbackend.DedupOptions) redstream.Deduplicator {
				d, err := redisbackend.NewDeduplicator(rc, name+suffix, spec, opts)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			set := newDedup("set", redstream.DedupSpec{Strategy: redstream.DedupSet}, redisbackend.DedupOptions{})
			single := newDedup("set1", redstream.DedupSpec{Strategy: redstream.DedupSet}, redisbackend.DedupOptions{DisableCoalescing: true})
			window := newDedup("window", redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}, redisbackend.DedupOptions{})
			saddKey := name + ":sadd"
			elem := func(r *rand.Rand) string { return strconv.FormatUint(r.Uint64(), 36) }
			check := func(d redstream.Deduplicator) func(ctx context.Context, r *rand.Rand) (bool, error) {
				return func(ctx context.Context, r *rand.Rand) (bool, error) {
					dup, err := d.CheckAndMark(ctx, elem(r))
					return !dup, err
				}
			}
			cs := []redisContender{
				{name: "redstream-set", decide: check(set)},
				{name: "redstream-set-one-call-each", decide: check(single)},
				{name: "redstream-window", decide: check(window)},
				{name: "go-redis-sadd", cmds: []string{"sadd"}, decide: func(ctx context.Context, r *rand.Rand) (bool, error) {
					n, err := gc.SAdd(ctx, saddKey, elem(r)).Result()
					return n == 1, err
				}},
			}
			for b.Loop() {
				res := interleaveRedis(b, rc, g, cs)
				report(b, cs, res, [][2]string{{"redstream-set", "go-redis-sadd"}, {"redstream-set-one-call-each", "go-redis-sadd"},
					{"redstream-set", "redstream-set-one-call-each"}, {"redstream-window", "go-redis-sadd"}})
			}
		})
	}
}
