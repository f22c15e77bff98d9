package redisbackend

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The deadline of one Redis call, without allocating on the common path.
//
// context.WithTimeout costs four allocations a call (the context, its done channel, the
// cancel closure and the timer), nearly half of a decision's. A caller's context with
// neither a deadline nor a done channel (context.Background, a context of values) needs
// none of them: it cannot end the call, so the call's context only has to end at the
// deadline. Such calls get a callCtx from a pool, with a timer made once and reset per
// call. A callCtx goes back to the pool only when its timer is stopped before it fired:
// its done channel is then still open, and nothing holds it (rueidis and bounded keep a
// call's context past the call only once the context is done). Every other context goes
// through context.WithTimeout as before.

// callCtx is a context that ends at its deadline, over a parent that never ends.
type callCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer
	expired  atomic.Bool
}

var callCtxs sync.Pool // of *callCtx, with stopped timers and open done channels

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *callCtx) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *callCtx) expire() {
	c.expired.Store(true)
	close(c.done)
}

// release ends a call's context: done is its cancel.
type release struct {
	cancel context.CancelFunc
	c      *callCtx
}

func (r release) done() {
	switch {
	case r.c != nil:
		if r.c.timer.Stop() { // not fired: the channel is open and the context unused
			r.c.parent = nil
			callCtxs.Put(r.c)
		}
	case r.cancel != nil:
		r.cancel()
	}
}

// withTimeout returns ctx bounded by d (no bound for d <= 0) and its release. When ctx's own
// deadline comes sooner, ctx is returned as is.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, release) {
	if d <= 0 {
		return ctx, release{}
	}
	dl, ok := ctx.Deadline()
	if ok && time.Until(dl) <= d {
		return ctx, release{}
	}
	if ok || ctx.Done() != nil {
		cctx, cancel := context.WithTimeout(ctx, d)
		return cctx, release{cancel: cancel}
	}
	c, _ := callCtxs.Get().(*callCtx)
	if c == nil {
		c = &callCtx{parent: ctx, deadline: time.Now().Add(d), done: make(chan struct{})}
		c.timer = time.AfterFunc(d, c.expire)
		return c, release{c: c}
	}
	c.parent, c.deadline = ctx, time.Now().Add(d)
	c.timer.Reset(d)
	return c, release{c: c}
}
