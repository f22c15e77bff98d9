package stream

import (
	"context"
	"time"
)

// deadLetter moves entry id to the dead-letter stream with reason as dl_error
// (moveToDeadLetter: XADD and XACK in one script) and reports whether this call moved it.
// minIdle and owner are the script's guards (see deadLetterMove). When persistent, a write
// that fails (Redis unreachable) is tried again with the same reason, with backoff, until it
// succeeds or the shutdown cuts it short; the entry stays in hand, and leased, meanwhile, so
// the dead letter records the failure that caused it rather than a later scan's "not
// acknowledged".
func (h *handlerRT) deadLetter(id, reason string, minIdle int64, owner string, persistent bool) bool {
	c := h.c
	for try := 1; ; try++ {
		ctx, cancel := c.ioContext(context.Background())
		res, err := moveToDeadLetter(ctx, c.client, deadLetterMove{
			Stream: h.stream, DLQ: h.dlq, Group: h.group, ID: id, Reason: reason,
			MaxLen: c.cfg.DeadLetter.MaxLen, MaxAgeMs: c.cfg.DeadLetter.MaxAge.Milliseconds(),
			MinIdleMs: minIdle, Owner: owner,
		})
		cancel()
		if err == nil {
			h.dlqState.ok(h.log, "stream: dead-letter writes work again")
			h.m.dlqTrimmed.Add(int(res.Trimmed))
			switch res.Status {
			case 1:
				h.m.deadLettered.Inc()
				h.m.acked.Inc()
				return true
			case -1:
				h.trimmedWhilePending([]string{id})
			}
			return false
		}
		h.m.backgroundError(opDeadLetter)
		h.dlqState.fail(h.log, "stream: dead-letter writes fail; retrying with the same reason", err, "id", id)
		c.report(err)
		if isNoGroup(err) {
			h.recoverGroup()
		}
		if !persistent || h.hardCtx.Err() != nil || c.pastIODeadline() {
			return false
		}
		t := time.NewTimer(connBackoff(try))
		select {
		case <-t.C:
		case <-h.hardCtx.Done():
			t.Stop()
			return false
		}
	}
}

func (h *handlerRT) trimmedWhilePending(ids []string) {
	if len(ids) == 0 {
		return
	}
	h.m.trimmedPending.Add(len(ids))
	if f := h.c.cfg.OnTrimmedWhilePending; f != nil {
		f(h.topic, h.group, ids)
	}
}
