package redisbackend

import (
	"context"
	"errors"
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
func (l *Limiter) groups(c rueidis.Client, keys []string) [][]int {
	var groups [][]int
	switch {
	case l.multi:
		groups = make([][]int, len(keys))
		for i := range keys {
			groups[i] = []int{i}
		}
	case c.Mode() == rueidis.ClientModeCluster:
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
// server's TIME), in one pipelined round trip (a cluster client sends one pipeline per node)
// bounded by Options.Timeout per 128 keys. Decision i is for keys[i]; a key listed twice is
// decided twice, in order. Bad input (any key empty or too large, a bad n or now) returns
// an error and no Redis call. When Redis fails for some keys (all of them while the breaker
// is open), their decisions are denied zero values and the error is a
// *redstream.BatchError giving each key's error, which redstream.WithFailurePolicy answers
// key by key. Keys that local denials answer (see the package documentation) are not sent.
// The batch is not atomic across keys: each key's decision is. A single-limit
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
	out := make([]redstream.Decision, len(keys))
	send, sent := l.local.lookupBatch(keys, now, n, out) // the keys local denials do not answer
	if len(send) == 0 {
		return out, nil
	}
	all := func(err error) ([]redstream.Decision, error) {
		be := &redstream.BatchError{Errs: make([]error, len(keys))}
		err = l.script.wrap(err)
		for _, i := range send {
			be.Errs[i] = err
		}
		return out, be
	}
	c, cp, err := l.get()
	if err != nil {
		return all(err)
	}
	cctx, cancel, t, err := l.g.beginN(ctx, (len(send)+batchChunk-1)/batchChunk)
	if err != nil {
		return all(err)
	}
	args := l.args(now, n)
	groups := l.groupsOf(c, keys, send)
	calls := make([]rueidis.LuaExec, len(groups))
	for g, idx := range groups {
		ks := make([]string, 0, len(idx)*len(l.roles))
		for _, i := range idx {
			ks = append(ks, l.Keys(keys[i])...)
		}
		calls[g] = rueidis.LuaExec{Keys: ks, Args: args}
	}
	var res []rueidis.RedisResult
	if l.g.suspected() {
		if res, err = bounded(cctx, func() []rueidis.RedisResult { return l.script.execMulti(cctx, c, cp, calls) }); err != nil {
			cancel()
			l.g.end(ctx, t, err)
			return all(err)
		}
	} else {
		res = l.script.execMulti(cctx, c, cp, calls)
	}
	cancel()
	var errs []error
	var bad error // the first backend failure, for the breaker
	for g, idx := range groups {
		ds, err := l.parseN(res[g], len(idx))
		if err != nil && bad == nil && isBackendFailure(err) {
			bad = err
		}
		for j, i := range idx {
			if err != nil {
				if errs == nil {
					errs = make([]error, len(keys))
				}
				errs[i] = err
				continue
			}
			out[i] = ds[j]
			l.local.recordBatch(keys, i, now, n, sent, ds[j])
		}
	}
	if werr := l.g.end(ctx, t, bad); werr != bad && errs != nil {
		for i, e := range errs { // name the timeout
			if e != nil && errors.Is(e, context.DeadlineExceeded) {
				errs[i] = fmt.Errorf("%w (no answer within the timeout, %v per %d decisions)", e, l.g.timeout, batchChunk)
			}
		}
	}
	if errs != nil {
		return out, &redstream.BatchError{Errs: errs}
	}
	return out, nil
}
