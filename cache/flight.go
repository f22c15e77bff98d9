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
		g.mu.Lock()
		if cl, ok := g.m[key]; ok {
			g.mu.Unlock()
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
		cl := &call{done: make(chan struct{}), err: errLoadAborted}
		if g.m == nil {
			g.m = make(map[string]*call)
		}
		g.m[key] = cl
		g.mu.Unlock()
		g.run(ctx, key, cl, fn)
		return cl.r, cl.err
	}
}

func (g *group) run(ctx context.Context, key string, cl *call, fn func(context.Context) (result, error)) {
	defer func() {
		g.mu.Lock()
		delete(g.m, key)
		g.mu.Unlock()
		close(cl.done)
	}()
	r, err := fn(ctx)
	cl.r, cl.err, cl.ctxEnded = r, err, err != nil && ctx.Err() != nil
}
