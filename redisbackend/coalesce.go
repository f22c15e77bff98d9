package redisbackend

import (
	"context"
	"fmt"
	"sync"
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

// gather is the coalescing of one slot: how many calls are in flight, and the decisions
// that wait for one to return.
type gather struct {
	mu       sync.Mutex
	inFlight int // calls in flight: at most maxInFlight
	waiting  []*gathered
}

// maxInFlight is how many calls of one slot may be in flight before decisions gather: with
// one, the server would idle while the client reads a reply and sends the next gathering;
// a few keep it busy, and past them every decision waits for a call to return.
const maxInFlight = 4

// gathered is one decision waiting in a gather; done is closed once d and err are set.
type gathered struct {
	key  string
	now  time.Time
	n    int64
	st   localStart
	done chan struct{}
	d    redstream.Decision
	err  error
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

// enter takes a place among g's calls in flight and returns nil, or, when all are taken,
// queues the decision in the next gathering (under the same lock, so that no gathering can
// end between the two) and returns it.
func (g *gather) enter(key string, now time.Time, n int64, st localStart) *gathered {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight < maxInFlight {
		g.inFlight++
		return nil
	}
	w := &gathered{key: key, now: now, n: n, st: st, done: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	return w
}

// wait returns w's decision once its gathering has made it, or its context's error as soon
// as ctx ends (leaving the gathering if it has not gone yet).
func (l *Limiter) wait(ctx context.Context, g *gather, w *gathered) (redstream.Decision, error) {
	select {
	case <-w.done:
		return w.d, w.err
	case <-ctx.Done():
		g.mu.Lock()
		for i, o := range g.waiting {
			if o == w { // not sent yet: it leaves the gathering
				g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return redstream.Decision{}, l.script.wrap(ctx.Err())
	}
}

// handOn ends one of g's calls in flight: the decisions gathered meanwhile go next in its
// place, from a goroutine of their own (the caller whose call just returned does not wait
// for them), or g has one call fewer in flight.
func (l *Limiter) handOn(g *gather) {
	g.mu.Lock()
	ws := g.waiting
	g.waiting = nil
	if len(ws) == 0 {
		g.inFlight--
	}
	g.mu.Unlock()
	if len(ws) > 0 {
		go l.drain(g, ws)
	}
}

// drain decides ws, then whatever gathered while they were in flight, until nothing has.
// A panic (a defect) fails the decisions in hand with an error instead of taking the
// process down, and leaves g idle.
func (l *Limiter) drain(g *gather, ws []*gathered) {
	defer func() {
		if r := recover(); r != nil {
			err := l.script.wrap(fmt.Errorf("redisbackend: coalesced decisions failed: %v", r))
			g.mu.Lock()
			g.inFlight-- // this drain's call; the gathered decisions fail with it
			ws = append(ws, g.waiting...)
			g.waiting = nil
			g.mu.Unlock()
			for _, w := range ws {
				select {
				case <-w.done:
				default:
					w.err = err
					close(w.done)
				}
			}
		}
	}()
	for len(ws) > 0 {
		l.decideGathered(ws)
		g.mu.Lock()
		ws = g.waiting
		g.waiting = nil
		if len(ws) == 0 {
			g.inFlight--
		}
		g.mu.Unlock()
	}
}

// decideGathered decides ws as batches, one per distinct (now, n) (most callers ask at
// the server's time for one unit, so there is usually one), and closes their done.
func (l *Limiter) decideGathered(ws []*gathered) {
	for len(ws) > 0 {
		now, n := ws[0].now, ws[0].n
		same, rest := ws[:0:0], ws[:0:0]
		for _, w := range ws {
			if w.now.Equal(now) && w.n == n {
				same = append(same, w)
			} else {
				rest = append(rest, w)
			}
		}
		keys := make([]string, len(same))
		sts := make([]localStart, len(same))
		for i, w := range same {
			keys[i], sts[i] = w.key, w.st
		}
		ds, errs := l.decideKeys(keys, now, n, sts)
		l.gathers.decided.Add(int64(len(same)))
		for i, w := range same {
			w.d, w.err = ds[i], errs[i]
			close(w.done)
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
