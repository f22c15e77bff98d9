package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream/internal/streamwire"
)

// acker acknowledges the entries handled: a queue drained into one fenced acknowledgement
// per batch (ack.lua), and the synchronous acknowledgements of Message.Ack. A delivery is
// acknowledged only while it is current (ack.lua): the acknowledgement of a delivery taken
// over or delivered again since is refused and counted.
type acker struct {
	*scope
	acks        chan ackItem        // deliveries to acknowledge (batched)
	release     func(ids ...string) // gives acknowledged entries back to the dispatcher
	deleteOnAck bool                // Handler.DeleteOnAck
	capacity    int                 // the most entries the handler holds
	multiGroup  atomic.Bool         // DeleteOnAck found other groups (logged once per change)
	fenced      atomic.Bool         // its partition lease is lost: acknowledge nothing more
	ackState    opState
}

// ackItem is one delivery to acknowledge: its entry and the fence of the delivery.
type ackItem struct {
	id    string
	fence *atomic.Int64
}

// newAcker returns an acker for a handler of capacity slots; release gives the entries
// back once their acknowledgement is done.
func newAcker(s *scope, capacity int, deleteOnAck bool, release func(ids ...string)) *acker {
	return &acker{scope: s, acks: make(chan ackItem, capacity+64), release: release, deleteOnAck: deleteOnAck, capacity: capacity}
}

// enqueue queues the delivery of id with fence for the batched acknowledger, which releases
// it once the acknowledgement is done. It reports true: the entry is settled.
func (h *acker) enqueue(id string, fence *atomic.Int64) bool {
	h.acks <- ackItem{id: id, fence: fence} // never blocks: every queued id is held, and cap(acks) > capacity
	return true
}

// start starts the acknowledger, counted in all until it exits; it closes quit then.
func (h *acker) start(all *sync.WaitGroup, quit chan<- struct{}) {
	all.Add(1)
	go func() {
		defer all.Done()
		h.run()
		close(quit)
	}()
}

// stop closes the queue once the workers have exited: run drains it and returns.
func (h *acker) stop() { close(h.acks) }

// fence stops the acknowledgements: a partition lost (owner.go), whose new owner handles
// these entries again.
func (h *acker) fence() { h.fenced.Store(true) }

// isFenced reports whether fence was called.
func (h *acker) isFenced() bool { return h.fenced.Load() }

// run drains the ack queue into one acknowledgement per batch (the busier, the bigger the
// batch).
func (h *acker) run() {
	items := make([]ackItem, 0, 256)
	ids := make([]string, 0, 256)
	for it := range h.acks {
		items = append(items[:0], it)
	drain:
		for len(items) < 4096 {
			select {
			case it, ok := <-h.acks:
				if !ok {
					break drain
				}
				items = append(items, it)
			default:
				break drain
			}
		}
		h.flushAcks(items)
		ids = ids[:0]
		for _, it := range items {
			ids = append(ids, it.id)
		}
		h.release(ids...)
	}
}

// flushAcks acknowledges items in one ack.lua call, trying a few times. Entries whose
// acknowledgement fails stay pending and are delivered again later (at-least-once). Stale
// deliveries are refused and counted; so are those no longer pending at the first try
// (completed by the delivery that superseded them), not at a later one (which may follow a
// try whose reply was lost).
func (h *acker) flushAcks(items []ackItem) {
	if h.fenced.Load() {
		return // a partition lost (owner.go): its new owner handles these again
	}
	var err error
	for try := 1; try <= 3; try++ {
		ctx, cancel := h.c.ioContext(context.Background())
		var r ackReply
		r, err = h.xack(ctx, items)
		cancel()
		if err == nil {
			h.m.acked.Add(int(r.acked))
			h.refusedStale(opAck, r.stale...)
			if try == 1 {
				h.refusedStale(opAck, r.gone...)
			}
			h.ackState.ok(h.log, "stream: acknowledgements work again")
			return
		}
		if isNoGroup(err) || h.c.pastIODeadline() {
			break
		}
		time.Sleep(connBackoff(try))
	}
	h.m.backgroundError(opAck)
	err = fmt.Errorf("stream: ack %d entries of %q for %s: %w", len(items), h.stream, h.group, err)
	h.ackState.fail(h.log, "stream: acknowledgements fail; the entries stay pending and are delivered again", err)
	h.c.report(err)
}

// pastIODeadline reports whether Close's deadline for Redis calls has passed.
func (c *Consumer) pastIODeadline() bool {
	ns := c.ioDeadline.Load()
	return ns != 0 && time.Now().UnixNano() >= ns
}

// ackNow acknowledges one delivery synchronously (Message.Ack). A ctx without deadline gets
// one of 5 s. A stale delivery, or one no longer pending, is refused: the error wraps
// ErrStaleDelivery.
func (h *acker) ackNow(ctx context.Context, id string, fence int64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ioTimeout)
		defer cancel()
	}
	f := new(atomic.Int64)
	f.Store(fence)
	r, err := h.xack(ctx, []ackItem{{id: id, fence: f}})
	if err != nil {
		return fmt.Errorf("stream: ack %s of %q for %s: %w", id, h.stream, h.group, err)
	}
	h.m.acked.Add(int(r.acked))
	if r.acked == 0 {
		h.refusedStale(opAck, id)
		return fmt.Errorf("stream: ack %s of %q for %s (delivery %d): %w", id, h.stream, h.group, fence, ErrStaleDelivery)
	}
	return nil
}

// ackReply is the outcome of one ack.lua call.
type ackReply struct {
	acked       int64
	stale, gone []string // refused: owned by another consumer or delivered again; not pending
}

// xack acknowledges the current deliveries of items (ack.lua), and with DeleteOnAck also
// deletes them when the stream has no other group.
func (h *acker) xack(ctx context.Context, items []ackItem) (ackReply, error) {
	args := make([]string, 0, 6+2*len(items))
	del := "0"
	if h.deleteOnAck {
		del = "1"
	}
	lo, hi := items[0].id, items[0].id
	for _, it := range items[1:] {
		if streamwire.CompareIDs(it.id, lo) < 0 {
			lo = it.id
		}
		if streamwire.CompareIDs(it.id, hi) > 0 {
			hi = it.id
		}
	}
	// the range holds the batch and at most the other entries this consumer holds
	args = append(args, h.group, h.c.name, del, lo, hi, strconv.Itoa(len(items)+h.capacity+64))
	for _, it := range items {
		args = append(args, it.id, strconv.FormatInt(it.fence.Load(), 10))
	}
	res, err := ackScript.Exec(ctx, h.c.client, []string{h.stream}, args).ToArray()
	if err == nil && len(res) != 5 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return ackReply{}, err
	}
	var r ackReply
	r.acked, _ = res[0].AsInt64()
	deleted, _ := res[1].AsInt64()
	groups, _ := res[2].AsInt64()
	r.stale, _ = res[3].AsStrSlice()
	r.gone, _ = res[4].AsStrSlice()
	if h.deleteOnAck && r.acked > 0 {
		h.noteGroups(deleted, groups)
	}
	return r, nil
}

// noteGroups counts the entries DeleteOnAck deleted and logs once per change whether the
// topic has other groups (then entries are acknowledged, not deleted).
func (h *acker) noteGroups(deleted, groups int64) {
	h.m.deletedOnAck.Add(int(deleted))
	if groups > 1 {
		if h.multiGroup.CompareAndSwap(false, true) {
			h.log.Warn("stream: DeleteOnAck: the topic has other consumer groups; entries are acknowledged, not deleted", "groups", groups)
		}
	} else if h.multiGroup.CompareAndSwap(true, false) {
		h.log.Info("stream: DeleteOnAck: the topic has one consumer group again; acknowledged entries are deleted")
	}
}

// connBackoff returns the wait after the n-th consecutive failure: 50 ms doubling to 5 s.
func connBackoff(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
