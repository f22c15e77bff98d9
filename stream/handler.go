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
	"github.com/redstream-go/redstream/internal/streamwire"
)

// A registered handler runs, per stream it reads, one handlerRT: the roles below, each a
// type of its own that owns its state and talks to the others through methods and
// channels (see roles_test.go for the list the package holds them to).
//
//   - reader (reader.go): reads new entries, and rereads own entries whose read reply was lost;
//   - dispatcher (dispatch.go, ordered.go): the handler slots, the set of entries in hand, the
//     per-key lines, and the Concurrency workers;
//   - acker (ack.go): batched acknowledgements, fenced when a partition is lost;
//   - retrier (reclaim.go, retryqueue.go): own retries, the pending-entry scan and the catch-up
//     of a partition taken over;
//   - leaseKeeper (lease.go): refreshes the leases of the entries in hand;
//   - deadLetterer (dlpath.go): dead-letter writes, and the entries waiting for one;
//   - housekeeper (housekeeping.go): gauges and the removal of idle consumers;
//   - mover (mover.go): delayed messages due.
//
// The partition owner (ownerSet, owner.go) starts and fences handlerRTs.

// scope is what every role of one handler runtime is given: the consumer it works for (its
// client, name, configuration, I/O deadlines and pause), the stream and group it works on,
// its log and metrics, and the runtime's contexts. It is set before the roles start and only
// read afterwards.
type scope struct {
	c            *Consumer
	topic, group string
	partition    int  // the partition of a partitioned topic read; -1 for an unpartitioned one
	level        int  // the priority level read (Config.Priorities); -1 for a topic without levels
	deadLetters  bool // a dead-letter handler (RegisterDeadLetters)
	stream, dlq  string
	log          *slog.Logger
	m            *handlerMetrics

	// runCtx ends when the handler stops reading (Close, Unregister); hardCtx, the
	// handlers' parent, when its drain ends. Children of the consumer's.
	runCtx, hardCtx context.Context
}

// handlerParams are the settings of one handler runtime, as Register resolves them.
type handlerParams struct {
	topic, group, stream string
	partition            int
	deadLetters          bool
	takeover             bool // a partition just claimed (OwnPartitions): catch up first
	concurrency          int
	policy               DeliveryRetryPolicy
	maxd                 int
	noRetry              bool
	timeout              time.Duration
	startID              string
	ordered              bool           // Handler.OrderedByKey
	deleteOnAck          bool           // Handler.DeleteOnAck
	results              *ResultOptions // Handler.Results, checked; nil for none
	pool                 *Pool          // the pool whose workers handle the entries (Handler.Pool, priority levels); nil for own workers
	weight               int            // the runtime's weight in pool
	level                int            // the priority level read, -1 for a topic without levels
	capacity             int            // the most entries held at once, when not Concurrency + ReadCount (a weighted level's share)
	dlq                  string         // the dead-letter stream when not the stream's own (a level's: its topic's)
	log                  *slog.Logger
}

// handlerRT is a registered handler at run time, for one stream, with its body type erased:
// its roles and the order in which they start and stop.
type handlerRT struct {
	*scope
	startID string
	maxd    int
	noRetry bool
	timeout time.Duration

	disp   *dispatcher
	rd     *reader
	retr   *retrier
	leases *leaseKeeper
	acks   *acker
	dl     *deadLetterer
	house  *housekeeper
	mv     *mover
	res    *resulter // nil without Handler.Results
	lim    *limiter  // the consumption limit's role (used only with Handler.Limit)

	runCancel, hardStop context.CancelFunc
	stopped             chan struct{} // closed when every goroutine of the handler has exited

	panics logGate // the Warn records of handler panics (failurelog.go)
}

// job is one delivery to handle.
type job struct {
	e          entry
	deliveries int64         // the entry's delivery count with this delivery: its fence
	fence      *atomic.Int64 // the fence the delivery's writes check (set by dispatch; see raiseFence)
}

// retryEntry is an own failed entry waiting for its backoff.
type retryEntry struct {
	at         time.Time     // when the backoff ends
	deliveries int64         // deliveries so far
	backoff    time.Duration // the backoff drawn at the failure
	limited    bool          // parked by the consumption limit, not failed
}

// newHandlerRT builds the roles of one handler runtime. process handles one delivery;
// expired dead-letters an entry the scan found delivered max times.
func newHandlerRT(c *Consumer, p handlerParams, process func(ctx context.Context, j job),
	expired func(ctx context.Context, e entry, deliveries, minIdle int64)) *handlerRT {
	dlq := p.dlq
	if dlq == "" {
		dlq = streamwire.DeadLetterStreamName(p.stream)
	}
	s := &scope{c: c, topic: p.topic, group: p.group, partition: p.partition, level: p.level, deadLetters: p.deadLetters,
		stream: p.stream, dlq: dlq, log: p.log,
		m: newHandlerMetrics(c.cfg.Metrics, p.topic, p.partition, p.level, p.group, p.concurrency)}
	capacity := p.concurrency + c.cfg.ReadCount // most entries held at once
	if p.capacity > 0 {
		capacity = p.capacity
	}
	wake := make(chan struct{}, 1)     // a slot was freed (for the reader)
	wakeScan := make(chan struct{}, 1) // a slot was freed (for the scanner)
	scanNow := make(chan struct{}, 1)  // a retry or dead-letter attempt is due earlier
	var caughtUp chan struct{}         // closed when a takeover's catch-up is done
	if p.takeover {
		caughtUp = make(chan struct{})
	}
	// claims is held from a claim into this consumer's name (a scan page, own retries)
	// until the claimed entries are dispatched, and by the reread of own pending entries,
	// which would otherwise see them pending and not in hand, and hand them out twice.
	claims := new(sync.Mutex)
	retries := newRetrySet()
	dl := newDeadLetterer(s, scanNow)
	var q workQueue = newOwnWorkers(p.concurrency, capacity)
	if p.pool != nil {
		q = p.pool.share(p.stream+"/"+p.group, p.weight, capacity)
	}
	disp := newDispatcher(s, p.concurrency, capacity, p.ordered, retries, dl, q, wake, wakeScan, process)
	rd := newReader(s, disp, claims, wake, caughtUp)
	house := newHousekeeper(s)
	retr := newRetrier(s, retrierParams{d: disp, retries: retries, dl: dl, house: house, claims: claims,
		policy: p.policy, maxd: p.maxd, expired: expired, caughtUp: caughtUp, wakeScan: wakeScan,
		scanNow: scanNow, interrupt: rd.cancelRead})
	return &handlerRT{scope: s, startID: p.startID, maxd: p.maxd, noRetry: p.noRetry, timeout: p.timeout,
		disp: disp, rd: rd, retr: retr, dl: dl, house: house,
		leases: newLeaseKeeper(s, disp.heldIDs),
		acks:   newAcker(s, capacity, p.deleteOnAck, disp.release),
		mv:     newMover(s, c.cfg.Delay.PollInterval, !c.cfg.Delay.Disabled && !p.deadLetters),
		res:    newResulter(s, p.results),
		lim:    newLimiter(s, retr),
	}
}

// start starts h's goroutines; c.mu is held. They stop in this order: the producers of
// work (reader, retrier) when runCtx ends, then work is closed, the workers drain it and
// exit, the ack queue is closed, the acker drains it and exits, and then the lease keeper
// (the entries in hand keep their lease until they are acknowledged).
func (h *handlerRT) start() {
	c := h.c
	h.stopped = make(chan struct{})
	h.house.start()
	var producers, all sync.WaitGroup
	h.rd.start(&producers)
	h.retr.start(&producers)
	h.disp.start()
	c.workers.Add(1)
	go func() { h.disp.wait(); c.workers.Done() }()
	h.mv.start(&all)
	c.wg.Add(1)
	all.Add(2)
	go func() { defer all.Done(); producers.Wait(); h.disp.stop() }()
	go func() { defer all.Done(); h.disp.wait(); h.acks.stop() }()
	quit := make(chan struct{}) // closed when the workers and the acknowledger have exited
	h.acks.start(&all, quit)
	h.leases.start(&all, quit)
	go func() { defer c.wg.Done(); all.Wait(); close(h.stopped) }()
}

// initContexts derives h's contexts from the consumer's (Register, once h is accepted).
func (h *handlerRT) initContexts() {
	h.runCtx, h.runCancel = context.WithCancel(h.c.runCtx)
	h.hardCtx, h.hardStop = context.WithCancel(h.c.hardCtx)
}

// createGroup creates h's group at its StartID; an existing group is fine.
func (h *handlerRT) createGroup(ctx context.Context) error { return h.ensureGroup(ctx, h.startID) }

// stopReading ends runCtx: the reader, the retrier and the mover stop, and the drain begins.
func (h *handlerRT) stopReading() { h.runCancel() }

// cut ends hardCtx: the Handle calls in progress are cancelled.
func (h *handlerRT) cut() { h.hardStop() }

// done returns a channel closed when every goroutine of h has exited.
func (h *handlerRT) done() <-chan struct{} { return h.stopped }

// drained returns a channel closed when h's workers have exited.
func (h *handlerRT) drained() <-chan struct{} {
	ch := make(chan struct{})
	go func() { h.disp.wait(); close(ch) }()
	return ch
}

// inFlight returns the number of Handle calls running.
func (h *handlerRT) inFlight() int64 { return h.disp.inFlight() }

// cancelRead interrupts the read in progress, if any (Pause).
func (h *handlerRT) cancelRead() { h.rd.cancelRead() }

// fence stops acknowledging: h's partition lease is lost (owner.go).
func (h *handlerRT) fence() { h.acks.fence() }

// isFenced reports whether fence was called.
func (h *handlerRT) isFenced() bool { return h.acks.isFenced() }

// ackNow acknowledges one delivery synchronously (Message.Ack), fenced.
func (h *handlerRT) ackNow(ctx context.Context, id string, fence int64) error {
	return h.acks.ackNow(ctx, id, fence)
}

// readsFailing reports whether h's reads are failing.
func (h *handlerRT) readsFailing() bool { return h.rd.failing() }

// deadLettersFailing reports whether h's dead-letter writes are failing, and how many
// entries wait for theirs.
func (h *handlerRT) deadLettersFailing() (int, bool) { return h.dl.failing() }

// stats returns h's HandlerStats; running and paused are the consumer's state.
func (h *handlerRT) stats(running, paused bool) HandlerStats {
	held, parked := h.disp.counts()
	inFlight := int(h.disp.inFlight())
	s := HandlerStats{
		Topic: h.topic, Group: h.group, Partition: h.partition,
		InFlight:         inFlight,
		Queued:           max(held-inFlight, 0),
		RetriesScheduled: h.retr.scheduled() - h.retr.limited(),
		Limited:          h.retr.limited(),
		KeyWaiting:       parked,
	}
	h.rd.fill(&s, running && !paused)
	h.house.fill(&s)
	h.mv.fill(&s)
	return s
}

// waitResumed waits while the consumer is paused; it reports false once h stops.
func (h *scope) waitResumed() bool {
	if ch := h.c.pausedChan(); ch != nil {
		select {
		case <-ch:
		case <-h.runCtx.Done():
		}
	}
	return h.runCtx.Err() == nil
}

// sleep waits d or until h stops; it reports whether h is still running.
func (h *scope) sleep(d time.Duration) bool {
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
func (h *scope) ensureGroup(ctx context.Context, startID string) error {
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
func (h *scope) recoverGroup() {
	ctx, cancel := h.c.ioContext(h.hardCtx)
	defer cancel()
	if err := h.ensureGroup(ctx, "0"); err != nil {
		h.m.backgroundError(opGroup)
		h.c.report(err)
		return
	}
	h.log.Warn("stream: consumer group recreated (lost with a Redis restart?)")
}

func (h *scope) trimmedWhilePending(ids []string) {
	if len(ids) == 0 {
		return
	}
	h.m.trimmedPending.Add(len(ids))
	if f := h.c.cfg.OnTrimmedWhilePending; f != nil {
		f(h.topic, h.group, ids)
	}
}

// clampBackoff bounds a backoff to 1 ms..MaxDuration.
func clampBackoff(d time.Duration) time.Duration {
	return min(max(d, time.Millisecond), maxDuration)
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
			rt.disp.release(id)
		}
	}()
	if rg, ok := j.e.get(fieldReplayGroup); ok && rg != rt.group && !rt.deadLetters {
		rt.m.filtered.Inc()
		settled = rt.acks.enqueue(id, j.fence) // a replay meant for another group
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
			b, _ := j.e.get(fieldBody)
			raw = []byte(b)
		}
		var notify func(context.Context)
		if h.OnFailure != nil {
			notify = func(ctx context.Context) { h.OnFailure(ctx, nil, raw, err) }
		}
		reason := "poison: " + err.Error()
		key, _ := j.e.get(fieldKey)
		rt.dl.deadLetterOrWait(ctx, id, j.fence, reason, rt.recordFailure(id, key, j.fence, reason, notify))
		return
	}
	if h.Filter != nil && h.Filter(m) {
		rt.m.filtered.Inc()
		settled = rt.acks.enqueue(id, j.fence)
		return
	}
	settled = handleTyped(ctx, rt, h, call, j, m, raw, bodyErr)
}

// handleTyped runs the handler chain on m and acts on the outcome; it reports whether the
// entry left the held set (acknowledged, dead-lettered, retry scheduled).
func handleTyped[T any](ctx context.Context, rt *handlerRT, h *Handler[T], call HandleFunc, j job, m *Message[T], raw []byte, bodyErr error) bool {
	c := rt.c
	id := j.e.id
	d := &delivery{h: rt, id: id, fence: j.fence, fields: j.e.fields, bodyErr: bodyErr}
	m.d = d
	hctx, cancel := ctx, context.CancelFunc(func() {})
	if rt.timeout > 0 {
		hctx, cancel = context.WithTimeout(ctx, rt.timeout)
	}
	done, err := func() {}, error(nil)
	if h.Limit != nil {
		var wait time.Duration
		if done, wait, err = admitTyped(ctx, rt.lim, h.Limit, m, j.deliveries); err == nil && wait > 0 {
			cancel()
			return rt.lim.park(j, wait)
		}
	}
	if err == nil {
		running := rt.disp.begin()
		rt.m.inflight.Set(float64(running))
		start := time.Now()
		err = safeCall(hctx, call, &Delivery{ID: id, Topic: rt.topic, Partition: max(rt.partition, 0), Group: rt.group, Consumer: c.name,
			Key: m.Key, Tag: m.Tag, Source: m.Source, SendTime: m.SendTime, DeliveryCount: j.deliveries,
			Headers: m.Headers, Message: m})
		rt.m.duration.Update(time.Since(start).Seconds())
		rt.m.inflight.Set(float64(rt.disp.end()))
		done()
	}
	timedOut := rt.timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if err != nil && !timedOut && errors.Is(err, ErrHandlerTimeout) {
		rt.m.timeouts.Inc() // the Timeout middleware's deadline
	}
	if err != nil && d.acked.Load() {
		rt.m.errors.Inc() // acknowledged or dead-lettered by the handler itself: nothing to retry
		rt.m.hist[histFailed].Add(1)
		return false
	}
	if errors.Is(err, errDuplicate) {
		rt.m.duplicates.Inc()
		return rt.acks.enqueue(id, j.fence)
	}
	if err == nil && rt.res != nil && !d.acked.Load() {
		// The result is recorded, fenced, before the acknowledgement; if it cannot be, the
		// delivery fails (and is retried) rather than complete without it.
		if rerr := rt.res.complete(ctx, d, m.Key); errors.Is(rerr, ErrStaleDelivery) {
			rt.m.errors.Inc()
			rt.m.hist[histFailed].Add(1)
			return false // superseded: the current delivery records the outcome
		} else if rerr != nil {
			err = rerr
		}
	}
	if err == nil {
		rt.m.consumed.Inc()
		rt.m.hist[histProcessed].Add(1)
		if h.OnSuccess != nil {
			h.OnSuccess(ctx, m)
		}
		if !d.deferred.Load() && !d.acked.Swap(true) {
			return rt.acks.enqueue(id, j.fence)
		}
		return false
	}
	rt.m.errors.Inc()
	rt.m.hist[histFailed].Add(1)
	rt.logPanic(id, j.deliveries, err)
	if timedOut {
		rt.m.timeouts.Inc()
		if !errors.Is(err, ErrHandlerTimeout) {
			err = &handlerTimeoutError{timeout: rt.timeout, err: err}
		}
	} else if ctx.Err() != nil {
		return false // cut short by the shutdown: stays pending
	}
	retry := !rt.noRetry && !isPermanent(err)
	if retry && j.deliveries < int64(rt.maxd) {
		rt.m.retried.Inc()
		rt.m.hist[histRetried].Add(1)
		rt.leases.touch(id) // the backoff counts from now
		rt.retr.schedule(id, j.deliveries, rt.retr.backoff(j.deliveries))
		return true
	}
	ferr := err
	if retry {
		ferr = &maxRetryError{Deliveries: j.deliveries, Max: rt.maxd, Err: err}
	}
	var notify func(context.Context)
	if h.OnFailure != nil {
		notify = func(ctx context.Context) { h.OnFailure(ctx, m, raw, ferr) }
	}
	reason := deadLetterReason(ferr)
	rt.dl.deadLetterOrWait(ctx, id, j.fence, reason, rt.recordFailure(id, m.Key, j.fence, reason, notify))
	return false
}

// results returns h's resulter, nil when the handler records no results.
func (h *handlerRT) results() *resulter { return h.res }

// recordFailure returns notify (called once the entry is dead-lettered) preceded by the
// failure's result record, when the handler records results.
func (h *handlerRT) recordFailure(id, key string, fence *atomic.Int64, reason string, notify func(context.Context)) func(context.Context) {
	if h.res == nil {
		return notify
	}
	return func(ctx context.Context) {
		h.res.failed(id, key, fence.Load(), reason)
		if notify != nil {
			notify(ctx)
		}
	}
}

// expireTyped dead-letters an entry the scan found delivered max times and idle (its
// consumer vanished during the last delivery), and tells OnFailure.
func expireTyped[T any](ctx context.Context, rt *handlerRT, h *Handler[T], e entry, deliveries, minIdle int64) {
	c := rt.c
	ferr := error(&maxRetryError{Deliveries: deliveries, Max: rt.maxd})
	// deliveries guards the move too: a redelivery by another consumer in between wins.
	status, _ := rt.dl.deadLetter(e.id, ferr.Error(), minIdle, "", deliveries)
	if status == 1 && rt.res != nil {
		key, _ := e.get(fieldKey)
		rt.res.failed(e.id, key, deliveries, ferr.Error())
	}
	if status != 1 || h.OnFailure == nil {
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
			b, _ := e.get(fieldBody)
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

// logPanic logs a handler panic on entry id (Warn, gated): the panic value and where it
// happened, in one line; the whole stack is in the PanicError and in the dead letter.
func (h *handlerRT) logPanic(id string, deliveries int64, err error) {
	var pe *PanicError
	if !errors.As(err, &pe) {
		return
	}
	ok, suppressed := h.panics.admit(time.Now())
	if !ok {
		return
	}
	args := []any{"id", id, "delivery", deliveries, "panic", firstLine(pe.valueString())}
	if at := panicSite(pe.Stack); at != "" {
		args = append(args, "at", at)
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	h.log.Warn("stream: handler panicked", args...)
}
