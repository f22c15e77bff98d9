package redisbackend

import (
	"context"
	"fmt"
	"sync"
)

// gathering is the coalescing of one slot's calls (coalesce.go: a limiter's decisions of
// one server or cluster slot; dedupcoalesce.go: one deduplicator's checks): how many calls
// are in flight, and the requests waiting for one to return. A request that finds fewer
// than maxInFlight calls in flight goes at once, alone; one that finds them all taken
// waits, and everything that gathered meanwhile goes next, in one call, in place of the
// call that returns. There is no timer: a gathering lasts at most one round trip.
type gathering[Q, A any] struct {
	mu       sync.Mutex
	inFlight int // calls in flight: at most maxInFlight
	waiting  []*waiter[Q, A]
}

// maxInFlight is how many calls of one slot may be in flight before requests gather: with
// one, the server would idle while the client reads a reply and sends the next gathering;
// a few keep it busy, and past them every request waits for a call to return.
const maxInFlight = 4

// waiter is one request q waiting in a gathering; done is closed once its answer a and
// err are set.
type waiter[Q, A any] struct {
	q    Q
	done chan struct{}
	a    A
	err  error
}

// enter takes a place among g's calls in flight and returns nil, or, when all are taken,
// queues q in the next gathering (under the same lock, so that no gathering can end between
// the two) and returns its waiter.
func (g *gathering[Q, A]) enter(q Q) *waiter[Q, A] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight < maxInFlight {
		g.inFlight++
		return nil
	}
	w := &waiter[Q, A]{q: q, done: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	return w
}

// wait returns w's answer once its gathering has made it, or wrap(ctx's error) as soon as
// ctx ends (leaving the gathering if it has not gone yet).
func (g *gathering[Q, A]) wait(ctx context.Context, w *waiter[Q, A], wrap func(error) error) (A, error) {
	select {
	case <-w.done:
		return w.a, w.err
	case <-ctx.Done():
		g.mu.Lock()
		for i, o := range g.waiting {
			if o == w { // not sent yet: it leaves the gathering
				g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		var zero A
		return zero, wrap(ctx.Err())
	}
}

// handOn ends one of g's calls in flight and returns the requests gathered meanwhile, which
// the caller hands to drain on a goroutine of their own (the caller whose call just
// returned does not wait for them); with none, g has one call fewer in flight.
func (g *gathering[Q, A]) handOn() []*waiter[Q, A] {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.waiting
	g.waiting = nil
	if len(ws) == 0 {
		g.inFlight--
	}
	return ws
}

// drain answers ws with run (which sets each waiter's a and err), then whatever gathered
// while they were in flight, until nothing has. A panic (a defect) fails the requests in
// hand with an error instead of taking the process down, and leaves g idle.
func (g *gathering[Q, A]) drain(ws []*waiter[Q, A], run func(ws []*waiter[Q, A]), wrap func(error) error) {
	defer func() {
		if r := recover(); r != nil {
			err := wrap(fmt.Errorf("redisbackend: coalesced calls failed: %v", r))
			g.mu.Lock()
			g.inFlight-- // this drain's call; the gathered requests fail with it
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
		run(ws)
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
