package redisbackend

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Coalesced deduplicator checks, as coalesced decisions (coalesce.go): a CheckAndMark that
// arrives while maxInFlight calls of the deduplicator are in flight waits for one to
// return, and every element that gathered meanwhile goes in its place in one call (the set
// and Bloom deduplicators' batch scripts, the windowed one's script pipelined). A
// deduplicator's keys share one hash slot, so one gathering serves it on a cluster too.
// There is no timer: a caller with fewer than maxInFlight calls ahead goes at once, alone.
// A gathered element is checked and marked in arrival order with the others, so exactly
// one caller of a new element sees it as new, as alone. A caller keeps its own context:
// one that ends while its element waits leaves the gathering with the context's error,
// and one that ends after its element was sent leaves the mark made in Redis, as a call
// abandoned by its context would.

// dedupGather is the coalescing of one deduplicator's CheckAndMark calls.
type dedupGather struct {
	mu       sync.Mutex
	inFlight int // calls in flight: at most maxInFlight
	waiting  []*dedupWaiter
	// batch checks and marks ws in one call bounded by k timeouts, setting each one's dup
	// and err (it does not close done).
	batch   func(ws []*dedupWaiter, k int)
	wrap    func(error) error // the deduplicator's error prefix
	decided atomic.Int64      // elements checked in gatherings
}

// dedupWaiter is one element waiting in a gathering; done is closed once dup and err are
// set. at is the check's time argument (the windowed deduplicator's; "" for the server's).
type dedupWaiter struct {
	elem, at string
	done     chan struct{}
	dup      bool
	err      error
}

// newDedupGather returns the coalescing of the deduplicator of b, or nil when its calls may
// not gather: coalescing is off, or the calls have no timeout of their own (a gathering
// cannot run on one caller's context).
func newDedupGather(b dedupBase, batch func(ws []*dedupWaiter, k int), wrap func(error) error) *dedupGather {
	if b.noCoalesce || b.g.timeout <= 0 {
		return nil
	}
	return &dedupGather{batch: batch, wrap: wrap}
}

// enter takes a place among the calls in flight and returns nil, or, when all are taken,
// queues elem in the next gathering and returns its waiter.
func (g *dedupGather) enter(elem, at string) *dedupWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight < maxInFlight {
		g.inFlight++
		return nil
	}
	w := &dedupWaiter{elem: elem, at: at, done: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	return w
}

// wait returns w's answer once its gathering has made it, or its context's error as soon
// as ctx ends (leaving the gathering if it has not gone yet).
func (g *dedupGather) wait(ctx context.Context, w *dedupWaiter) (bool, error) {
	select {
	case <-w.done:
		return w.dup, w.err
	case <-ctx.Done():
		g.mu.Lock()
		for i, o := range g.waiting {
			if o == w {
				g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return false, g.wrap(ctx.Err())
	}
}

// handOn ends one call in flight: the elements gathered meanwhile go next in its place,
// from a goroutine of their own, or there is one call fewer in flight.
func (g *dedupGather) handOn() {
	g.mu.Lock()
	ws := g.waiting
	g.waiting = nil
	if len(ws) == 0 {
		g.inFlight--
	}
	g.mu.Unlock()
	if len(ws) > 0 {
		go g.drain(ws)
	}
}

// drain checks ws, then whatever gathered while they were in flight, until nothing has. A
// panic (a defect) fails the elements in hand with an error and leaves g idle.
func (g *dedupGather) drain(ws []*dedupWaiter) {
	defer func() {
		if r := recover(); r != nil {
			err := g.wrap(fmt.Errorf("redisbackend: coalesced deduplicator checks failed: %v", r))
			g.mu.Lock()
			g.inFlight--
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
		g.batch(ws, (len(ws)+batchChunk-1)/batchChunk)
		g.decided.Add(int64(len(ws)))
		for _, w := range ws {
			close(w.done)
		}
		g.mu.Lock()
		ws = g.waiting
		g.waiting = nil
		if len(ws) == 0 {
			g.inFlight--
		}
		g.mu.Unlock()
	}
}

// fill sets every waiter's answer from a batch's: dups[i] for ws[i], or err for all.
func fill(ws []*dedupWaiter, dups []bool, err error) {
	for i, w := range ws {
		if err != nil {
			w.err = err
		} else {
			w.dup = dups[i]
		}
	}
}
