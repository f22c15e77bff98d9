package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// reader reads new entries (XREADGROUP ... >) for the handler. Credit-based read-ahead: it
// asks for no more entries than the handler has free slots (Concurrency + ReadCount minus
// the entries in hand), so no entry waits long behind busy handlers, and it waits while
// there is no free slot or the consumer is paused.
type reader struct {
	*scope
	d        *dispatcher
	claims   *sync.Mutex     // held by the reread of own pending entries (see newHandlerRT)
	wake     <-chan struct{} // a slot was freed
	caughtUp <-chan struct{} // closed when a takeover's catch-up is done; nil without one

	readState opState
	lastRead  atomic.Int64 // unix ns of the last successful XREADGROUP

	mu         sync.Mutex
	readCancel context.CancelFunc // cancels the read in progress (Pause, setStranded)
}

func newReader(s *scope, d *dispatcher, claims *sync.Mutex, wake, caughtUp <-chan struct{}) *reader {
	return &reader{scope: s, d: d, claims: claims, wake: wake, caughtUp: caughtUp}
}

// start starts the reader, counted in producers until it exits. It stops when runCtx ends.
func (h *reader) start(producers *sync.WaitGroup) {
	producers.Add(1)
	go func() {
		defer producers.Done()
		h.run()
	}()
}

// failing reports whether the reads are failing.
func (h *reader) failing() bool { return h.readState.isFailing() }

// fill sets the reader's part of s; reading is whether the consumer runs, not paused.
func (h *reader) fill(s *HandlerStats, reading bool) {
	ns := h.lastRead.Load()
	s.Reading = reading && !h.readState.isFailing() && ns != 0
	if ns != 0 {
		s.LastRead = time.Unix(0, ns)
	}
}

func (h *reader) run() {
	c := h.c
	if h.caughtUp != nil {
		// A partition just claimed: the retrier first takes over its pending entries.
		select {
		case <-h.caughtUp:
		case <-h.runCtx.Done():
			return
		}
	}
	failures := 0
	// reread: a read failed, timed out or was interrupted, so its reply (entries delivered
	// to this consumer) may be lost; the consumer's own pending entries are read again now
	// and once more after the next successful read (a lost read may still run on the server
	// after the first look, when it comes back from a hang).
	reread, rereadAgain := false, false
	for {
		if !h.waitResumed() {
			return
		}
		if reread {
			done, stop := h.reread(&failures)
			if stop {
				return
			}
			if !done {
				continue
			}
			reread = false
		}
		n := h.d.reserveRead(c.cfg.ReadCount)
		if n == 0 {
			select {
			case <-h.wake:
				continue
			case <-h.runCtx.Done():
				return
			}
		}
		entries, err := h.read(n)
		if err != nil {
			h.d.unreserve(n)
			if h.runCtx.Err() != nil {
				return
			}
			reread, rereadAgain = true, true
			if errors.Is(err, context.Canceled) {
				continue // interrupted by Pause or by stranded entries (setStranded)
			}
			failures++
			if isNoGroup(err) {
				reread, rereadAgain = false, false // the group and its pending entries are gone
				h.recoverGroup()
				if !h.sleep(connBackoff(failures)) {
					return
				}
				continue
			}
			if !h.readFailed(fmt.Errorf("stream: read %q as %s/%s: %w", h.stream, h.group, c.name, err), failures) {
				return
			}
			continue
		}
		failures = 0
		if rereadAgain {
			reread, rereadAgain = true, false
		}
		h.lastRead.Store(time.Now().UnixNano())
		h.readState.ok(h.log, "stream: reads work again")
		for _, e := range entries {
			h.d.dispatch(job{e: e, deliveries: 1})
		}
		h.d.unreserve(n - len(entries))
	}
}

// reread runs rereadOwn once: done when every own pending entry is in hand, stop once the
// reader stops. A failure is counted in *failures and waits its backoff.
func (h *reader) reread(failures *int) (done, stop bool) {
	done, err := h.rereadOwn()
	if err != nil {
		if h.runCtx.Err() != nil {
			return false, true
		}
		*failures++
		err = fmt.Errorf("stream: reread the pending entries of %s in %q for %s: %w", h.c.name, h.stream, h.group, err)
		return false, !h.readFailed(err, *failures)
	}
	if !done {
		select { // no free slot for the rest: wait for one
		case <-h.wake:
		case <-h.runCtx.Done():
			return false, true
		}
		return false, false
	}
	return true, false
}

// readFailed counts, logs (once per change) and reports a failed read, then waits the
// backoff of the failures-th consecutive failure; it reports false once h stops.
func (h *reader) readFailed(err error, failures int) bool {
	h.m.backgroundError(opRead)
	h.readState.fail(h.log, "stream: reads fail", err)
	h.c.report(err)
	return h.sleep(connBackoff(failures))
}

// rereadOwn hands the handler this consumer's own pending entries that it does not hold
// (entries delivered by a read whose reply was lost): XPENDING for this consumer, then
// claim.lua (mode own) of those not in hand, not waiting for a retry and not waiting for a
// dead-letter write. The claim counts a delivery, as every hand-out does, so that the
// delivery count is a fence (see ack.lua): a deferred delivery (DeferAck) still in a
// handler's hands is superseded, not duplicated. It reports false when free slots ran out
// before the end of the list.
func (h *reader) rereadOwn() (bool, error) {
	// An entry the scanner has just claimed for this consumer is in its pending list before
	// it is in hand: without claims this would claim and hand it out a second time.
	h.claims.Lock()
	defer h.claims.Unlock()
	c := h.c
	cl := c.client
	from := "-"
	for {
		ctx, cancel := c.ioContext(h.runCtx)
		pend, err := cl.Do(ctx, cl.B().Xpending().Key(h.stream).Group(h.group).Start(from).End("+").Count(scanPage).Consumer(c.name).Build()).ToArray()
		cancel()
		if err != nil {
			if isNoGroup(err) {
				return true, nil
			}
			return false, err
		}
		var ids []string
		for _, p := range pend {
			f, _ := p.ToArray()
			if len(f) < 4 {
				continue
			}
			id, _ := f[0].ToString()
			from = "(" + id
			ids = append(ids, id)
		}
		var lost []string
		for k, out := range h.d.notInHand(ids) {
			if out {
				lost = append(lost, ids[k])
			}
		}
		if len(lost) > 0 {
			done, err := h.claimLost(lost)
			if err != nil || !done {
				return false, err
			}
		}
		if len(pend) < scanPage {
			return true, nil
		}
	}
}

// claimLost claims (claim.lua, mode own) and dispatches the lost own entries, as far as free
// slots allow; it reports false when slots ran out.
func (h *reader) claimLost(lost []string) (bool, error) {
	c := h.c
	room := h.d.reserve(len(lost))
	used := 0
	if room > 0 {
		ctx, cancel := c.ioContext(h.runCtx)
		res, err := claimScript.Exec(ctx, c.client, []string{h.stream}, append([]string{h.group, c.name, "own"}, lost[:room]...)).ToMessage()
		cancel()
		if err != nil {
			h.d.unreserve(room)
			return false, err
		}
		used = dispatchClaims(h.d, h.m, res, nil)
	}
	h.d.unreserve(room - used)
	if used > 0 {
		h.log.Info("stream: own pending entries read again after a failed read (their delivery reply was lost)", "entries", used)
	}
	return room >= len(lost), nil // else the rest when slots free up
}

// errReadTimeout is a read that outlived BlockTimeout + readSlack (a hung server).
var errReadTimeout = errors.New("no reply within the block timeout")

// read runs one XREADGROUP of at most n entries, interruptible by Close and Pause. Its
// context has no deadline but a timer: rueidis aborts a blocking command on cancellation
// only (a deadline would wait for the socket's own timeout).
func (h *reader) read(n int) ([]entry, error) {
	c := h.c
	ctx, cancel := context.WithCancel(h.runCtx)
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(c.cfg.BlockTimeout+readSlack, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	h.mu.Lock()
	h.readCancel = cancel
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.readCancel = nil
		h.mu.Unlock()
	}()
	if c.isPaused() {
		return nil, context.Canceled
	}
	cl := c.client
	cmd := cl.B().Xreadgroup().Group(h.group, c.name).Count(int64(n)).Block(max(c.cfg.BlockTimeout.Milliseconds(), 1)).
		Streams().Key(h.stream).Id(">").Build()
	entries, err := parseXRead(cl.Do(ctx, cmd), h.stream)
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil && timedOut.Load() {
		return nil, errReadTimeout
	}
	return entries, err
}

// cancelRead interrupts the read in progress, if any.
func (h *reader) cancelRead() {
	h.mu.Lock()
	if h.readCancel != nil {
		h.readCancel()
	}
	h.mu.Unlock()
}

// parseClaimed parses an XCLAIM reply (entries; those deleted from the stream are nil).
func parseClaimed(res []rueidis.RedisMessage) []entry {
	out := make([]entry, 0, len(res))
	for _, x := range res {
		f, err := x.ToArray()
		if err != nil || len(f) != 2 {
			continue
		}
		if e, ok := parseEntry(f[0], f[1]); ok {
			out = append(out, e)
		}
	}
	return out
}

// parseXRead returns the entries of stream in an XREADGROUP reply (RESP2 or RESP3).
func parseXRead(res rueidis.RedisResult, stream string) ([]entry, error) {
	streams, err := res.AsXReadSlices()
	if err != nil {
		return nil, err
	}
	return toEntries(streams[stream]), nil
}

// parseEntries parses an array of [id, [field, value, ...]] entries (XRANGE, XCLAIM).
// Entries whose fields are nil (deleted while pending) are skipped.
func parseEntries(list rueidis.RedisMessage) ([]entry, error) {
	items, err := list.AsXRangeSlices()
	if err != nil {
		return nil, err
	}
	return toEntries(items), nil
}

func toEntries(items []rueidis.XRangeSlice) []entry {
	out := make([]entry, 0, len(items))
	for _, it := range items {
		if it.FieldValues == nil {
			continue
		}
		out = append(out, toEntry(it))
	}
	return out
}

func toEntry(it rueidis.XRangeSlice) entry {
	fields := make([]string, 0, 2*len(it.FieldValues))
	for _, fv := range it.FieldValues {
		fields = append(fields, fv.Field, fv.Value)
	}
	return entry{id: it.ID, fields: fields}
}

// parseEntry parses one [id, [field, value, ...]] pair given as its two elements, as the
// scripts reply them.
func parseEntry(idMsg, fieldsMsg rueidis.RedisMessage) (entry, bool) {
	id, err := idMsg.ToString()
	if err != nil {
		return entry{}, false
	}
	fv, err := fieldsMsg.AsStrSlice()
	if err != nil {
		return entry{}, false
	}
	return entry{id: id, fields: fv}, true
}
