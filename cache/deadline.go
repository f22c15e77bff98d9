package cache

import (
	"context"
	"sync"
	"time"
)

// callCtx returns the context of one Redis call: ctx with the deadline Config.Timeout from
// now, unless ctx's own deadline is sooner (then ctx itself, and a nil *opCtx). Call
// release on the returned *opCtx (nil is fine) when the call has returned.
func (c *Cache) callCtx(ctx context.Context) (context.Context, *opCtx) {
	return c.batchCtx(ctx, 1)
}

// keysPerTimeout is the number of keys a batched call (GetMany's pipelines) may carry per
// Config.Timeout of deadline: a round trip of n keys gets Timeout × ceil(n/keysPerTimeout).
// A healthy local server reads 1000 keys with MGET in a few milliseconds.
const keysPerTimeout = 1000

// batchTimeout is the deadline of one round trip carrying n keys.
func (c *Cache) batchTimeout(n int) time.Duration {
	return c.cfg.Timeout * time.Duration(max(1, (n+keysPerTimeout-1)/keysPerTimeout))
}

// batchCtx is callCtx for a round trip carrying n keys (see keysPerTimeout).
func (c *Cache) batchCtx(ctx context.Context, n int) (context.Context, *opCtx) {
	d := time.Now().Add(c.batchTimeout(n))
	if pd, ok := ctx.Deadline(); ok && !pd.After(d) {
		return ctx, nil
	}
	o := &opCtx{parent: ctx, deadline: d}
	return o, o
}

// detached returns the context of a write no caller waits for (the write-back of a load,
// a lock release, a sliding renewal): it survives the caller's cancellation (the lock would
// otherwise stay until its TTL) and has the deadline Config.Timeout of its own.
func (c *Cache) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return c.detachedN(ctx, 1)
}

// detachedN is detached for a round trip carrying n keys.
func (c *Cache) detachedN(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.batchTimeout(n))
}

// opCtx is a context with a deadline whose timer is armed only when Done is asked for.
// rueidis asks for Done only when it waits for a reply, never for an answer from client-side
// cache memory, so a hot hit costs no timer; a call that does reach Redis gets a real
// context.WithDeadline, armed on first use. It is safe for concurrent use.
type opCtx struct {
	parent   context.Context
	deadline time.Time
	mu       sync.Mutex
	armed    context.Context // nil until Done
	cancel   context.CancelFunc
	released bool
}

// Deadline returns the call's deadline.
func (o *opCtx) Deadline() (time.Time, bool) { return o.deadline, true }

// Done arms the deadline and returns its channel.
func (o *opCtx) Done() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.armed == nil {
		o.armed, o.cancel = context.WithDeadline(o.parent, o.deadline)
		if o.released {
			o.cancel()
		}
	}
	return o.armed.Done()
}

// Err reports the parent's error, or DeadlineExceeded once the deadline has passed.
func (o *opCtx) Err() error {
	o.mu.Lock()
	armed := o.armed
	o.mu.Unlock()
	if armed != nil {
		return armed.Err()
	}
	if err := o.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(o.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value returns the parent's value for key.
func (o *opCtx) Value(key any) any { return o.parent.Value(key) }

// release stops the timer, if one was armed. A nil *opCtx is a no-op.
func (o *opCtx) release() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.released = true
	if o.cancel != nil {
		o.cancel()
	}
	o.mu.Unlock()
}
