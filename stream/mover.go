package stream

import (
	"sync"
	"sync/atomic"
	"time"
)

// mover moves a topic's delayed messages into its stream once they are due (delay.go).
type mover struct {
	*scope
	poll       time.Duration // Delay.PollInterval
	enabled    bool          // not Delay.Disabled, and not a dead-letter handler
	delayedN   atomic.Int64  // scheduled messages of the topic, as the mover last saw (-1 unknown)
	delayState opState
}

func newMover(s *scope, poll time.Duration, enabled bool) *mover {
	return &mover{scope: s, poll: poll, enabled: enabled}
}

// start marks the count of scheduled messages unknown and, when enabled, starts the mover,
// counted in all until it exits. It stops when runCtx ends.
func (h *mover) start(all *sync.WaitGroup) {
	h.delayedN.Store(-1)
	if !h.enabled {
		return
	}
	all.Add(1)
	go func() { defer all.Done(); h.run() }()
}

// fill sets the mover's part of s.
func (h *mover) fill(s *HandlerStats) { s.Scheduled = h.delayedN.Load() }

// run moves h's topic's due scheduled messages into its stream until h stops reading: at
// each due time the last call reported, and at least every Delay.PollInterval. A failing
// call is counted, logged once per change of state, and tried again with backoff (50 ms
// doubling to 5 s), never in a tight loop. Every call has the consumer's I/O deadline.
func (h *mover) run() {
	c := h.c
	poll := h.poll
	dm := newDelayMetrics(c.cfg.Metrics, h.topic, h.partition)
	failures := 0
	for {
		ctx, cancel := c.ioContext(h.runCtx)
		r, err := moveDue(ctx, c.client, h.stream)
		cancel()
		if h.runCtx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			h.m.backgroundError(opDelay)
			h.delayState.fail(h.log, "stream: moving due scheduled messages fails; they wait", err)
			c.report(err)
			if !h.sleep(connBackoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		h.delayState.ok(h.log, "stream: moving due scheduled messages works again")
		dm.moved.Add(int(r.moved))
		dm.waiting.Set(float64(r.left))
		h.delayedN.Store(r.left)
		if r.invalid > 0 || r.missing > 0 {
			dm.invalid.Add(int(r.invalid + r.missing))
			h.log.Warn("stream: undecodable scheduled messages moved to the dead-letter stream, or ids without a message dropped",
				"undecodable", r.invalid, "missing", r.missing)
		}
		wait := poll
		if r.wait >= 0 && r.wait < wait {
			wait = r.wait
		}
		if wait <= 0 && r.moved == 0 {
			wait = time.Millisecond // never spin, whatever the server replies
		}
		if wait > 0 && !h.sleep(wait) {
			return
		}
	}
}
