package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// handlerRT is a registered handler at run time, with its body type erased. Its goroutines:
// reader (reader.go), scanner and lease keeper (reclaim.go), Concurrency workers and the
// acknowledger (this file, ack.go).
type handlerRT struct {
	c            *Consumer
	topic, group string
	partition    int         // the partition of a partitioned topic read; -1 for an unpartitioned one
	takeover     bool        // a partition just claimed (OwnPartitions): catch up first (owner.go)
	fenced       atomic.Bool // its partition lease is lost: acknowledge nothing more
	stream, dlq  string
	concurrency  int
	capacity     int // most entries held at once: Concurrency + ReadCount
	policy       DeliveryRetryPolicy
	maxd         int
	noRetry      bool
	timeout      time.Duration
	startID      string
	log          *slog.Logger
	m            *handlerMetrics
	process      func(ctx context.Context, j job)
	expired      func(ctx context.Context, e entry, deliveries, minIdle int64)

	work chan job    // held entries waiting for a worker
	acks chan string // ids to acknowledge (batched)

	mu         sync.Mutex
	held       map[string]struct{} // entries in hand: queued, being handled or dead-lettered
	reserved   int                 // handler slots promised to a read or scan in progress
	retries    retryQueue          // own failed entries waiting for their backoff
	readCancel context.CancelFunc  // cancels the read in progress (Pause)

	deadLetters bool        // a dead-letter handler (RegisterDeadLetters)
	deleteOnAck bool        // Handler.DeleteOnAck
	multiGroup  atomic.Bool // DeleteOnAck found other groups (logged once per change)

	ordered    bool                // Handler.OrderedByKey
	lines      map[string]*keyLine // ordered: the lines of the keys in hand (ordered.go)
	lineOf     map[string]string   // ordered: entry id -> key, for the entries in a line
	parked     int                 // ordered: entries waiting behind their key's head
	workClosed bool                // ordered: work is closed; advance queues nothing more
	ready      []job               // ordered: heads to start that found work full

	wake     chan struct{} // a slot was freed (for the reader)
	wakeScan chan struct{} // a slot was freed (for the scanner)
	scanNow  chan struct{} // a retry was scheduled earlier than the next scan

	running   atomic.Int64 // Handle calls in progress
	lastRead  atomic.Int64 // unix ns of the last successful XREADGROUP
	pendingN  atomic.Int64 // the group's pending entries, as last seen
	lagN      atomic.Int64 // the group's lag, as last seen (-1 unknown)
	lagExact  atomic.Bool  // lagN is XINFO's lag (not the capped count)
	dlqN      atomic.Int64 // dead letters, as last seen
	delayedN  atomic.Int64 // scheduled messages of the topic, as the mover last saw (-1 unknown)
	gaugesAt  atomic.Int64 // unix ns of the last gauge refresh
	reapAt    time.Time    // last removal of idle consumers (scanner goroutine only)
	producers sync.WaitGroup
	workers   sync.WaitGroup
	quit      chan struct{} // closed when the workers and the acknowledger have exited
	stopped   chan struct{} // closed when every goroutine of the handler has exited

	// runCtx ends when the handler stops reading (Close, Unregister); hardCtx, the
	// handlers' parent, when its drain ends. Children of the consumer's.
	runCtx, hardCtx     context.Context
	runCancel, hardStop context.CancelFunc

	readState, ackState, scanState, retryState, leaseState, dlqState, gaugeState, houseState opState
	delayState                                                                               opState
}

// job is one delivery to handle.
type job struct {
	e          entry
	deliveries int64
}

// retryEntry is an own failed entry waiting for its backoff.
type retryEntry struct {
	at         time.Time     // when the backoff ends
	deliveries int64         // deliveries so far
	backoff    time.Duration // the backoff drawn at the failure
}

// start starts h's goroutines; c.mu is held.
func (h *handlerRT) start() {
	c := h.c
	h.stopped = make(chan struct{})
	h.lagN.Store(-1)
	h.delayedN.Store(-1)
	h.work = make(chan job, h.capacity)
	h.acks = make(chan string, h.capacity+64)
	h.quit = make(chan struct{})
	h.producers.Add(2)
	go h.reader()
	go h.scanner()
	h.workers.Add(h.concurrency)
	for i := 0; i < h.concurrency; i++ {
		go h.worker()
	}
	c.workers.Add(1)
	go func() { h.workers.Wait(); c.workers.Done() }()
	var all sync.WaitGroup
	all.Add(4)
	if !c.cfg.Delay.Disabled && !h.deadLetters {
		all.Add(1)
		go func() { defer all.Done(); h.mover() }()
	}
	c.wg.Add(1)
	go func() {
		defer all.Done()
		h.producers.Wait()
		h.mu.Lock()
		h.workClosed = true
		close(h.work)
		h.mu.Unlock()
	}()
	go func() { defer all.Done(); h.workers.Wait(); close(h.acks) }()
	go func() { defer all.Done(); h.acker(); close(h.quit) }()
	go func() { defer all.Done(); h.leaseKeeper() }()
	go func() { defer c.wg.Done(); all.Wait(); close(h.stopped) }()
}

// initContexts derives h's contexts from the consumer's (Register, once h is accepted).
func (h *handlerRT) initContexts() {
	h.runCtx, h.runCancel = context.WithCancel(h.c.runCtx)
	h.hardCtx, h.hardStop = context.WithCancel(h.c.hardCtx)
}

// waitResumed waits while the consumer is paused; it reports false once h stops.
func (h *handlerRT) waitResumed() bool {
	if ch := h.c.pausedChan(); ch != nil {
		select {
		case <-ch:
		case <-h.runCtx.Done():
		}
	}
	return h.runCtx.Err() == nil
}

// sleep waits d or until h stops; it reports whether h is still running.
func (h *handlerRT) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.runCtx.Done():
		return false
	}
}

// ensureGroup creates the group at startID with MKSTREAM; an existing group is fine.
func (h *handlerRT) ensureGroup(ctx context.Context, startID string) error {
	cl := h.c.client
	err := cl.Do(ctx, cl.B().XgroupCreate().Key(h.stream).Group(h.group).Id(startID).Mkstream().Build()).Error()
	if err != nil && !rueidis.IsRedisBusyGroup(err) {
		return fmt.Errorf("stream: create group %q on %q: %w", h.group, h.stream, err)
	}
	return nil
}

func isNoGroup(err error) bool {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return strings.Contains(re.Error(), "NOGROUP")
	}
	return strings.Contains(fmt.Sprint(err), "NOGROUP")
}

// recoverGroup recreates a lost group (after a Redis restart) at "0".
func (h *handlerRT) recoverGroup() {
	ctx, cancel := h.c.ioContext(h.hardCtx)
	defer cancel()
	if err := h.ensureGroup(ctx, "0"); err != nil {
		h.m.backgroundError(opGroup)
		h.c.report(err)
		return
	}
	h.log.Warn("stream: consumer group recreated (lost with a Redis restart?)")
}

// reserve promises up to n free handler slots to a read or scan and returns how many.
// Entries parked behind their key (OrderedByKey) take no slot, but once parkLimit of them
// wait, reads and scans get none.
func (h *handlerRT) reserve(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ordered && h.parked >= h.parkLimit() {
		return 0
	}
	return h.reserveLocked(n)
}

// reserveRetry is reserve for own retries, which the park limit does not stop: a parked
// line waits for its head's retry.
func (h *handlerRT) reserveRetry(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reserveLocked(n)
}

func (h *handlerRT) reserveLocked(n int) int {
	free := h.capacity - (len(h.held) - h.parked) - h.reserved
	n = max(min(n, free), 0)
	h.reserved += n
	return n
}

// unreserve returns n promised slots.
func (h *handlerRT) unreserve(n int) {
	if n <= 0 {
		return
	}
	h.mu.Lock()
	h.reserved -= n
	h.mu.Unlock()
	h.signal()
}

// dispatch turns one reserved slot into a held entry and queues it for a worker. An entry
// already held (claimed again while in hand, which a working lease prevents) is not queued
// twice. The slot is used either way.
func (h *handlerRT) dispatch(j job) {
	h.mu.Lock()
	h.reserved--
	_, dup := h.held[j.e.id]
	run := !dup
	if !dup {
		h.held[j.e.id] = struct{}{}
		h.retries.remove(j.e.id)
		if h.ordered {
			run = h.admit(j)
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
		h.work <- j // never blocks: the entries in hand not parked are at most capacity = cap(work)
	} else {
		h.signal() // parked: its slot is free again
	}
}

// release drops ids from the held set: they are acknowledged, dead-lettered, waiting for a
// retry or left pending.
func (h *handlerRT) release(ids ...string) {
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
func (h *handlerRT) startNext(id string) {
	if _, retrying := h.retries.get(id); retrying {
		return // still the head: its retry comes back to it
	}
	if next, ok := h.advance(id); ok {
		h.queueLocked(next)
	}
}

// queueLocked hands j to the workers without blocking (h.mu is held, which workers need):
// when work is full (a line moved on without freeing a slot: its head's retry went to
// another consumer), j waits in ready until the next release.
func (h *handlerRT) queueLocked(j job) {
	if h.workClosed {
		return
	}
	select {
	case h.work <- j:
	default:
		h.ready = append(h.ready, j)
	}
}

// flushReady moves the heads waiting in ready to work as far as it has room; h.mu is held.
func (h *handlerRT) flushReady() {
	for len(h.ready) > 0 && !h.workClosed {
		select {
		case h.work <- h.ready[0]:
			h.ready = h.ready[1:]
		default:
			return
		}
	}
}

// settleRetry forgets an own retry that this consumer will not deliver (no longer pending,
// owned by another consumer, deleted): the line its key waits in moves on. h.mu is held.
func (h *handlerRT) settleRetry(id string) {
	h.retries.remove(id)
	if h.ordered {
		if _, held := h.held[id]; !held {
			h.startNext(id)
		}
	}
}

// heldIDs returns the ids in hand.
func (h *handlerRT) heldIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.held))
	for id := range h.held {
		ids = append(ids, id)
	}
	return ids
}

func (h *handlerRT) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
	select {
	case h.wakeScan <- struct{}{}:
	default:
	}
}

// scheduleRetry records an own failed entry: the scanner delivers it again after backoff.
func (h *handlerRT) scheduleRetry(id string, deliveries int64, backoff time.Duration) {
	at := time.Now().Add(backoff)
	h.mu.Lock()
	h.retries.set(id, retryEntry{at: at, deliveries: deliveries, backoff: backoff})
	delete(h.held, id)
	h.mu.Unlock()
	h.signal()
	select {
	case h.scanNow <- struct{}{}:
	default:
	}
	h.log.Debug("stream: retry scheduled", "id", id, "deliveries", deliveries, "backoff", backoff)
}

func (h *handlerRT) worker() {
	defer h.workers.Done()
	for j := range h.work {
		if h.hardCtx.Err() != nil {
			h.release(j.e.id) // cut short by the shutdown: stays pending
			continue
		}
		h.process(h.hardCtx, j)
	}
}

// backoff returns the policy's backoff after delivery n, within 1 ms..MaxDuration.
func (h *handlerRT) backoff(n int64) time.Duration {
	return clampBackoff(h.policy.NextBackoff(max(n, 1)))
}

func clampBackoff(d time.Duration) time.Duration {
	return min(max(d, time.Millisecond), MaxDuration)
}

// ErrHandlerTimeout matches (errors.Is) the error of a delivery whose Handle call outlived
// Handler.Timeout (its context was cancelled at the deadline).
var ErrHandlerTimeout = errors.New("stream: handler timed out")

// handlerTimeoutError is a handler's error after its Timeout.
type handlerTimeoutError struct {
	timeout time.Duration
	err     error
}

func (e *handlerTimeoutError) Error() string {
	return fmt.Sprintf("stream: handler timed out after %v: %v", e.timeout, e.err)
}
func (e *handlerTimeoutError) Is(target error) bool { return target == ErrHandlerTimeout }
func (e *handlerTimeoutError) Unwrap() error        { return e.err }

// processTyped runs one delivery through h's hooks and handler and acts on the outcome.
func processTyped[T any](ctx context.Context, rt *handlerRT, h *Handler[T], call HandleFunc, j job) {
	c := rt.c
	id := j.e.id
	settled := false // the entry left the held set (acked, dead-lettered, retry scheduled)
	defer func() {
		if r := recover(); r != nil {
			c.report(fmt.Errorf("stream: hook of %s/%s panicked on %s: %v (the entry stays pending)", rt.topic, rt.group, id, r))
		}
		if !settled {
			rt.release(id)
		}
	}()
	if rg, ok := j.e.get(fieldReplayGroup); ok && rg != rt.group && !rt.deadLetters {
		rt.m.filtered.Inc()
		settled = rt.enqueueAck(id) // a replay meant for another group
		return
	}
	m := &Message[T]{ID: id, Topic: rt.topic, Partition: max(rt.partition, 0), Group: rt.group, Consumer: c.name, DeliveryCount: j.deliveries}
	raw, err := decodeInto(m, j.e)
	var bodyErr error
	if err != nil && h.lenient {
		bodyErr, err = err, nil
	}
	if err != nil {
		rt.m.poison.Inc()
		if raw == nil {
			b, _ := j.e.get(FieldBody)
			raw = []byte(b)
		}
		if rt.deadLetter(id, "poison: "+err.Error(), 0, c.name, true) && h.OnFailure != nil {
			h.OnFailure(ctx, nil, raw, err)
		}
		return
	}
	if h.Filter != nil && h.Filter(m) {
		rt.m.filtered.Inc()
		settled = rt.enqueueAck(id)
		return
	}
	d := &delivery{h: rt, id: id, fields: j.e.fields, bodyErr: bodyErr}
	m.d = d
	hctx, cancel := ctx, context.CancelFunc(func() {})
	if rt.timeout > 0 {
		hctx, cancel = context.WithTimeout(ctx, rt.timeout)
	}
	running := rt.running.Add(1)
	rt.m.inflight.Set(float64(running))
	start := time.Now()
	err = safeCall(hctx, call, &Delivery{ID: id, Topic: rt.topic, Partition: max(rt.partition, 0), Group: rt.group, Consumer: c.name,
		Key: m.Key, Tag: m.Tag, Source: m.Source, SendTime: m.SendTime, DeliveryCount: j.deliveries,
		Headers: m.Headers, Message: m})
	rt.m.duration.Update(time.Since(start).Seconds())
	rt.m.inflight.Set(float64(rt.running.Add(-1)))
	timedOut := rt.timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if err != nil && !timedOut && errors.Is(err, ErrHandlerTimeout) {
		rt.m.timeouts.Inc() // the Timeout middleware's deadline
	}
	if err != nil && d.acked.Load() {
		rt.m.errors.Inc() // acknowledged or dead-lettered by the handler itself: nothing to retry
		return
	}
	if errors.Is(err, errDuplicate) {
		rt.m.duplicates.Inc()
		settled = rt.enqueueAck(id)
		return
	}
	if err == nil {
		rt.m.consumed.Inc()
		if h.OnSuccess != nil {
			h.OnSuccess(ctx, m)
		}
		if !d.deferred.Load() && !d.acked.Swap(true) {
			settled = rt.enqueueAck(id)
		}
		return
	}
	rt.m.errors.Inc()
	if timedOut {
		rt.m.timeouts.Inc()
		if !errors.Is(err, ErrHandlerTimeout) {
			err = &handlerTimeoutError{timeout: rt.timeout, err: err}
		}
	} else if ctx.Err() != nil {
		return // cut short by the shutdown: stays pending
	}
	retry := !rt.noRetry && !IsPermanent(err)
	if retry && j.deliveries < int64(rt.maxd) {
		rt.m.retried.Inc()
		rt.touch(id) // the backoff counts from now
		rt.scheduleRetry(id, j.deliveries, rt.backoff(j.deliveries))
		settled = true
		return
	}
	ferr := err
	if retry {
		ferr = &MaxRetryError{Deliveries: j.deliveries, Max: rt.maxd, Err: err}
	}
	if rt.deadLetter(id, ferr.Error(), 0, c.name, true) && h.OnFailure != nil {
		h.OnFailure(ctx, m, raw, ferr)
	}
}

// expireTyped dead-letters an entry the scan found delivered max times and idle (its
// consumer vanished during the last delivery), and tells OnFailure.
func expireTyped[T any](ctx context.Context, rt *handlerRT, h *Handler[T], e entry, deliveries, minIdle int64) {
	c := rt.c
	ferr := error(&MaxRetryError{Deliveries: deliveries, Max: rt.maxd})
	if !rt.deadLetter(e.id, ferr.Error(), minIdle, "", false) || h.OnFailure == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.report(fmt.Errorf("stream: OnFailure of %s/%s panicked on %s: %v", rt.topic, rt.group, e.id, r))
		}
	}()
	m := &Message[T]{ID: e.id, Topic: rt.topic, Partition: max(rt.partition, 0), Group: rt.group, Consumer: c.name, DeliveryCount: deliveries}
	raw, err := decodeInto(m, e)
	if err != nil {
		if raw == nil {
			b, _ := e.get(FieldBody)
			raw = []byte(b)
		}
		h.OnFailure(ctx, nil, raw, fmt.Errorf("%w (%w)", ferr, err))
		return
	}
	h.OnFailure(ctx, m, raw, ferr)
}

// safeCall runs the handler chain; a panic anywhere in it is a *PanicError failure.
func safeCall(ctx context.Context, call HandleFunc, d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return call(ctx, d)
}

// fieldReplayGroup marks an entry replayed from a dead letter for one group only.
const fieldReplayGroup = "replay_group"
