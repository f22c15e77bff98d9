package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
)

// heartbeater bounds how far behind Redis client-side cache memory can be.
//
// rueidis keeps the copies of client-side caching per connection, and Redis sends the
// invalidations of a connection's copies on that same connection, in order with its
// replies. So when a read sent on a connection at time t is answered, every invalidation
// Redis sent on it before t has arrived, and rueidis has applied it before the reply
// (one goroutine reads the connection, in order): the connection's copies reflect every
// write Redis completed before t. The heartbeater sends such a read on every connection,
// every interval (keyspace.heartbeat picks keys that reach them all), and records the send
// time of the last round that all of them answered ("heard"). A copy is served only while
// now - heard <= bound (current); otherwise the read goes to Redis. A connection that is up
// and silent (a hung server, a stalled network path) therefore stops being served from
// after at most bound, instead of until rueidis's own write timeout closes it.
//
// The heartbeat reads keys nobody writes, cached for 1ms with a static TTL (two commands a
// key: CLIENT CACHING YES, GET), so that every round reaches Redis; a round answered from
// memory proves nothing and counts as failed. Each round has the deadline bound: an answer
// after it would already be too old to serve anything.
type heartbeater struct {
	client   rueidis.Client
	keys     []string
	interval time.Duration
	bound    time.Duration
	base     time.Time    // heard counts from here (monotonic)
	heard    atomic.Int64 // send time of the last round all connections answered, ns since base
	failures *metrics.Counter
	log      *slog.Logger
	attrs    []any
	// refusing is the state last logged: true once reads are refused, false once they are
	// served again.
	refusing atomic.Bool

	cancel context.CancelFunc
	done   chan struct{}
}

// heartbeatTTL is how long rueidis keeps a heartbeat's reply in memory: less than any
// interval (minHeartbeat), so that the next round reaches Redis.
const heartbeatTTL = time.Millisecond

// maxStopWait bounds how long stop waits for a round in flight to give up.
const maxStopWait = time.Second

// errHeartbeatFromMemory is a round that rueidis answered from memory (not a proof).
var errHeartbeatFromMemory = errors.New("cache: heartbeat answered from memory")

func newHeartbeater(client rueidis.Client, keys []string, interval, bound time.Duration, failures *metrics.Counter, log *slog.Logger, attrs ...any) *heartbeater {
	h := &heartbeater{client: client, keys: keys, interval: interval, bound: bound, base: time.Now(),
		failures: failures, log: log, attrs: attrs, done: make(chan struct{})}
	h.heard.Store(-int64(bound) - 1) // nothing heard yet: nothing is served from memory
	return h
}

// current reports whether a copy in memory may be served now. It is the check of every
// hit from memory: one clock read and one atomic load, no allocation.
func (h *heartbeater) current() bool {
	return time.Since(h.base)-time.Duration(h.heard.Load()) <= h.bound
}

// age returns how long ago the last round all connections answered was sent.
func (h *heartbeater) age() time.Duration {
	return max(0, time.Since(h.base)-time.Duration(h.heard.Load()))
}

// start runs a first round with the deadline first, waiting for it, then a round every
// interval on a goroutine of its own until stop.
func (h *heartbeater) start(first time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.observe(ctx, h.beat(ctx, min(first, h.bound)))
	go h.run(ctx)
}

// stop ends the rounds, and waits (at most maxStopWait) for the one in flight.
func (h *heartbeater) stop() {
	h.cancel()
	t := time.NewTimer(maxStopWait)
	defer t.Stop()
	select {
	case <-h.done:
	case <-t.C:
	}
}

func (h *heartbeater) run(ctx context.Context) {
	defer close(h.done)
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C: // a round longer than interval drops ticks: the next starts at once
		}
		h.observe(ctx, h.beat(ctx, h.bound))
	}
}

// beat sends one round with deadline d and, when every connection answered, records its
// send time.
func (h *heartbeater) beat(ctx context.Context, d time.Duration) (err error) {
	defer func() {
		if r := recover(); r != nil { // a background goroutine must not take the process down
			err = fmt.Errorf("cache: heartbeat panicked: %v", r)
		}
	}()
	sent := time.Now()
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmds := make([]rueidis.CacheableTTL, len(h.keys))
	for i, k := range h.keys {
		cmds[i] = rueidis.CT(h.client.B().Get().Key(k).Cache().ToStaticTTL(), heartbeatTTL)
	}
	for _, r := range h.client.DoMultiCache(bctx, cmds...) {
		// Any reply, an error reply too, came on the connection after all Redis sent before.
		if err := r.NonRedisError(); err != nil {
			return err
		}
		if r.IsCacheHit() {
			return errHeartbeatFromMemory
		}
	}
	h.heard.Store(int64(sent.Sub(h.base)))
	return nil
}

// observe counts a failed round and logs a change of state: one Warn when reads start being
// refused, one Info when they are served from memory again.
func (h *heartbeater) observe(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // stopping
	}
	if err != nil {
		h.failures.Inc()
	}
	if !h.current() {
		if h.refusing.CompareAndSwap(false, true) {
			h.log.Warn("cache: the client-side cache's connections have not answered a heartbeat within max-staleness; reads are not answered from memory until they do",
				append(append([]any(nil), h.attrs...), "max-staleness", h.bound, "heard-ago", h.age().Round(time.Millisecond), "err", err)...)
		}
		return
	}
	if h.refusing.CompareAndSwap(true, false) {
		h.log.Info("cache: the client-side cache's connections answer heartbeats again; reads are answered from memory",
			h.attrs...)
	}
}
