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

// ticketOf returns the index in *tickets of the admitted call of the breaker of the node
// serving key, asking that breaker for one if *tickets has none yet; -1 and an error
// wrapping redstream.ErrCircuitOpen when it is open.
func (l *Limiter) ticketOf(tickets *[]call, key string) (int, error) {
	if l.g.br == nil {
		if len(*tickets) == 0 {
			*tickets = append(*tickets, call{})
		}
		return 0, nil
	}
	br := l.g.br.For(key)
	for i, t := range *tickets {
		if t.br == br {
			return i, nil
		}
	}
	c, err := l.g.admit(key)
	if err != nil {
		return -1, err
	}
	*tickets = append(*tickets, c)
	return len(*tickets) - 1, nil
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
	groups := l.groupsOf(c, keys, send)
	calls, b := l.batchCalls(keys, groups, l.args(now, n))
	if len(b.tickets) == 0 {
		return all(b.closed)
	}
	res, err := l.runBatch(ctx, c, cp, calls, b.tickets, len(send))
	if err != nil {
		return all(err)
	}
	if errs := l.collectBatch(ctx, keys, groups, b, res, now, n, sent, out); errs != nil {
		return out, &redstream.BatchError{Errs: errs}
	}
	return out, nil
}

// batchTickets are the breaker tickets of a batch: one per node (per distinct breaker);
// of[g] is group g's index in tickets, -1 when its node's breaker is open, and then its
// keys fail with closed.
type batchTickets struct {
	tickets []call
	of      []int
	closed  error
}

// batchCalls builds one script call per group of keys, with its breaker ticket.
func (l *Limiter) batchCalls(keys []string, groups [][]int, args []string) ([]rueidis.LuaExec, batchTickets) {
	b := batchTickets{of: make([]int, len(groups))}
	calls := make([]rueidis.LuaExec, 0, len(groups))
	for g, idx := range groups {
		ks := make([]string, 0, len(idx)*len(l.roles))
		for _, i := range idx {
			ks = append(ks, l.callKeys(keys[i])...)
		}
		var err error
		if b.of[g], err = l.ticketOf(&b.tickets, ks[0]); err != nil {
			b.closed = err
			continue
		}
		calls = append(calls, rueidis.LuaExec{Keys: ks, Args: args})
	}
	return calls, b
}

// runBatch sends calls in one pipeline, bounded by the timeout per batchChunk of the nSend
// keys. An error is a call that did not return in time (the server suspected hung); the
// tickets are then ended with it.
func (l *Limiter) runBatch(ctx context.Context, c rueidis.Client, cp *caps, calls []rueidis.LuaExec, tickets []call, nSend int) ([]rueidis.RedisResult, error) {
	cctx, cancel := l.g.bound(ctx, (nSend+batchChunk-1)/batchChunk, &tickets[0])
	defer cancel.done()
	for i := range tickets[1:] {
		tickets[i+1].budget = tickets[0].budget
	}
	if !l.g.suspected() {
		return l.script.execMulti(cctx, c, cp, calls), nil
	}
	res, err := bounded(cctx, func() []rueidis.RedisResult { return l.script.execMulti(cctx, c, cp, calls) })
	if err != nil {
		for _, t := range tickets {
			l.g.end(ctx, t, err)
		}
	}
	return res, err
}

// collectBatch puts each group's decisions in out (recording local denials), ends the
// tickets with each node's first backend failure, and returns the keys' errors (nil when
// every key was decided).
func (l *Limiter) collectBatch(ctx context.Context, keys []string, groups [][]int, b batchTickets, res []rueidis.RedisResult, now time.Time, n int64, sent []localStart, out []redstream.Decision) []error {
	var errs []error
	bad := make([]error, len(b.tickets)) // each node's first backend failure, for its breaker
	next := 0
	for g, idx := range groups {
		var ds []redstream.Decision
		var err error
		if t := b.of[g]; t < 0 {
			err = l.script.wrap(b.closed)
		} else {
			ds, err = l.parseN(res[next], len(idx))
			next++
			if err != nil && bad[t] == nil && isBackendFailure(err) {
				bad[t] = err
			}
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
	named := false
	for t, c := range b.tickets {
		if werr := l.g.end(ctx, c, bad[t]); werr != bad[t] {
			named = true
		}
	}
	if named && errs != nil {
		for i, e := range errs { // name the timeout
			if e != nil && errors.Is(e, context.DeadlineExceeded) {
				errs[i] = fmt.Errorf("%w (no answer within the timeout, %v per %d decisions)", e, l.g.timeout, batchChunk)
			}
		}
	}
	return errs
}
