package redisbackend

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
)

// Coalesced decisions. A single-limit limiter's script decides up to batchChunk keys in one
// call, and on the server most of a decision's cost is the call itself (EVALSHA's lookup,
// argument parsing, the reply). So concurrent AllowN calls are gathered: a decision whose
// slot (the whole server, or one cluster slot) has fewer than maxInFlight calls in flight
// goes at once, alone, as before; one that arrives while they are all taken waits for one
// to return, and everything that gathered meanwhile goes in its place as one pipeline of
// batch calls (AllowBatch's), then the next. There is no timer on the way: a lone caller
// never waits, and a gathering lasts at most one call's round trip. Each caller keeps its own context (it stops waiting when its
// context ends, with the context's error; a decision already sent is made in Redis and
// its result dropped, as a call abandoned by its context would be), its own local
// denials, and the failure policy of whatever wraps the limiter.

// gather is the coalescing of one slot's decisions (gathering.go).
type gather = gathering[decisionReq, redstream.Decision]

// decisionReq is one decision waiting in a gather.
type decisionReq struct {
	key string
	now time.Time
	n   int64
	st  localStart
}

// gathers holds a limiter's gathers: one for a single server, one per cluster slot, made
// on first use.
type gathers struct {
	one     gather
	slots   [slotChunks]atomic.Pointer[[slotChunk]atomic.Pointer[gather]] // on a cluster, filled as slots are used
	decided atomic.Int64                                                  // decisions made in gatherings
}

// A cluster's 16384 slots, in chunks allocated on first use: 1 KiB for the chunk table,
// 1 KiB per chunk a limiter's keys reach.
const (
	slotChunk  = 128
	slotChunks = 16384 / slotChunk
)

// of returns the gather of the decision whose first Redis key is key0 on client c.
func (gs *gathers) of(c rueidis.Client, key0 string) *gather {
	if c.Mode() != rueidis.ClientModeCluster {
		return &gs.one
	}
	s := slotOf(key0)
	chunk := gs.slots[s/slotChunk].Load()
	if chunk == nil {
		gs.slots[s/slotChunk].CompareAndSwap(nil, new([slotChunk]atomic.Pointer[gather]))
		chunk = gs.slots[s/slotChunk].Load()
	}
	g := chunk[s%slotChunk].Load()
	if g == nil {
		chunk[s%slotChunk].CompareAndSwap(nil, new(gather))
		g = chunk[s%slotChunk].Load()
	}
	return g
}

// wait returns w's decision once its gathering has made it, or its context's error as soon
// as ctx ends.
func (l *Limiter) wait(ctx context.Context, g *gather, w *waiter[decisionReq, redstream.Decision]) (redstream.Decision, error) {
	return g.wait(ctx, w, l.script.wrap)
}

// handOn ends one of g's calls in flight: the decisions gathered meanwhile go next.
func (l *Limiter) handOn(g *gather) {
	if ws := g.handOn(); len(ws) > 0 {
		go g.drain(ws, l.decideGathered, l.script.wrap)
	}
}

// decideGathered decides ws as batches, one per distinct (now, n) (most callers ask at
// the server's time for one unit, so there is usually one), setting each one's answer.
func (l *Limiter) decideGathered(ws []*waiter[decisionReq, redstream.Decision]) {
	for len(ws) > 0 {
		now, n := ws[0].q.now, ws[0].q.n
		same, rest := ws[:0:0], ws[:0:0]
		for _, w := range ws {
			if w.q.now.Equal(now) && w.q.n == n {
				same = append(same, w)
			} else {
				rest = append(rest, w)
			}
		}
		keys := make([]string, len(same))
		sts := make([]localStart, len(same))
		for i, w := range same {
			keys[i], sts[i] = w.q.key, w.q.st
		}
		ds, errs := l.decideKeys(keys, now, n, sts)
		l.gathers.decided.Add(int64(len(same)))
		for i, w := range same {
			w.a, w.err = ds[i], errs[i]
		}
		ws = rest
	}
}

// decideKeys decides every one of keys at now for n in one pipeline of batch calls,
// bounded by the limiter's timeout per batchChunk keys (never by one caller's context: the
// callers wait with their own), recording local denials with sts. errs[i] is key i's
// error.
func (l *Limiter) decideKeys(keys []string, now time.Time, n int64, sts []localStart) ([]redstream.Decision, []error) {
	out := make([]redstream.Decision, len(keys))
	errs := make([]error, len(keys))
	all := func(err error) ([]redstream.Decision, []error) {
		err = l.script.wrap(err)
		for i := range errs {
			errs[i] = err
		}
		return out, errs
	}
	c, cp, err := l.get()
	if err != nil {
		return all(err)
	}
	ctx := context.Background()
	groups := l.groups(c, keys)
	calls, b := l.batchCalls(keys, groups, l.args(now, n))
	if len(b.tickets) == 0 {
		return all(b.closed)
	}
	res, err := l.runBatch(ctx, c, cp, calls, b.tickets, len(keys))
	if err != nil {
		return all(err)
	}
	if bad := l.collectBatch(ctx, keys, groups, b, res, now, n, sts, out); bad != nil {
		copy(errs, bad)
	}
	return out, errs
}
