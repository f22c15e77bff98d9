package redisbackend

import (
	"context"
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
	gathering[dedupReq, bool]
	// batch checks and marks ws in one call bounded by k timeouts, setting each one's
	// answer (true: a duplicate) and err.
	batch   func(ws []*dedupWaiter, k int)
	wrap    func(error) error // the deduplicator's error prefix
	decided atomic.Int64      // elements checked in gatherings
}

// dedupReq is one element waiting in a gathering, with the check's time argument (the
// windowed deduplicator's; "" for the server's).
type dedupReq struct{ elem, at string }

// dedupWaiter is one waiting check.
type dedupWaiter = waiter[dedupReq, bool]

// newDedupGather returns the coalescing of the deduplicator of b, or nil when its calls may
// not gather: coalescing is off, or the calls have no timeout of their own (a gathering
// cannot run on one caller's context).
func newDedupGather(b dedupBase, batch func(ws []*dedupWaiter, k int), wrap func(error) error) *dedupGather {
	if b.noCoalesce || b.g.timeout <= 0 {
		return nil
	}
	return &dedupGather{batch: batch, wrap: wrap}
}

// check enters elem at at in g: nil when it goes at once (the caller then calls and ends
// with handOn), or its waiter.
func (g *dedupGather) check(elem, at string) *dedupWaiter {
	return g.enter(dedupReq{elem: elem, at: at})
}

// answer waits for w's answer, or ctx's end.
func (g *dedupGather) answer(ctx context.Context, w *dedupWaiter) (bool, error) {
	return g.wait(ctx, w, g.wrap)
}

// done ends one call in flight: the checks gathered meanwhile go next.
func (g *dedupGather) done() {
	if ws := g.handOn(); len(ws) > 0 {
		go g.drain(ws, g.run, g.wrap)
	}
}

// run checks a gathering's elements in one call, with a timeout per batchChunk of them.
func (g *dedupGather) run(ws []*dedupWaiter) {
	g.batch(ws, (len(ws)+batchChunk-1)/batchChunk)
	g.decided.Add(int64(len(ws)))
}

// fill sets every waiter's answer from a batch's: dups[i] for ws[i], or err for all.
func fill(ws []*dedupWaiter, dups []bool, err error) {
	for i, w := range ws {
		if err != nil {
			w.err = err
		} else {
			w.a = dups[i]
		}
	}
}
