package cache

import (
	"context"
	"errors"
	"sync"
)

// errLoadAborted is what callers sharing a load get when the goroutine running it panicked
// or exited.
var errLoadAborted = errors.New("cache: the shared load panicked or its goroutine exited")

// group runs at most one load per key at a time in a process and shares its result
// (singleflight). Unlike x/sync/singleflight, a caller whose own context is still alive
// never inherits another caller's cancellation: it starts a load of its own instead.
type group struct {
	mu sync.Mutex
	m  map[string]*call
}

type call struct {
	done     chan struct{}
	r        result
	err      error
	ctxEnded bool // the load failed after the leader's context ended
}

// do runs fn for key, or waits for the run already in progress and returns its result.
func (g *group) do(ctx context.Context, key string, fn func(context.Context) (result, error)) (result, error) {
	for {
		cl, owner := g.join(key)
		if !owner {
			select {
			case <-cl.done:
				if cl.ctxEnded && ctx.Err() == nil {
					continue // the leader gave up, we did not: load again
				}
				return cl.r, cl.err
			case <-ctx.Done():
				return result{}, ctx.Err()
			}
		}
		g.run(ctx, key, cl, fn)
		return cl.r, cl.err
	}
}

// join returns the call in progress for key (owner false), or registers a new call that
// the caller owns and must finish (owner true).
func (g *group) join(key string) (cl *call, owner bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cl, ok := g.m[key]; ok {
		return cl, false
	}
	cl = &call{done: make(chan struct{}), err: errLoadAborted}
	if g.m == nil {
		g.m = make(map[string]*call)
	}
	g.m[key] = cl
	return cl, true
}

// finish removes the call the caller owns for key and releases its waiters, who then see
// the result already stored in cl (errLoadAborted if none was).
func (g *group) finish(key string, cl *call) {
	g.mu.Lock()
	delete(g.m, key)
	g.mu.Unlock()
	close(cl.done)
}

// set stores the outcome of a call, run with ctx.
func (cl *call) set(ctx context.Context, r result, err error) {
	cl.r, cl.err, cl.ctxEnded = r, err, err != nil && ctx.Err() != nil
}

func (g *group) run(ctx context.Context, key string, cl *call, fn func(context.Context) (result, error)) {
	defer g.finish(key, cl)
	r, err := fn(ctx)
	cl.set(ctx, r, err)
}
