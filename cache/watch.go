package cache

import (
	"context"

	"github.com/redis/rueidis"
)

// maxWatchers bounds the dedicated connections one Cache holds for waiting callers at a
// time; past it, waiters only poll.
const maxWatchers = 16

// watcher lets a caller waiting for another process's load wake when the key changes,
// instead of only every Breakdown.WaitInterval: it reads the key on a dedicated connection
// with client tracking on, so Redis pushes an invalidation when the owner writes the value
// (or releases the lock). It is used when client-side caching is on, which says the server
// supports tracking; if tracking cannot be turned on, the caller just polls.
type watcher struct {
	c    *Cache
	dc   rueidis.DedicatedClient
	done func()
	dk   string
	wake chan struct{}
}

// watch returns a watcher on dk and the key's state read with tracking on, or a nil watcher
// when none is available (too many, or the server refused tracking).
func (c *Cache) watch(ctx context.Context, dk string) (*watcher, string, kind, error) {
	select {
	case c.watchSlots <- struct{}{}:
	default:
		return nil, "", kindMiss, nil
	}
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		<-c.watchSlots
		return nil, "", kindMiss, gerr
	}
	rctx, op := c.callCtx(ctx)
	defer op.release()
	// rueidis's Dedicate dials (and shakes hands) with no context, waiting out its dial
	// timeout on a hung server: it runs aside, bounded by the call's deadline; a connection
	// that arrives too late is closed as soon as it does.
	type dedicated struct {
		dc   rueidis.DedicatedClient
		done func()
	}
	got := make(chan dedicated, 1)
	go func() {
		dc, done := c.client.Dedicate()
		got <- dedicated{dc, done}
	}()
	var d dedicated
	select {
	case d = <-got:
	case <-rctx.Done():
		go func() { // the slot stays taken until then: a hung server gets no more dials
			d := <-got
			d.dc.Close()
			d.done()
			<-c.watchSlots
		}()
		return nil, "", kindMiss, c.outcome(ctx, tk, rctx.Err())
	}
	w := &watcher{c: c, dc: d.dc, done: d.done, dk: dk, wake: make(chan struct{}, 1)}
	d.dc.SetOnInvalidations(func([]rueidis.RedisMessage) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	})
	// One pipeline, so that on a cluster both go to the node holding the key (the GET picks
	// it) and tracking is on before the read that arms it.
	res := d.dc.DoMulti(rctx, d.dc.B().ClientTracking().On().Build(), d.dc.B().Get().Key(dk).Build())
	if err := res[0].Error(); err != nil {
		w.close()
		if _, ok := rueidis.IsRedisErr(err); ok {
			c.outcome(ctx, tk, nil)
			return nil, "", kindMiss, nil // tracking refused: poll instead
		}
		return nil, "", kindMiss, c.outcome(ctx, tk, err)
	}
	s, k, err := parseGet(res[1])
	if err = c.outcome(ctx, tk, err); err != nil {
		w.close()
		return nil, "", kindMiss, err
	}
	return w, s, k, nil
}

// read reads the key on the tracked connection, which also (re)arms its invalidation.
func (w *watcher) read(ctx context.Context) (string, kind, error) {
	return parseGet(w.dc.Do(ctx, w.dc.B().Get().Key(w.dk).Build()))
}

// parseGet classifies the reply of a GET.
func parseGet(resp rueidis.RedisResult) (string, kind, error) {
	s, err := resp.ToString()
	if rueidis.IsRedisNil(err) {
		return "", kindMiss, nil
	}
	if err != nil {
		return "", kindMiss, err
	}
	return s, classify(s), nil
}

// close closes the connection and then returns the slot, aside: the caller does not wait.
// The connection is not given back to rueidis's pool: putting back a connection with
// tracking on makes rueidis send CLIENT TRACKING OFF (and clean its subscriptions) with no
// deadline, which blocks for as long as a hung server does; and closing takes rueidis about
// a second on a hung server. A wait is the slow path already; a new dial is cheap.
func (w *watcher) close() {
	go func() {
		w.dc.Close()
		w.done()
		<-w.c.watchSlots
	}()
}
