package stream

import (
	"context"
	"fmt"
	"time"
)

// enqueueAck queues id for the batched acknowledger, which releases it once the XACK is
// done. It reports true: the entry is settled.
func (h *handlerRT) enqueueAck(id string) bool {
	h.acks <- id // never blocks: every queued id is held, and cap(acks) > capacity
	return true
}

// acker drains the ack queue into one XACK per batch (the busier, the bigger the batch).
func (h *handlerRT) acker() {
	ids := make([]string, 0, 256)
	for id := range h.acks {
		ids = append(ids[:0], id)
	drain:
		for len(ids) < 4096 {
			select {
			case id, ok := <-h.acks:
				if !ok {
					break drain
				}
				ids = append(ids, id)
			default:
				break drain
			}
		}
		h.flushAcks(ids)
		h.release(ids...)
	}
}

// flushAcks acknowledges ids in one XACK, trying a few times. Entries whose acknowledgement
// fails stay pending and are delivered again later (at-least-once).
func (h *handlerRT) flushAcks(ids []string) {
	if h.fenced.Load() {
		return // a partition lost (owner.go): its new owner handles these again
	}
	var err error
	for try := 1; try <= 3; try++ {
		ctx, cancel := h.c.ioContext(context.Background())
		var n int64
		n, err = h.xack(ctx, ids)
		cancel()
		if err == nil {
			h.m.acked.Add(int(n))
			h.ackState.ok(h.log, "stream: acknowledgements work again")
			return
		}
		if isNoGroup(err) || h.c.pastIODeadline() {
			break
		}
		time.Sleep(connBackoff(try))
	}
	h.m.backgroundError(opAck)
	err = fmt.Errorf("stream: ack %d entries of %q for %s: %w", len(ids), h.stream, h.group, err)
	h.ackState.fail(h.log, "stream: acknowledgements fail; the entries stay pending and are delivered again", err)
	h.c.report(err)
}

// pastIODeadline reports whether Close's deadline for Redis calls has passed.
func (c *Consumer) pastIODeadline() bool {
	ns := c.ioDeadline.Load()
	return ns != 0 && time.Now().UnixNano() >= ns
}

// ackNow acknowledges one entry synchronously (Message.Ack). A ctx without deadline gets
// one of 5 s.
func (h *handlerRT) ackNow(ctx context.Context, id string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ioTimeout)
		defer cancel()
	}
	n, err := h.xack(ctx, []string{id})
	if err != nil {
		return fmt.Errorf("stream: ack %s of %q for %s: %w", id, h.stream, h.group, err)
	}
	h.m.acked.Add(int(n))
	return nil
}

// xack acknowledges ids (XACK), and with DeleteOnAck also deletes them when the stream has
// no other group (ack_delete.lua). It returns how many were acknowledged.
func (h *handlerRT) xack(ctx context.Context, ids []string) (int64, error) {
	cl := h.c.client
	if !h.deleteOnAck {
		return cl.Do(ctx, cl.B().Xack().Key(h.stream).Group(h.group).Id(ids...).Build()).AsInt64()
	}
	res, err := ackDeleteScript.Exec(ctx, cl, []string{h.stream}, append([]string{h.group}, ids...)).AsIntSlice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return 0, err
	}
	h.m.deletedOnAck.Add(int(res[1]))
	if res[2] > 1 {
		if h.multiGroup.CompareAndSwap(false, true) {
			h.log.Warn("stream: DeleteOnAck: the topic has other consumer groups; entries are acknowledged, not deleted", "groups", res[2])
		}
	} else if h.multiGroup.CompareAndSwap(true, false) {
		h.log.Info("stream: DeleteOnAck: the topic has one consumer group again; acknowledged entries are deleted")
	}
	return res[0], nil
}

// connBackoff returns the wait after the n-th consecutive failure: 50 ms doubling to 5 s.
func connBackoff(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
