package redisbackend

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
	"pgregory.net/rapid"
)

// TestBatchEqualsSequential: AllowBatch decides exactly as AllowN called key after key (the
// memory engine, itself proven equal to core, is the reference), on miniredis, a real
// redis-server (keys chunked into multi-key script calls) and a real cluster (keys grouped
// by slot), with repeated keys, odd keys and batches larger than one chunk.
func TestBatchEqualsSequential(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			rapid.Check(t, func(rt *rapid.T) {
				alg := rapid.SampledFrom(redstream.Algorithms()).Draw(rt, "alg")
				spec := redstream.Spec{
					Algorithm: alg,
					Capacity:  float64(rapid.IntRange(1, 5).Draw(rt, "capacity")),
					Rate:      rapid.SampledFrom([]float64{0.5, 1, 10}).Draw(rt, "rate"),
					Window:    rapid.SampledFrom([]time.Duration{time.Millisecond, time.Second, time.Hour}).Draw(rt, "window"),
					Limit:     rapid.Int64Range(1, 5).Draw(rt, "limit"),
				}
				var l redstream.Limiter
				var err error
				multi := rapid.IntRange(0, 4).Draw(rt, "multi") == 0
				var ref redstream.Limiter
				if multi {
					specs := []redstream.Spec{spec, redstream.FixedWindow(time.Second, 3)}
					if rapid.Bool().Draw(rt, "one-limit multi") {
						specs = specs[:1]
					}
					l, err = NewMultiLimiter(c, specs, Options{KeyPrefix: uniq("bm"), Timeout: time.Minute}) // miniredis under -race is slow
					if err == nil {
						ref, err = memory.NewMultiLimiter(specs, memory.Options{})
					}
				} else {
					l, err = NewLimiter(c, spec, Options{KeyPrefix: uniq("b"), Timeout: time.Minute})
					if err == nil {
						ref, err = memory.NewLimiter(spec, memory.Options{})
					}
				}
				if err != nil {
					rt.Fatal(err)
				}
				pool := append([]string{"a", "b", "c"}, oddKeys[:10]...)
				now := t0
				for round := 0; round < rapid.IntRange(1, 4).Draw(rt, "rounds"); round++ {
					now = now.Add(time.Duration(rapid.Int64Range(-1000, 2_000_000).Draw(rt, "dt")) * time.Microsecond)
					size := rapid.SampledFrom([]int{1, 2, 7, 129, 300}).Draw(rt, "size")
					keys := make([]string, size)
					for i := range keys {
						keys[i] = pool[rapid.IntRange(0, len(pool)-1).Draw(rt, "key")]
					}
					got, err := l.(*Limiter).AllowBatch(ctx, keys, now, 1)
					if err != nil {
						rt.Fatalf("AllowBatch: %v", err)
					}
					for i, k := range keys {
						want, err := ref.AllowN(ctx, k, now, 1)
						if err != nil {
							rt.Fatal(err)
						}
						if got[i] != want {
							rt.Fatalf("round %d key %d (%q):\n got %+v\nwant %+v", round, i, k, got[i], want)
						}
					}
				}
			})
		})
	}
}

func TestBatchGroups(t *testing.T) {
	c := nopClient(t) // miniredis: a cluster-mode client
	l := mustLimiter(t, c, redstream.TokenBucket(1, 1), Options{})
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i%3)
	}
	groups := l.groups(c, keys)
	seen := 0
	for _, g := range groups {
		if len(g) > batchChunk {
			t.Errorf("group of %d keys, want at most %d", len(g), batchChunk)
		}
		s := slotOf(redisKey(l.prefix, keys[g[0]], ""))
		for j, i := range g {
			if slotOf(redisKey(l.prefix, keys[i], "")) != s {
				t.Errorf("group mixes slots")
			}
			if j > 0 && i <= g[j-1] {
				t.Errorf("group out of order: %v", g)
			}
		}
		seen += len(g)
	}
	if seen != len(keys) || len(groups) != 3 {
		t.Errorf("%d groups covering %d keys, want 3 covering %d", len(groups), seen, len(keys))
	}
}
