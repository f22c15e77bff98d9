package stream

import (
	"context"
	"sync"
	"sync/atomic"
)

// dispatcher owns a handler's slots (Concurrency + ReadCount entries in hand at most), the
// set of entries in hand, the per-key lines of an ordered handler (ordered.go) and the
// Concurrency workers. The reader and the retrier reserve slots before they read or claim,
// and turn each reserved slot into an entry in hand (dispatch); the workers, the acker and
// the retrier give entries back (release, toRetry). Every freed slot wakes the reader and the
// scanner.
type dispatcher struct {
	*scope
	concurrency int
	capacity    int  // most entries held at once: Concurrency + ReadCount
	ordered     bool // Handler.OrderedByKey
	process     func(ctx context.Context, j job)
	retries     *retrySet     // consulted: an entry waiting for its retry is still the head of its line
	dl          *deadLetterer // consulted: an entry waiting for its dead-letter write is leased, not in hand

	q workQueue // held entries waiting for a worker: the handler's own, or its share of a Pool

	// mu guards what follows; it is taken before the locks of retries and dl.
	mu         sync.Mutex
	held       map[string]*atomic.Int64 // entries in hand (queued, being handled or dead-lettered) -> fence
	reserved   int                      // handler slots promised to a read or scan in progress
	lines      keyLines                 // ordered: the lines of the keys in hand
	workClosed bool                     // work is closed; nothing more is queued
	ready      []job                    // ordered: heads to start that found work full

	wake     chan<- struct{} // a slot was freed (for the reader)
	wakeScan chan<- struct{} // a slot was freed (for the scanner)

	// stranded is set while the pending-entry scan has claimable entries left that found
	// no free slot (a crashed consumer's backlog): reads then take at most half the free
	// slots and every freed slot triggers the next claim (reclaim.go).
	stranded atomic.Bool
	running  atomic.Int64 // Handle calls in progress
}

func newDispatcher(s *scope, concurrency, capacity int, ordered bool, retries *retrySet, dl *deadLetterer,
	q workQueue, wake, wakeScan chan<- struct{}, process func(ctx context.Context, j job)) *dispatcher {
	return &dispatcher{scope: s, concurrency: concurrency, capacity: capacity, ordered: ordered, process: process,
		retries: retries, dl: dl, q: q, held: map[string]*atomic.Int64{}, lines: newKeyLines(),
		wake: wake, wakeScan: wakeScan}
}

// start starts the workers.
func (h *dispatcher) start() { h.q.start(h.run) }

// stop closes the work queue once the producers have exited: the workers drain it.
func (h *dispatcher) stop() {
	h.mu.Lock()
	h.workClosed = true
	h.q.close()
	h.mu.Unlock()
}

// wait waits until the work queue is closed and drained.
func (h *dispatcher) wait() { h.q.wait() }

// run handles one job of the work queue.
func (h *dispatcher) run(j job) {
	if h.hardCtx.Err() != nil {
		h.release(j.e.id) // cut short by the shutdown: stays pending
		return
	}
	h.process(h.hardCtx, j)
}

// begin counts a Handle call starting and returns the calls running.
func (h *dispatcher) begin() int64 { return h.running.Add(1) }

// end counts a Handle call ending and returns the calls running.
func (h *dispatcher) end() int64 { return h.running.Add(-1) }

// inFlight returns the Handle calls running.
func (h *dispatcher) inFlight() int64 { return h.running.Load() }

// counts returns the entries in hand and those of them parked behind their key.
func (h *dispatcher) counts() (held, parked int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held), h.lines.waiting()
}

// setStranded records whether claimable entries wait for free slots; it reports whether
// that changed.
func (h *dispatcher) setStranded(on bool) bool { return h.stranded.Swap(on) != on }

// isStranded reports what setStranded recorded last.
func (h *dispatcher) isStranded() bool { return h.stranded.Load() }

// minParkLimit is the floor of the most entries an ordered handler holds behind busy keys
// (16 × its capacity, at least this) before its reads and scans pause.
const minParkLimit = 1024

// parkLimit is how many entries may wait behind their key's head before reads and scans
// take no more.
func (h *dispatcher) parkLimit() int { return max(16*h.capacity, minParkLimit) }

// reserve promises up to n free handler slots to a read or scan and returns how many.
// Entries parked behind their key (OrderedByKey) take no slot, but once parkLimit of them
// wait, reads and scans get none.
func (h *dispatcher) reserve(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ordered && h.lines.waiting() >= h.parkLimit() {
		return 0
	}
	return h.reserveLocked(n)
}

// reserveRead is reserve for a read of new entries: while stranded entries wait for slots,
// a read takes at most half the free slots (rounded down), so that claims and new entries
// share the handler slots.
func (h *dispatcher) reserveRead(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ordered && h.lines.waiting() >= h.parkLimit() {
		return 0
	}
	if h.stranded.Load() {
		n = min(n, h.freeLocked()/2)
	}
	return h.reserveLocked(n)
}

// reserveRetry is reserve for own retries, which the park limit does not stop: a parked
// line waits for its head's retry.
func (h *dispatcher) reserveRetry(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reserveLocked(n)
}

func (h *dispatcher) reserveLocked(n int) int {
	n = max(min(n, h.freeLocked()), 0)
	h.reserved += n
	return n
}

// freeLocked returns the slots neither held nor promised; h.mu is held.
func (h *dispatcher) freeLocked() int {
	return h.capacity - (len(h.held) - h.lines.waiting()) - h.reserved
}

// unreserve returns n promised slots.
func (h *dispatcher) unreserve(n int) {
	if n <= 0 {
		return
	}
	h.mu.Lock()
	h.reserved -= n
	h.mu.Unlock()
	h.signal()
}

// dispatch turns one reserved slot into a held entry and queues it for a worker, with the
// fence of its delivery (j.deliveries, the entry's delivery count). An entry already held
// (claimed again while in hand, which a working lease prevents) is not queued twice: the
// delivery in hand takes the new count as its fence, as no other handler got it. The slot is
// used either way.
func (h *dispatcher) dispatch(j job) {
	h.mu.Lock()
	h.reserved--
	f, dup := h.held[j.e.id]
	if dup {
		raiseFence(f, j.deliveries)
	} else if h.dl.raiseFence(j.e.id, j.deliveries) {
		dup = true // its dead-letter write waits for a working dead-letter stream
	}
	run := !dup
	if !dup {
		j.fence = new(atomic.Int64)
		j.fence.Store(j.deliveries)
		h.held[j.e.id] = j.fence
		h.retries.remove(j.e.id)
		if h.ordered {
			run = h.lines.admit(j)
		}
	}
	queued := len(h.held) - int(h.running.Load())
	h.mu.Unlock()
	if dup {
		h.log.Warn("stream: an entry in hand was claimed again (its lease lapsed); not handled twice", "id", j.e.id)
		h.signal()
		return
	}
	h.m.queued.Set(float64(max(queued, 0)))
	if run {
		h.q.put(j) // never blocks: the entries in hand not parked are at most capacity
	} else {
		h.signal() // parked: its slot is free again
	}
}

// raiseFence sets f to n when n is larger.
func raiseFence(f *atomic.Int64, n int64) {
	for {
		old := f.Load()
		if n <= old || f.CompareAndSwap(old, n) {
			return
		}
	}
}

// release drops ids from the held set: they are acknowledged, dead-lettered, waiting for a
// retry or left pending.
func (h *dispatcher) release(ids ...string) {
	h.mu.Lock()
	for _, id := range ids {
		delete(h.held, id)
		if h.ordered {
			h.startNext(id)
		}
	}
	if h.ordered {
		h.flushReady()
	}
	queued := len(h.held) - int(h.running.Load())
	h.mu.Unlock()
	h.m.queued.Set(float64(max(queued, 0)))
	h.signal()
}

// startNext queues the next entry of id's key line for a worker once id has left the
// handler's hands (ordered handlers); h.mu is held. Nothing is queued once work is closed
// (the entry stays pending).
func (h *dispatcher) startNext(id string) {
	if h.retries.has(id) {
		return // still the head: its retry comes back to it
	}
	if next, ok := h.lines.advance(id); ok {
		h.queueLocked(next)
	}
}

// queueLocked hands j to the workers without blocking (h.mu is held, which workers need):
// when work is full (a line moved on without freeing a slot: its head's retry went to
// another consumer), j waits in ready until the next release.
func (h *dispatcher) queueLocked(j job) {
	if h.workClosed {
		return
	}
	if !h.q.tryPut(j) {
		h.ready = append(h.ready, j)
	}
}

// flushReady moves the heads waiting in ready to work as far as it has room; h.mu is held.
func (h *dispatcher) flushReady() {
	for len(h.ready) > 0 && !h.workClosed && h.q.tryPut(h.ready[0]) {
		h.ready = h.ready[1:]
	}
}

// toRetry records an own failed entry as waiting for its retry at e.at and drops it from
// the held set, in one step; an ordered line keeps it as its head.
func (h *dispatcher) toRetry(id string, e retryEntry) {
	h.mu.Lock()
	h.retries.set(id, e)
	delete(h.held, id)
	h.mu.Unlock()
	h.signal()
}

// settleRetries forgets own retries that this consumer will not deliver (no longer
// pending, owned by another consumer, deleted): the lines their keys wait in move on.
func (h *dispatcher) settleRetries(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		h.retries.remove(id)
		if h.ordered {
			if _, held := h.held[id]; !held {
				h.startNext(id)
			}
		}
	}
}

// notInHand reports, for each of ids, that it is neither held, nor waiting for its retry,
// nor waiting for its dead-letter write.
func (h *dispatcher) notInHand(ids []string) []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]bool, len(ids))
	for i, id := range ids {
		_, held := h.held[id]
		out[i] = !held && !h.retries.has(id) && !h.dl.waiting(id)
	}
	return out
}

// heldIDs returns the ids in hand and those waiting for their dead-letter write: the
// entries this consumer leases.
func (h *dispatcher) heldIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	waiting := h.dl.waitingIDs()
	ids := make([]string, 0, len(h.held)+len(waiting))
	for id := range h.held {
		ids = append(ids, id)
	}
	for _, id := range waiting {
		if _, held := h.held[id]; !held {
			ids = append(ids, id)
		}
	}
	return ids
}

func (h *dispatcher) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
	select {
	case h.wakeScan <- struct{}{}:
	default:
	}
}
