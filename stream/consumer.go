package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Handler handles the messages of one topic for one consumer group. Topic, Group and Handle
// are required; every other field is optional, and its zero value is the default.
//
// Outcomes of one delivery:
//   - Handle returns nil: OnSuccess, then the entry is acknowledged (unless the handler
//     called DeferAck, or acknowledged it itself with Ack).
//   - Filter returns true: the entry is acknowledged without calling Handle.
//   - The entry cannot be decoded (poison): OnFailure(nil, body, err) with err wrapping
//     ErrUndecodable; it is dead-lettered and acknowledged, never blocking the queue.
//   - Handle returns an error (or panics) and retry applies: the entry stays pending and is
//     delivered again after its backoff; once MaxDeliveries deliveries have failed it is
//     dead-lettered and OnFailure gets a *MaxRetryError (ErrMaxRetryExceeded).
//   - Handle returns an error and NoRetry is set or the error is Permanent: OnFailure with
//     the error; the entry is dead-lettered and acknowledged.
//
// OnFailure is called once the dead letter is written; a failed dead-letter write leaves
// the entry pending, to be tried again. Hooks run on the handler's goroutine; a panic in a
// hook is reported to Config.OnError and leaves the entry pending.
type Handler[T any] struct {
	// Topic is the topic to consume (the stream name before env isolation).
	Topic string
	// Group is the consumer group, created if missing.
	Group string
	// Handle handles one message. Its ctx is cancelled when Consumer.Close gives up
	// waiting. Handle may be called again for the same message (at-least-once delivery).
	Handle func(ctx context.Context, msg *Message[T]) error
	// Filter, if set, returns true for messages to skip: they are acknowledged unhandled.
	Filter func(msg *Message[T]) bool
	// OnSuccess, if set, is called after Handle returned nil, before the acknowledgement.
	OnSuccess func(ctx context.Context, msg *Message[T])
	// OnFailure, if set, is called for a message given up on: msg is nil for an undecodable
	// entry; body is the JSON text of the body when it could be decoded that far, else the
	// body field as on the wire.
	OnFailure func(ctx context.Context, msg *Message[T], body []byte, err error)
	// MaxDeliveries overrides Config.MaxRetry (and the RetryPolicy's max) for this handler
	// when > 0.
	MaxDeliveries int
	// RetryPolicy decides the backoff between deliveries. Nil means a FixedRetryPolicy of
	// Config.Autoclaim.MinIdleMs.
	RetryPolicy DeliveryRetryPolicy
	// NoRetry turns retries off: a failed message is given up at once (OnFailure, dead
	// letter, ack). The default retries.
	NoRetry bool
	// Concurrency is the number of goroutines calling Handle. Default 1 (in stream order).
	Concurrency int
	// StartID is where a newly created group starts: "0" (the default: every entry in the
	// stream) or "$" (only entries added from now on). A group lost with a Redis restart is
	// always recreated at "0", so that nothing written since is skipped.
	StartID string
}

// Consumer reads topics through consumer groups and runs their handlers. Register handlers,
// then Start; Close stops it. A Consumer is safe for concurrent use. Without handlers, Start
// starts no goroutine.
//
// The Consumer does not own its rueidis.Client: Close does not close it.
type Consumer struct {
	client  rueidis.Client
	cfg     Config
	name    string
	trimmer *Trimmer

	mu       sync.Mutex
	handlers []*handlerRT
	state    int // 0 new, 1 started, 2 closed

	stop       chan struct{}   // closed by Close: stop reading and scanning
	hardCtx    context.Context // cancelled when Close gives up waiting
	hardCancel context.CancelFunc
	done       chan struct{} // closed when every goroutine has exited
	wg         sync.WaitGroup
}

// ErrClosed is returned by Consumer methods called after Close.
var ErrClosed = errors.New("stream: consumer closed")

// ErrStarted is returned by Register after Start.
var ErrStarted = errors.New("stream: consumer already started")

// NewConsumer returns a consumer. It validates cfg (an error wraps
// redstream.ErrInvalidConfig) and picks a consumer name unique to this Consumer unless
// cfg.ConsumerName is set.
func NewConsumer(client rueidis.Client, cfg Config) (*Consumer, error) {
	if client == nil {
		return nil, errInvalid("nil rueidis client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	name := cfg.ConsumerName
	if name == "" {
		name = uniqueConsumerName()
	}
	t, err := NewTrimmer(client, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Consumer{client: client, cfg: cfg, name: name, trimmer: t,
		stop: make(chan struct{}), hardCtx: ctx, hardCancel: cancel, done: make(chan struct{})}, nil
}

// uniqueConsumerName returns "consumer-<host>-<pid>-<random>".
func uniqueConsumerName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("consumer-%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Name returns the consumer's name in its groups.
func (c *Consumer) Name() string { return c.name }

// Register adds a handler to c. It must be called before Start. It returns an error for a
// missing Topic, Group or Handle, a bad topic name, a negative Concurrency or MaxDeliveries,
// a second handler for the same topic and group, or after Start (ErrStarted) or Close
// (ErrClosed).
func Register[T any](c *Consumer, h Handler[T]) error {
	if h.Handle == nil {
		return errInvalid("handler for topic %q: nil Handle", h.Topic)
	}
	if h.Group == "" {
		return errInvalid("handler for topic %q: empty Group", h.Topic)
	}
	if h.Concurrency < 0 || h.MaxDeliveries < 0 {
		return errInvalid("handler %s/%s: negative Concurrency or MaxDeliveries", h.Topic, h.Group)
	}
	if h.StartID != "" && h.StartID != "0" && h.StartID != "$" {
		return errInvalid("handler %s/%s: StartID %q: want \"0\" or \"$\"", h.Topic, h.Group, h.StartID)
	}
	stream, err := StreamName(c.cfg, h.Topic)
	if err != nil {
		return err
	}
	policy := h.RetryPolicy
	if policy == nil {
		policy = FixedRetryPolicy{Max: c.cfg.MaxDeliveries, Backoff: c.cfg.Autoclaim.MinIdle}
	}
	maxd := policy.MaxDeliveries()
	if h.MaxDeliveries > 0 {
		maxd = h.MaxDeliveries
	}
	rt := &handlerRT{
		c:           c,
		topic:       h.Topic,
		group:       h.Group,
		stream:      stream,
		dlq:         DeadLetterStreamName(stream),
		concurrency: max(h.Concurrency, DefaultConcurrency),
		policy:      policy,
		maxd:        maxd,
		noRetry:     h.NoRetry,
		startID:     h.StartID,
		m:           newHandlerMetrics(c.cfg.Metrics, h.Topic, h.Group),
	}
	if rt.startID == "" {
		rt.startID = "0"
	}
	rt.process = func(ctx context.Context, j job) { processTyped(ctx, rt, &h, j) }
	rt.expired = func(ctx context.Context, e entry, deliveries, minIdle int64) {
		expireTyped(ctx, rt, &h, e, deliveries, minIdle)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case 1:
		return ErrStarted
	case 2:
		return ErrClosed
	}
	for _, o := range c.handlers {
		if o.stream == rt.stream && o.group == rt.group {
			return errInvalid("a handler for topic %q and group %q is already registered", h.Topic, h.Group)
		}
	}
	c.handlers = append(c.handlers, rt)
	return nil
}

// Start creates the handlers' consumer groups (idempotently: an existing group is kept) and
// starts, per handler, one reader (XREADGROUP), Concurrency handler goroutines, one
// acknowledger (batched XACK) and one pending-entry scanner, plus one trimmer for the
// consumer. ctx bounds the group creation only. With no handler registered Start does
// nothing. It returns ErrClosed after Close and ErrStarted on a second call.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case 1:
		return ErrStarted
	case 2:
		return ErrClosed
	}
	for _, h := range c.handlers {
		if err := h.ensureGroup(ctx, h.startID); err != nil {
			return err
		}
	}
	c.state = 1
	if len(c.handlers) == 0 {
		close(c.done)
		return nil
	}
	for _, h := range c.handlers {
		h.start()
	}
	if c.cfg.Trim.Mode != TrimOff {
		c.wg.Add(1)
		go c.trimLoop()
	}
	go func() { c.wg.Wait(); close(c.done) }()
	return nil
}

// Close stops reading and scanning, lets the handlers finish the messages already read,
// acknowledges their results and waits for every goroutine to exit. If ctx ends first, Close
// cancels the handlers' context, waits a little longer for them, and returns an error
// wrapping ctx.Err(); entries whose handling was cut short stay pending and are delivered
// again later. Closing a Consumer that was never started, or twice, returns nil. Close does
// not close the rueidis client.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	switch c.state {
	case 0:
		c.state = 2
		c.mu.Unlock()
		c.hardCancel()
		return nil
	case 2:
		c.mu.Unlock()
		return nil
	}
	c.state = 2
	c.mu.Unlock()
	close(c.stop)
	select {
	case <-c.done:
		c.hardCancel()
		return nil
	case <-ctx.Done():
	}
	c.hardCancel()
	select {
	case <-c.done:
	case <-time.After(closeGrace):
		return fmt.Errorf("stream: close: %w; some handlers did not return after their context was cancelled", ctx.Err())
	}
	return fmt.Errorf("stream: close: %w", ctx.Err())
}

// closeGrace is how long Close waits for handlers after cancelling their context.
const closeGrace = 5 * time.Second

// ioTimeout bounds acknowledgements and dead-letter writes, which run even while the
// consumer is closing.
const ioTimeout = 10 * time.Second

func (c *Consumer) report(err error) {
	if err != nil && c.cfg.OnError != nil {
		c.cfg.OnError(err)
	}
}

// sleep waits d or until stop; it reports whether the consumer is still running.
func (c *Consumer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stop:
		return false
	}
}

func (c *Consumer) trimLoop() {
	defer c.wg.Done()
	streams := map[string]string{}
	for _, h := range c.handlers {
		streams[h.stream] = h.topic
	}
	tick := time.NewTicker(c.cfg.Trim.Interval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		for _, topic := range streams {
			if _, err := c.trimmer.Trim(c.hardCtx, topic); err != nil && c.hardCtx.Err() == nil {
				c.report(err)
			}
		}
	}
}

// handlerRT is a registered handler at run time, with its body type erased.
type handlerRT struct {
	c                   *Consumer
	topic, group        string
	stream, dlq         string
	concurrency         int
	policy              DeliveryRetryPolicy
	maxd                int
	noRetry             bool
	startID             string
	m                   *handlerMetrics
	process             func(ctx context.Context, j job)
	expired             func(ctx context.Context, e entry, deliveries, minIdle int64)
	work                chan job
	acks                chan string
	producers, handlers sync.WaitGroup
}

// job is one delivery to handle.
type job struct {
	e          entry
	deliveries int64
}

func (h *handlerRT) start() {
	c := h.c
	h.work = make(chan job, c.cfg.ReadCount)
	h.acks = make(chan string, 4*c.cfg.ReadCount*h.concurrency+64)
	h.producers.Add(2)
	go h.reader()
	go h.scanner()
	h.handlers.Add(h.concurrency)
	for i := 0; i < h.concurrency; i++ {
		go h.worker()
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); h.producers.Wait(); close(h.work) }()
	go func() { defer c.wg.Done(); h.handlers.Wait(); close(h.acks) }()
	c.wg.Add(1)
	go h.acker()
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
	ctx, cancel := context.WithTimeout(h.c.hardCtx, ioTimeout)
	defer cancel()
	h.c.report(h.ensureGroup(ctx, "0"))
}

// connBackoff returns the wait after the n-th consecutive read failure: 50 ms doubling to 5 s.
func connBackoff(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}

func (h *handlerRT) reader() {
	defer h.producers.Done()
	c := h.c
	cl := c.client
	failures := 0
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		cmd := cl.B().Xreadgroup().Group(h.group, c.name).Count(int64(c.cfg.ReadCount)).Block(c.cfg.BlockTimeout.Milliseconds()).
			Streams().Key(h.stream).Id(">").Build()
		entries, err := parseXRead(cl.Do(c.hardCtx, cmd))
		if err != nil && !rueidis.IsRedisNil(err) {
			if c.hardCtx.Err() != nil {
				return
			}
			if isNoGroup(err) {
				h.recoverGroup()
			} else {
				c.report(fmt.Errorf("stream: read %q as %s/%s: %w", h.stream, h.group, c.name, err))
			}
			failures++
			if !c.sleep(connBackoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		for _, e := range entries {
			select {
			case h.work <- job{e: e, deliveries: 1}:
			case <-c.hardCtx.Done():
				return
			}
		}
	}
}

func (h *handlerRT) worker() {
	defer h.handlers.Done()
	for j := range h.work {
		if h.c.hardCtx.Err() != nil {
			continue // leave it pending: delivered again later
		}
		h.process(h.c.hardCtx, j)
	}
}

// enqueueAck queues id for the batched acknowledger.
func (h *handlerRT) enqueueAck(id string) { h.acks <- id }

func (h *handlerRT) acker() {
	defer h.c.wg.Done()
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
	}
}

// flushAcks acknowledges ids in one XACK, trying a few times. Entries whose acknowledgement
// fails stay pending and are delivered again later (at-least-once).
func (h *handlerRT) flushAcks(ids []string) {
	cl := h.c.client
	var err error
	for try := 1; try <= 3; try++ {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.c.hardCtx), ioTimeout)
		var n int64
		n, err = cl.Do(ctx, cl.B().Xack().Key(h.stream).Group(h.group).Id(ids...).Build()).AsInt64()
		cancel()
		if err == nil {
			h.m.acked.Add(int(n))
			return
		}
		if isNoGroup(err) {
			break
		}
		time.Sleep(connBackoff(try))
	}
	h.c.report(fmt.Errorf("stream: ack %d entries of %q for %s: %w", len(ids), h.stream, h.group, err))
}

// ackNow acknowledges one entry synchronously (Message.Ack).
func (h *handlerRT) ackNow(ctx context.Context, id string) error {
	cl := h.c.client
	n, err := cl.Do(ctx, cl.B().Xack().Key(h.stream).Group(h.group).Id(id).Build()).AsInt64()
	if err != nil {
		return fmt.Errorf("stream: ack %s of %q for %s: %w", id, h.stream, h.group, err)
	}
	h.m.acked.Add(int(n))
	return nil
}

// deadLetter moves entry id to the dead-letter stream (moveToDeadLetter). It reports whether
// this call moved it.
func (h *handlerRT) deadLetter(id, errText string, minIdle int64, owner string) (bool, error) {
	c := h.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.hardCtx), ioTimeout)
	defer cancel()
	res, err := moveToDeadLetter(ctx, c.client, deadLetterMove{
		Stream: h.stream, DLQ: h.dlq, Group: h.group, ID: id, Reason: errText,
		MaxLen: c.cfg.DeadLetter.MaxLen, MaxAgeMs: c.cfg.DeadLetter.MaxAge.Milliseconds(),
		MinIdleMs: minIdle, Owner: owner,
	})
	if err != nil {
		if isNoGroup(err) {
			h.recoverGroup()
		}
		return false, err
	}
	h.m.dlqTrimmed.Add(int(res.Trimmed))
	switch res.Status {
	case 1:
		h.m.deadLettered.Inc()
		h.m.acked.Inc()
		return true, nil
	case -1:
		h.trimmedWhilePending([]string{id})
	}
	return false, nil
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

// processTyped runs one delivery through h's hooks and handler and acts on the outcome.
func processTyped[T any](ctx context.Context, rt *handlerRT, h *Handler[T], j job) {
	c := rt.c
	id := j.e.id
	defer func() {
		if r := recover(); r != nil {
			c.report(fmt.Errorf("stream: hook of %s/%s panicked on %s: %v (the entry stays pending)", rt.topic, rt.group, id, r))
		}
	}()
	if rg, ok := j.e.get(fieldReplayGroup); ok && rg != rt.group {
		rt.m.filtered.Inc()
		rt.enqueueAck(id) // a replay meant for another group
		return
	}
	m := &Message[T]{ID: id, Topic: rt.topic, Group: rt.group, Consumer: c.name, DeliveryCount: j.deliveries}
	raw, err := decodeInto(m, j.e)
	if err != nil {
		rt.m.poison.Inc()
		if raw == nil {
			b, _ := j.e.get(FieldBody)
			raw = []byte(b)
		}
		moved, derr := rt.deadLetter(id, "poison: "+err.Error(), 0, "")
		c.report(derr)
		if moved && h.OnFailure != nil {
			h.OnFailure(ctx, nil, raw, err)
		}
		return
	}
	if h.Filter != nil && h.Filter(m) {
		rt.m.filtered.Inc()
		rt.enqueueAck(id)
		return
	}
	d := &delivery{h: rt, id: id}
	m.d = d
	start := time.Now()
	err = safeHandle(ctx, h.Handle, m)
	rt.m.duration.Update(time.Since(start).Seconds())
	if err == nil {
		rt.m.consumed.Inc()
		if h.OnSuccess != nil {
			h.OnSuccess(ctx, m)
		}
		if !d.deferred.Load() && !d.acked.Swap(true) {
			rt.enqueueAck(id)
		}
		return
	}
	rt.m.errors.Inc()
	if ctx.Err() != nil {
		return // cut short by Close: stays pending
	}
	retry := !rt.noRetry && !IsPermanent(err)
	if retry && j.deliveries < int64(rt.maxd) {
		rt.m.retried.Inc()
		return
	}
	ferr := err
	if retry {
		ferr = &MaxRetryError{Deliveries: j.deliveries, Max: rt.maxd, Err: err}
	}
	moved, derr := rt.deadLetter(id, ferr.Error(), 0, c.name)
	c.report(derr)
	if moved && h.OnFailure != nil {
		h.OnFailure(ctx, m, raw, ferr)
	}
}

// expireTyped dead-letters an entry the scan found delivered max times and idle, and tells
// OnFailure.
func expireTyped[T any](ctx context.Context, rt *handlerRT, h *Handler[T], e entry, deliveries, minIdle int64) {
	c := rt.c
	ferr := error(&MaxRetryError{Deliveries: deliveries, Max: rt.maxd})
	moved, derr := rt.deadLetter(e.id, ferr.Error(), minIdle, "")
	c.report(derr)
	if !moved || h.OnFailure == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.report(fmt.Errorf("stream: OnFailure of %s/%s panicked on %s: %v", rt.topic, rt.group, e.id, r))
		}
	}()
	m := &Message[T]{ID: e.id, Topic: rt.topic, Group: rt.group, Consumer: c.name, DeliveryCount: deliveries}
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

func safeHandle[T any](ctx context.Context, f func(context.Context, *Message[T]) error, m *Message[T]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("stream: handler panicked: %v", r)
		}
	}()
	return f(ctx, m)
}

// fieldReplayGroup marks an entry replayed from a dead letter for one group only.
const fieldReplayGroup = "replay_group"

// scanner runs the pending-entry scan at start and then every Autoclaim.IntervalMs.
func (h *handlerRT) scanner() {
	defer h.producers.Done()
	c := h.c
	tick := time.NewTicker(c.cfg.Autoclaim.Interval)
	defer tick.Stop()
	for {
		if err := h.scanOnce(c.hardCtx); err != nil && c.hardCtx.Err() == nil {
			c.report(err)
		}
		h.updateGauges(c.hardCtx)
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
	}
}

// scanPage is the most pending entries one reclaim.lua call examines.
const scanPage = 256

// scanOnce runs reclaim.lua over the group's whole pending list, dispatching claimed
// entries to the workers and dead-lettering expired ones.
func (h *handlerRT) scanOnce(ctx context.Context) error {
	c := h.c
	table := backoffTable(h.policy, h.maxd)
	start := "-"
	for {
		select {
		case <-c.stop:
			return nil
		default:
		}
		args := append([]string{h.group, c.name, start, strconv.Itoa(scanPage), strconv.Itoa(h.maxd)}, table...)
		res, err := reclaimScript.Exec(ctx, c.client, []string{h.stream}, args).ToArray()
		if err != nil {
			if isNoGroup(err) {
				h.recoverGroup()
				return nil
			}
			return fmt.Errorf("stream: scan pending entries of %q for %s: %w", h.stream, h.group, err)
		}
		if len(res) != 4 {
			return fmt.Errorf("stream: scan: unexpected reply of %d elements", len(res))
		}
		next, _ := res[0].ToString()
		if deleted, err := res[3].AsStrSlice(); err == nil {
			h.trimmedWhilePending(deleted)
		}
		expired, _ := res[2].ToArray()
		for _, x := range expired {
			f, _ := x.ToArray()
			if len(f) != 5 {
				continue
			}
			e, ok := parseEntry(f[0], f[1])
			if !ok {
				continue
			}
			n, _ := f[2].AsInt64()
			// The move re-checks that the entry is still idle for its backoff, so that a
			// redelivery by another consumer in between wins.
			need, _ := strconv.ParseInt(table[min(max(int(n), 1), len(table))-1], 10, 64)
			h.expired(ctx, e, n, need)
		}
		claimed, _ := res[1].ToArray()
		for _, x := range claimed {
			f, _ := x.ToArray()
			if len(f) != 3 {
				continue
			}
			e, ok := parseEntry(f[0], f[1])
			if !ok {
				continue
			}
			n, _ := f[2].AsInt64()
			h.m.redelivered.Inc()
			select {
			case h.work <- job{e: e, deliveries: n}:
			case <-ctx.Done():
				return nil
			}
		}
		if next == "" {
			return nil
		}
		start = next
	}
}

// updateGauges refreshes the pending, lag and dead-letter size gauges.
func (h *handlerRT) updateGauges(ctx context.Context) {
	cl := h.c.client
	cmds := rueidis.Commands{
		cl.B().XinfoGroups().Key(h.stream).Build(),
		cl.B().Xlen().Key(h.dlq).Build(),
	}
	res := cl.DoMulti(ctx, cmds...)
	if n, err := res[1].AsInt64(); err == nil {
		h.m.dlqSize.Set(float64(n))
	}
	groups, err := res[0].ToArray()
	if err != nil {
		return
	}
	for _, g := range groups {
		info, err := g.AsMap()
		if err != nil {
			continue
		}
		nm, pd := info["name"], info["pending"]
		if name, _ := nm.ToString(); name != h.group {
			continue
		}
		if p, err := pd.AsInt64(); err == nil {
			h.m.pending.Set(float64(p))
		}
		if l, ok := info["lag"]; ok {
			if v, err := l.AsInt64(); err == nil {
				h.m.lag.Set(float64(v))
			}
		}
	}
}

// parseXRead returns the entries of a one-stream XREADGROUP reply (RESP2 or RESP3).
func parseXRead(res rueidis.RedisResult) ([]entry, error) {
	msg, err := res.ToMessage()
	if err != nil {
		return nil, err
	}
	var list rueidis.RedisMessage
	switch {
	case msg.IsMap():
		m, err := msg.ToMap()
		if err != nil {
			return nil, err
		}
		for _, v := range m {
			list = v
		}
	case msg.IsArray():
		streams, _ := msg.ToArray()
		if len(streams) == 0 {
			return nil, nil
		}
		pair, err := streams[0].ToArray()
		if err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("stream: unexpected XREADGROUP reply")
		}
		list = pair[1]
	default:
		return nil, nil
	}
	return parseEntries(list)
}

// parseEntries parses an array of [id, [field, value, ...]] entries. Entries whose fields
// are nil (deleted while pending) are skipped.
func parseEntries(list rueidis.RedisMessage) ([]entry, error) {
	items, err := list.ToArray()
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(items))
	for _, it := range items {
		pair, err := it.ToArray()
		if err != nil || len(pair) != 2 {
			continue
		}
		if e, ok := parseEntry(pair[0], pair[1]); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

func parseEntry(idMsg, fieldsMsg rueidis.RedisMessage) (entry, bool) {
	id, err := idMsg.ToString()
	if err != nil {
		return entry{}, false
	}
	fv, err := fieldsMsg.ToArray()
	if err != nil {
		return entry{}, false
	}
	fields := make([]string, 0, len(fv))
	for _, f := range fv {
		s, err := f.ToString()
		if err != nil {
			return entry{}, false
		}
		fields = append(fields, s)
	}
	return entry{id: id, fields: fields}, true
}
