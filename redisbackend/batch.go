package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
)

// batchChunk is the most keys one script call of a batch decides, so that no single call
// holds the server for long; a batch sends as many calls as it needs in one pipeline.
const batchChunk = 128

// groups splits the indexes of keys into the script calls of a batch. A single-limit script
// decides several keys per call, so keys are grouped: by cluster slot on a cluster client
// (all the keys of one call must share a slot), in chunks of batchChunk otherwise. A
// multi-limiter decides one key per call. Order within a group is the order in keys.
func (l *Limiter) groups(keys []string) [][]int {
	var groups [][]int
	switch {
	case l.multi:
		groups = make([][]int, len(keys))
		for i := range keys {
			groups[i] = []int{i}
		}
	case l.client.Mode() == rueidis.ClientModeCluster:
		bySlot := make(map[uint16]int)
		for i, k := range keys {
			s := slotOf(l.Keys(k)[0])
			g, ok := bySlot[s]
			if !ok || len(groups[g]) == batchChunk {
				g = len(groups)
				bySlot[s] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], i)
		}
	default:
		for i := 0; i < len(keys); i += batchChunk {
			g := make([]int, 0, min(batchChunk, len(keys)-i))
			for j := i; j < min(i+batchChunk, len(keys)); j++ {
				g = append(g, j)
			}
			groups = append(groups, g)
		}
	}
	return groups
}

// AllowBatch decides a request of cost n for each of keys at now (the zero time reads each
// server's TIME), in one pipelined round trip (a cluster client sends one pipeline per node).
// Decision i is for keys[i]; a key listed twice is decided twice, in order. Bad input (any
// key empty or too large, a bad n or now) returns an error and no Redis call. When Redis
// fails for some keys, those keys follow the FailurePolicy; under FailClosed their
// decisions are denied zero values and the error reports how many failed and the first
// failure. The batch is not atomic across keys: each key's decision is. A single-limit
// limiter decides up to 128 keys per script call (keys of one cluster slot on a cluster),
// which saves most of the per-call cost on the server.
func (l *Limiter) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]redstream.Decision, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	for i, k := range keys {
		if err := l.check(k, now, n); err != nil {
			return nil, fmt.Errorf("redisbackend: batch key %d: %w", i, err)
		}
	}
	args := l.args(now, n)
	groups := l.groups(keys)
	calls := make([]rueidis.LuaExec, len(groups))
	for g, idx := range groups {
		ks := make([]string, 0, len(idx)*len(l.roles))
		for _, i := range idx {
			ks = append(ks, l.Keys(keys[i])...)
		}
		calls[g] = rueidis.LuaExec{Keys: ks, Args: args}
	}
	res := l.script.execMulti(ctx, l.client, calls)
	out := make([]redstream.Decision, len(keys))
	var first error
	failed := 0
	for g, idx := range groups {
		ds, err := l.parseN(res[g], len(idx))
		for j, i := range idx {
			var d redstream.Decision
			var derr error
			if err != nil {
				d, derr = l.fail(ctx, keys[i], now, n, err)
			} else {
				d = ds[j]
				l.answered()
			}
			if derr != nil {
				failed++
				if first == nil {
					first = fmt.Errorf("key %d: %w", i, derr)
				}
			}
			out[i] = d
		}
	}
	if first != nil {
		return out, fmt.Errorf("redisbackend: batch: %d of %d decisions failed; %w", failed, len(keys), first)
	}
	return out, nil
}
