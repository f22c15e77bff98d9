package stream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// deadLetterer moves a handler's failed entries to the dead-letter stream: one attempt
// from the worker, and, when the write fails, more from the scanner's goroutine with
// backoff while the entry waits, leased and pending, without a handler slot. Its writes
// and the admin API's (DeadLetters.Move) go through one function, moveToDeadLetter.
type deadLetterer struct {
	*scope
	scanNow  chan<- struct{} // an attempt is due earlier than the scanner's next wake-up
	dlqState opState

	mu    sync.Mutex
	waits dlWaitSet

	logs logGate // the Warn records of dead letters (failurelog.go)
}

func newDeadLetterer(s *scope, scanNow chan<- struct{}) *deadLetterer {
	return &deadLetterer{scope: s, scanNow: scanNow}
}

// waiting reports whether id waits for its dead-letter write.
func (h *deadLetterer) waiting(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waits.has(id)
}

// raiseFence reports whether id waits for its dead-letter write and, if so, raises the
// fence of its delivery to n (claimed again by this consumer while it waited; see
// dispatcher.dispatch).
func (h *deadLetterer) raiseFence(id string, n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waits.m[id]
	if w != nil {
		raiseFence(w.fence, n)
	}
	return w != nil
}

// waitingIDs returns the entries waiting for their dead-letter write.
func (h *deadLetterer) waitingIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.waits.m))
	for id := range h.waits.m {
		ids = append(ids, id)
	}
	return ids
}

// failing reports whether dead-letter writes are failing, and how many entries wait.
func (h *deadLetterer) failing() (int, bool) {
	if !h.dlqState.isFailing() {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waits.m), true
}

// waitingDL is an entry whose dead-letter write failed: it left its handler slot and stays
// pending, leased, until the scanner's next attempt (deadLettersDue) moves it.
type waitingDL struct {
	reason   string
	fence    *atomic.Int64             // the fence of its delivery (dispatcher.dispatch)
	notify   func(ctx context.Context) // OnFailure, once moved; nil when there is none
	at       time.Time                 // the next attempt
	failures int                       // consecutive failed attempts
}

// maxDLWaiting is the most entries one handler keeps waiting for their dead-letter write.
// Beyond it an entry whose write failed is left pending without a lease, so that a long
// outage of the dead-letter stream does not grow memory without bound: the pending-entry
// scan delivers it again after MinIdle, and that delivery dead-letters it.
const maxDLWaiting = 4096

// dlWaitSet is the entries whose dead-letter write failed (scanner goroutine and workers,
// under deadLetterer.mu), with the time of the earliest next attempt, so that the scanner's
// look at it costs nothing while no attempt is due.
type dlWaitSet struct {
	m    map[string]*waitingDL
	next time.Time // earliest w.at; zero when m is empty
}

func (s *dlWaitSet) has(id string) bool { _, ok := s.m[id]; return ok }

// add records w for id; it reports false when the set is full.
func (s *dlWaitSet) add(id string, w *waitingDL) bool {
	if len(s.m) >= maxDLWaiting {
		return false
	}
	if s.m == nil {
		s.m = map[string]*waitingDL{}
	}
	s.m[id] = w
	if s.next.IsZero() || w.at.Before(s.next) {
		s.next = w.at
	}
	return true
}

// resetNext recomputes next after attempts moved or postponed entries.
func (s *dlWaitSet) resetNext() {
	s.next = time.Time{}
	for _, w := range s.m {
		if s.next.IsZero() || w.at.Before(s.next) {
			s.next = w.at
		}
	}
}

// deadLetterOrWait moves entry id, delivered with the fence fence, to the dead-letter stream
// (one attempt) and, when the move succeeded, calls notify. When the write fails the entry
// waits in h.waits for the scanner to try again with backoff: the caller's handler slot is
// free for other entries (a full or unwritable dead-letter stream does not stop the topic)
// and the reason is kept. A stale delivery (the entry taken over or delivered again, see
// ack.lua) is refused and counted; notify is not called.
func (h *deadLetterer) deadLetterOrWait(ctx context.Context, id string, fence *atomic.Int64, reason string, notify func(ctx context.Context)) {
	status, failed := h.tryDeadLetter(id, fence.Load(), reason)
	if status == 1 && notify != nil {
		notify(ctx)
	}
	if !failed {
		if status == 0 || status == 3 {
			h.refusedStale(opDeadLetter, id) // not pending: completed by the delivery that superseded it
		}
		return
	}
	h.mu.Lock()
	kept := h.waits.add(id, &waitingDL{reason: reason, fence: fence, notify: notify, at: time.Now().Add(connBackoff(1)), failures: 1})
	n := len(h.waits.m)
	h.mu.Unlock()
	h.m.dlWaiting.Set(float64(n))
	if !kept {
		return // stays pending: delivered again after MinIdle (maxDLWaiting)
	}
	select {
	case h.scanNow <- struct{}{}:
	default:
	}
}

// tryDeadLetter makes one attempt to move id with reason, guarded by this consumer's
// ownership and the delivery's fence (deadLetter).
func (h *deadLetterer) tryDeadLetter(id string, fence int64, reason string) (status int64, failed bool) {
	return h.deadLetter(id, reason, 0, h.c.name, fence)
}

// deadLetter makes one attempt to move entry id to the dead-letter stream with reason as
// dl_error (moveToDeadLetter: XADD and XACK in one script); minIdle, owner and deliveries
// are the script's guards (see deadLetterMove). It returns the script's status (1 when this
// call moved it, 3 when the entry is owned by another consumer or was delivered again, see
// deadLetterResult) and whether the write failed (Redis unreachable or the dead-letter stream
// unwritable: the entry is still pending).
func (h *deadLetterer) deadLetter(id, reason string, minIdle int64, owner string, deliveries int64) (status int64, failed bool) {
	c := h.c
	ctx, cancel := c.ioContext(context.Background())
	res, err := moveToDeadLetter(ctx, c.client, deadLetterMove{
		Stream: h.stream, DLQ: h.dlq, Group: h.group, ID: id, Reason: reason,
		MaxLen: c.cfg.DeadLetter.MaxLen, MaxAgeMs: c.cfg.DeadLetter.MaxAge.Milliseconds(),
		MinIdleMs: minIdle, Owner: owner, Deliveries: deliveries,
	})
	cancel()
	if err != nil {
		h.m.backgroundError(opDeadLetter)
		h.dlqState.fail(h.log, "stream: dead-letter writes fail; the entries stay pending and are moved with their reason when writes work again", err, "id", id)
		c.report(fmt.Errorf("stream: dead-letter %s of %q for %s: %w", id, h.stream, h.group, err))
		if isNoGroup(err) {
			h.recoverGroup()
		}
		return 0, true
	}
	h.dlqState.ok(h.log, "stream: dead-letter writes work again")
	h.m.dlqTrimmed.Add(int(res.Trimmed))
	switch res.Status {
	case 1:
		h.m.deadLettered.Inc()
		h.m.hist[histDead].Add(1)
		h.m.acked.Inc()
		h.logDeadLettered(id, reason)
	case -1:
		h.trimmedWhilePending([]string{id})
	}
	return res.Status, false
}

// due tries again the dead-letter moves that are due (scanner goroutine). The
// first failure postpones every due entry with the same backoff, so that an unwritable
// dead-letter stream costs one call per attempt, not one per entry.
func (h *deadLetterer) due(now time.Time) {
	h.mu.Lock()
	if h.waits.next.IsZero() || h.waits.next.After(now) {
		h.mu.Unlock()
		return
	}
	var due []string
	for id, w := range h.waits.m {
		if !w.at.After(now) {
			due = append(due, id)
		}
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.waits.resetNext()
		n := len(h.waits.m)
		h.mu.Unlock()
		h.m.dlWaiting.Set(float64(n))
	}()
	for k, id := range due {
		if h.hardCtx.Err() != nil {
			return
		}
		h.mu.Lock()
		w := h.waits.m[id]
		h.mu.Unlock()
		if w == nil {
			continue
		}
		status, failed := h.tryDeadLetter(id, w.fence.Load(), w.reason)
		if failed {
			h.mu.Lock()
			for _, id := range due[k:] {
				if w := h.waits.m[id]; w != nil {
					w.failures++
					w.at = time.Now().Add(connBackoff(w.failures))
				}
			}
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		delete(h.waits.m, id)
		h.mu.Unlock()
		if status == 3 {
			h.refusedStale(opDeadLetter, id) // taken over while it waited (its lease lapsed)
		}
		if status == 1 && w.notify != nil {
			h.notifyFailure(id, w.notify)
		}
	}
}

// next returns when the earliest waiting dead-letter move is due.
func (h *deadLetterer) next() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waits.next, !h.waits.next.IsZero()
}

// notifyFailure calls a waiting entry's OnFailure once it was moved, recovering a panic.
func (h *deadLetterer) notifyFailure(id string, notify func(ctx context.Context)) {
	defer func() {
		if r := recover(); r != nil {
			h.c.report(fmt.Errorf("stream: OnFailure of %s/%s panicked on %s: %v", h.topic, h.group, id, r))
		}
	}()
	notify(h.hardCtx)
}

// logDeadLettered logs the move of entry id to the dead-letter stream (Warn, gated).
func (h *deadLetterer) logDeadLettered(id, reason string) {
	ok, suppressed := h.logs.admit(time.Now())
	if !ok {
		return
	}
	args := []any{"id", id, "dead_letter_stream", h.dlq, "reason", firstLine(reason)}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	h.log.Warn("stream: entry dead-lettered", args...)
}
