package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
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
//   - Handle returns an error (or panics, or outlives its Timeout) and retry applies: the
//     entry stays pending and this consumer delivers it again once its backoff has passed;
//     once MaxDeliveries deliveries have failed it is dead-lettered and OnFailure gets a
//     *MaxRetryError (ErrMaxRetryExceeded).
//   - Handle returns an error and NoRetry is set or the error is Permanent: OnFailure with
//     the error; the entry is dead-lettered and acknowledged.
//
// OnFailure is called once the dead letter is written. A dead-letter write that fails (Redis
// unreachable) is tried again, with the same reason, until it succeeds or the consumer shuts
// down; the entry stays pending meanwhile. Hooks run on the handler's goroutine; a panic in
// a hook is reported to Config.OnError and leaves the entry pending.
type Handler[T any] struct {
	// Topic is the topic to consume (the stream name before env isolation).
	Topic string
	// Group is the consumer group, created if missing.
	Group string
	// Handle handles one message. Its ctx is cancelled at the handler's Timeout and when the
	// consumer's shutdown timeout ends. Handle may be called again for the same message
	// (at-least-once delivery), but never twice at once by one Consumer.
	Handle func(ctx context.Context, msg *Message[T]) error
	// Filter, if set, returns true for messages to skip: they are acknowledged unhandled.
	Filter func(msg *Message[T]) bool
	// OnSuccess, if set, is called after Handle returned nil, before the acknowledgement.
	OnSuccess func(ctx context.Context, msg *Message[T])
	// OnFailure, if set, is called for a message given up on: msg is nil for an undecodable
	// entry; body is the JSON text of the body when it could be decoded that far, else the
	// body field as on the wire.
	OnFailure func(ctx context.Context, msg *Message[T], body []byte, err error)
	// MaxDeliveries is the most deliveries of one entry, the first one included. The cap is
	// taken, in this order, from MaxDeliveries when > 0, from RetryPolicy.MaxDeliveries()
	// when a RetryPolicy is set, else from Config.MaxDeliveries. When two of these are set
	// and disagree, the first one wins and Register logs a warning.
	MaxDeliveries int
	// RetryPolicy decides the backoff between deliveries. Nil means a FixedRetryPolicy of
	// Config.Autoclaim.MinIdle.
	RetryPolicy DeliveryRetryPolicy
	// NoRetry turns retries off: a failed message is given up at once (OnFailure, dead
	// letter, ack). The default retries.
	NoRetry bool
	// Concurrency is the number of goroutines calling Handle, 1 to MaxConcurrency. Default 1
	// (in stream order).
	Concurrency int
	// OrderedByKey handles the messages of one Key one at a time and in stream order, while
	// messages of different keys run in parallel on the Concurrency goroutines. A message
	// that fails with a retry blocks the later messages of its key (only those) until its
	// retry succeeds or it is dead-lettered; the non-blocking retries of an unordered
	// handler become blocking per key. Entries waiting behind their key are held and
	// leased like every entry in hand but take no handler slot; once 16 × (Concurrency +
	// ReadCount) of them wait (at least 1024), reads pause until some key moves on. Entries
	// without a key field (foreign producers) form one key.
	//
	// The order is guaranteed for the entries one Consumer receives. Several consumers of a
	// group share a topic's entries without regard to keys, so two of them may handle one
	// key's messages at the same time; run one consumer per group for a total order per
	// key. Crash recovery also reorders: entries of a crashed consumer (or of a failing
	// head whose retry another consumer took over after min-idle) are delivered after
	// later entries of the same key that live consumers already handled. A hook that
	// panics leaves its entry pending (it comes back after min-idle) and lets its key move
	// on. Default false.
	OrderedByKey bool
	// DeleteOnAck deletes each entry from the stream once this group has acknowledged it
	// (handled, filtered, skipped as a duplicate), in the same script as the XACK, but only
	// while the stream has no other consumer group: with a second group the entries are
	// only acknowledged (and a warning logged once), so no group loses entries it has not
	// read. Dead-lettered entries stay in the stream (the dead-letter move acknowledges
	// them without deleting) until trimming removes them. It keeps a single-group topic (a
	// work queue) about as short as its backlog. Counted in
	// redis_streaming_mq_deleted_on_ack_total. Default false.
	DeleteOnAck bool
	// Timeout is the longest one Handle call may run: its context is cancelled then, and
	// an error it returns is wrapped in an error matching ErrHandlerTimeout (a failed
	// delivery: retried, then dead-lettered with that reason). A handler that ignores its
	// context and returns nil late has succeeded. Zero means Config.HandlerTimeout (no
	// timeout by default); at most MaxDuration.
	Timeout time.Duration
	// Middleware wraps Handle, inside the consumer's own middleware (Consumer.Use); the
	// first is the outermost. See Middleware for the whole order.
	Middleware []Middleware
	// Dedup, if set, skips business duplicates: a message whose Key the deduplicator has
	// seen (IsDuplicate) is acknowledged without calling the middleware or Handle, and a
	// message handled successfully is recorded (MarkSeen). It is the user layer of
	// deduplication (two sends of one business event under one key), never a replacement
	// for the delivery layer: a failed message is not recorded, so its retries and dead
	// letter happen as without Dedup, and a redelivered entry that had succeeded is
	// skipped. An error of IsDuplicate is a failed delivery (retried); an error of MarkSeen
	// is reported (Config.OnError, log) and the message still counts as handled. Two
	// duplicates handled at the same moment by two consumers may both run: make the
	// effect idempotent (sinks) where that matters. Messages with an empty Key are not
	// deduplicated.
	Dedup redstream.Deduplicator
	// OwnPartitions, for a partitioned topic (Config.Partitions), makes each partition read
	// by one consumer of the group at a time instead of by all of them: consumers take
	// leases on partitions (Config.PartitionLease), each up to its fair share ceil(P /
	// live consumers), and hand partitions over as consumers join and leave. With
	// OrderedByKey the per-key order then holds across the group's consumers, also when one
	// is killed: a partition's new owner first takes over and handles the previous owner's
	// pending entries, in stream order, before it reads new ones, and an owner that cannot
	// renew its lease stops handling (and acknowledging) the partition before the lease
	// expires. A Handle call that ignores its cancelled context may still be running then.
	// Ignored for an unpartitioned topic. Default false: every consumer reads every
	// partition.
	OwnPartitions bool
	// StartID is where a newly created group starts: "0" (the default: every entry in the
	// stream) or "$" (only entries added from now on). A group lost with a Redis restart is
	// always recreated at "0", so that nothing written since is skipped.
	StartID string

	deadLetters bool // RegisterDeadLetters: consume the topic's dead-letter stream
	lenient     bool // an undecodable body is no poison: the delivery carries the error
}

// Consumer reads topics through consumer groups and runs their handlers. Register handlers,
// then Run (or Start, and Close to stop); Register and Unregister also work while it runs.
// A Consumer is safe for concurrent use.
//
// The Consumer does not own its rueidis.Client: Close does not close it.
type Consumer struct {
	client  rueidis.Client
	cfg     Config
	rawMax  int // Config.MaxDeliveries as given (0: not set)
	name    string
	trimmer *Trimmer
	log     *slog.Logger

	mu       sync.Mutex
	handlers []*handlerRT
	owners   []*ownerSet   // handlers that own partitions (Handler.OwnPartitions)
	mw       []Middleware  // Use
	state    int           // stateNew, stateRunning, stateClosed
	resume   chan struct{} // nil when not paused; closed by Resume
	stopped  chan struct{} // closed when Close begins

	runCtx    context.Context // cancelled when Close begins: reads, scans, housekeeping
	runCancel context.CancelFunc
	hardCtx   context.Context // the handlers' parent: cancelled when the drain ends
	hardStop  context.CancelFunc
	// ioDeadline (unix ns, 0 = none) bounds every Redis call once Close has begun.
	ioDeadline atomic.Int64
	done       chan struct{} // closed when every goroutine has exited
	drained    chan struct{} // closed when every handler goroutine has exited
	workers    sync.WaitGroup
	wg         sync.WaitGroup

	trimState opState
	loops     bool // startLoops ran
}

const (
	stateNew = iota
	stateRunning
	stateClosed
)

// ErrClosed is returned by Consumer methods called after Close.
var ErrClosed = errors.New("stream: consumer closed")

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("stream: consumer already started")

// ErrNotRunning is returned by Healthy before Start.
var ErrNotRunning = errors.New("stream: consumer not running")

// ErrShutdownTimeout is wrapped by the error of Close and Run when in-flight handlers did
// not finish within Config.ShutdownTimeout: their context was cancelled and their entries
// stay pending, to be delivered again.
var ErrShutdownTimeout = errors.New("stream: shutdown timeout")

// Timing of Redis calls made in the background.
const (
	// ioTimeout bounds one acknowledgement, lease, scan or dead-letter call.
	ioTimeout = 5 * time.Second
	// readSlack is added to BlockTimeout for the deadline of one XREADGROUP.
	readSlack = 3 * time.Second
	// closeGrace is how long Close waits for handlers after cancelling their context, and
	// the time acknowledgements and the group exit get after the drain.
	closeGrace = time.Second
	// trimTimeout bounds one trimming pass.
	trimTimeout = 30 * time.Second
)

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
	raw := cfg.MaxDeliveries
	cfg = cfg.WithDefaults()
	name := cfg.ConsumerName
	if name == "" {
		name = uniqueConsumerName()
	}
	t, err := NewTrimmer(client, cfg)
	if err != nil {
		return nil, err
	}
	run, runCancel := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	return &Consumer{client: client, cfg: cfg, rawMax: raw, name: name, trimmer: t,
		log:    cfg.Logger.With("consumer", name),
		runCtx: run, runCancel: runCancel, hardCtx: hard, hardStop: hardStop,
		stopped: make(chan struct{}), done: make(chan struct{}), drained: make(chan struct{})}, nil
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

// Register adds a handler to c. Before Start it is started by Start; on a running consumer
// Register creates its group (bounded by 5 s) and starts it at once. It returns an error
// for a missing Topic, Group or Handle, a bad topic name, a Concurrency, MaxDeliveries or
// Timeout out of range, a second handler for the same topic and group, a failed group
// creation, or after Close began (ErrClosed). It is safe for concurrent use.
func Register[T any](c *Consumer, h Handler[T]) error {
	if h.Handle == nil {
		return errInvalid("handler for topic %q: nil Handle", h.Topic)
	}
	if h.Group == "" {
		return errInvalid("handler for topic %q: empty Group", h.Topic)
	}
	switch {
	case h.Concurrency < 0 || h.Concurrency > MaxConcurrency:
		return errInvalid("handler %s/%s: Concurrency %d: want 1 to %d (0 for 1)", h.Topic, h.Group, h.Concurrency, MaxConcurrency)
	case h.MaxDeliveries < 0 || h.MaxDeliveries > MaxMaxDeliveries:
		return errInvalid("handler %s/%s: MaxDeliveries %d: want 1 to %d (0 for the default)", h.Topic, h.Group, h.MaxDeliveries, MaxMaxDeliveries)
	case h.Timeout < 0 || h.Timeout > MaxDuration || (h.Timeout > 0 && h.Timeout < minDurationSetting):
		return errInvalid("handler %s/%s: Timeout %v: want 1ms to %v (0 for Config.HandlerTimeout)", h.Topic, h.Group, h.Timeout, MaxDuration)
	}
	if h.StartID != "" && h.StartID != "0" && h.StartID != "$" {
		return errInvalid("handler %s/%s: StartID %q: want \"0\" or \"$\"", h.Topic, h.Group, h.StartID)
	}
	streams, err := PartitionStreams(c.cfg, h.Topic)
	if err != nil {
		return err
	}
	topic := h.Topic
	if h.deadLetters {
		for i := range streams {
			streams[i] = DeadLetterStreamName(streams[i])
		}
		topic = h.Topic + deadLetterSuffix
	}
	log := c.log.With("topic", topic, "group", h.Group)
	policy := h.RetryPolicy
	maxd := c.cfg.MaxDeliveries
	if policy != nil {
		pm := policy.MaxDeliveries()
		switch {
		case h.MaxDeliveries > 0 && pm != h.MaxDeliveries:
			log.Warn("stream: Handler.MaxDeliveries and its RetryPolicy disagree; Handler.MaxDeliveries wins",
				"handler_max_deliveries", h.MaxDeliveries, "policy_max_deliveries", pm)
		case h.MaxDeliveries == 0 && c.rawMax > 0 && pm != c.rawMax:
			log.Warn("stream: Config.MaxDeliveries (max-retry) and the handler's RetryPolicy disagree; the RetryPolicy wins",
				"config_max_deliveries", c.rawMax, "policy_max_deliveries", pm)
		}
		maxd = pm
	} else {
		policy = FixedRetryPolicy{Max: c.cfg.MaxDeliveries, Backoff: c.cfg.Autoclaim.MinIdle}
	}
	if h.MaxDeliveries > 0 {
		maxd = h.MaxDeliveries
	}
	maxd = min(max(maxd, 1), MaxMaxDeliveries)
	timeout := h.Timeout
	if timeout == 0 {
		timeout = c.cfg.HandlerTimeout
	}
	conc := max(h.Concurrency, DefaultConcurrency)
	startID := h.StartID
	if startID == "" {
		startID = "0"
	}
	c.mu.Lock()
	cmw := c.mw
	c.mu.Unlock()
	handle := h.Handle
	call := chain(func(ctx context.Context, d *Delivery) error { return handle(ctx, d.Message.(*Message[T])) }, cmw, h.Middleware)
	// One runtime per stream: a partitioned topic's partitions are read, handled, retried,
	// dead-lettered and trimmed each on its own, by the machinery of a single stream.
	mk := func(i int) *handlerRT {
		stream := streams[i]
		part, plog := -1, log
		if len(streams) > 1 {
			part, plog = i, log.With("partition", i)
		}
		rt := &handlerRT{
			c:           c,
			topic:       topic,
			group:       h.Group,
			partition:   part,
			deadLetters: h.deadLetters,
			stream:      stream,
			dlq:         DeadLetterStreamName(stream),
			concurrency: conc,
			capacity:    conc + c.cfg.ReadCount,
			policy:      policy,
			maxd:        maxd,
			noRetry:     h.NoRetry,
			timeout:     timeout,
			startID:     startID,
			ordered:     h.OrderedByKey,
			deleteOnAck: h.DeleteOnAck,
			lines:       map[string]*keyLine{},
			lineOf:      map[string]string{},
			log:         plog,
			m:           newHandlerMetrics(c.cfg.Metrics, topic, part, h.Group),
			held:        map[string]struct{}{},
			retries:     newRetryQueue(),
			wake:        make(chan struct{}, 1),
			wakeScan:    make(chan struct{}, 1),
			scanNow:     make(chan struct{}, 1),
		}
		rcall := call
		if h.Dedup != nil {
			rcall = rt.dedup(h.Dedup, call)
		}
		rt.process = func(ctx context.Context, j job) { processTyped(ctx, rt, &h, rcall, j) }
		rt.expired = func(ctx context.Context, e entry, deliveries, minIdle int64) {
			expireTyped(ctx, rt, &h, e, deliveries, minIdle)
		}
		return rt
	}
	if h.OwnPartitions && len(streams) > 1 && !h.deadLetters {
		return c.addOwned(newOwnerSet(c, h.Topic, topic, h.Group, streams, startID, mk, log))
	}
	rts := make([]*handlerRT, len(streams))
	for i := range streams {
		rts[i] = mk(i)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.canAddAll(rts); err != nil {
		return err
	}
	if c.state == stateRunning {
		// Started already: create the groups, then start the handler, unless Close or
		// another Register of the same pair came first meanwhile.
		c.mu.Unlock()
		ctx, cancel := c.ioContext(context.Background())
		for _, rt := range rts {
			if err = rt.ensureGroup(ctx, rt.startID); err != nil {
				break
			}
		}
		cancel()
		c.mu.Lock()
		if err != nil {
			return err
		}
		if err := c.canAddAll(rts); err != nil {
			return err
		}
		c.startLoops()
		for _, rt := range rts {
			rt.initContexts()
			rt.start()
			c.handlers = append(c.handlers, rt)
		}
		log.Info("stream: handler started", "partitions", len(rts))
		return nil
	}
	for _, rt := range rts {
		rt.initContexts()
		c.handlers = append(c.handlers, rt)
	}
	return nil
}

// canAddAll reports why one of rts cannot be added to c now; c.mu is held.
func (c *Consumer) canAddAll(rts []*handlerRT) error {
	for _, rt := range rts {
		if err := c.canAdd(rt); err != nil {
			return err
		}
	}
	return nil
}

// canAdd reports why rt cannot be added to c now; c.mu is held.
func (c *Consumer) canAdd(rt *handlerRT) error {
	if c.state == stateClosed {
		return ErrClosed
	}
	for _, o := range c.handlers {
		if o.stream == rt.stream && o.group == rt.group {
			return errInvalid("a handler for topic %q and group %q is already registered", rt.topic, rt.group)
		}
	}
	for _, o := range c.owners {
		if o.topic == rt.topic && o.group == rt.group {
			return errInvalid("a handler for topic %q and group %q is already registered", rt.topic, rt.group)
		}
	}
	return nil
}

// ErrNotRegistered is returned by Unregister for a topic and group with no handler.
var ErrNotRegistered = errors.New("stream: no handler registered for this topic and group")

// Unregister removes the handler of topic and group. Before Start it only forgets it. On a
// running consumer it stops the handler as Close stops a consumer, without touching the
// other handlers: it stops reading and redelivering, lets the messages in hand finish for
// at most Config.ShutdownTimeout (or until ctx ends), acknowledges what succeeded, leaves
// failures pending for their retry (by another consumer of the group, or this one if the
// handler is registered again) and deletes this consumer from the group when it owns no
// pending entry there. When the drain time ends first, the handler's context is cancelled
// and the error wraps ErrShutdownTimeout (ctx.Err() when ctx ended first); unfinished
// entries stay pending. It returns ErrNotRegistered (wrapped) for an unknown pair and
// ErrClosed after Close began. It is safe for concurrent use.
func (c *Consumer) Unregister(ctx context.Context, topic, group string) error {
	stream, err := StreamName(c.cfg, topic)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.state == stateClosed {
		c.mu.Unlock()
		return ErrClosed
	}
	for i, o := range c.owners {
		if o.topic == topic && o.group == group {
			c.owners = append(c.owners[:i:i], c.owners[i+1:]...)
			running := c.state == stateRunning
			c.mu.Unlock()
			if !running {
				return nil
			}
			return o.stop(ctx)
		}
	}
	var hs []*handlerRT // the handler's runtimes: one per partition
	kept := c.handlers[:0:0]
	for _, o := range c.handlers {
		if (o.stream == stream || (o.deadLetters || o.partition >= 0) && o.topic == topic) && o.group == group {
			hs = append(hs, o)
			continue
		}
		kept = append(kept, o)
	}
	c.handlers = kept
	running := c.state == stateRunning
	c.mu.Unlock()
	if len(hs) == 0 {
		return fmt.Errorf("%w: topic %q, group %q", ErrNotRegistered, topic, group)
	}
	if !running {
		return nil
	}
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.stopHandler(ctx, h)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopHandler stops one started handler (Unregister).
func (c *Consumer) stopHandler(ctx context.Context, h *handlerRT) error {
	drainEnd := time.Now().Add(c.cfg.ShutdownTimeout)
	ctxBound := false // ctx's deadline, not ShutdownTimeout, ends the drain
	if dl, ok := ctx.Deadline(); ok && dl.Before(drainEnd) {
		drainEnd, ctxBound = dl, true
	}
	h.runCancel()
	h.log.Info("stream: handler stopping", "shutdown_timeout", c.cfg.ShutdownTimeout)
	timer := time.NewTimer(time.Until(drainEnd))
	defer timer.Stop()
	drained := make(chan struct{})
	go func() { h.workers.Wait(); close(drained) }()
	cut := false
	select {
	case <-drained:
	case <-timer.C:
		cut = h.running.Load() > 0
	case <-ctx.Done():
		cut = h.running.Load() > 0
	}
	h.hardStop()
	grace := time.NewTimer(closeGrace + ioTimeout) // the last acknowledgements, bounded by ioTimeout each
	defer grace.Stop()
	finished := false
	select {
	case <-h.stopped:
		finished = true
	case <-grace.C:
	case <-ctx.Done():
		if !cut {
			select {
			case <-h.stopped:
				finished = true
			default:
			}
		}
	}
	if finished {
		c.leaveGroup(h)
	}
	if finished && !cut {
		h.log.Info("stream: handler stopped")
		return nil
	}
	what := fmt.Sprintf("%d handler calls still running", h.running.Load())
	if !cut {
		what = "acknowledgements did not complete (Redis unreachable?)"
	}
	h.log.Warn("stream: handler stop cut short; unfinished entries stay pending", "reason", what)
	err := ctx.Err()
	if err == nil && ctxBound {
		// The drain timer set at ctx's deadline can fire a moment before ctx itself ends.
		err = context.DeadlineExceeded
	}
	if err != nil {
		return fmt.Errorf("stream: unregister %s/%s: %w; %s", h.topic, h.group, err, what)
	}
	return fmt.Errorf("stream: unregister %s/%s: %w (%v); %s", h.topic, h.group, ErrShutdownTimeout, c.cfg.ShutdownTimeout, what)
}

// Start creates the handlers' consumer groups (idempotently: an existing group is kept) and
// starts, per handler, one reader (XREADGROUP), Concurrency handler goroutines, one
// acknowledger (batched XACK), one lease keeper and one pending-entry scanner, plus one
// trimmer for the consumer. ctx bounds the group creation only (10 s when it has no
// deadline). With no handler registered Start does nothing. It returns ErrClosed after
// Close and ErrStarted on a second call.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateRunning:
		return ErrStarted
	case stateClosed:
		return ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*ioTimeout)
		defer cancel()
	}
	for _, h := range c.handlers {
		if err := h.ensureGroup(ctx, h.startID); err != nil {
			return err
		}
	}
	for _, o := range c.owners {
		if err := o.ensureGroups(ctx); err != nil {
			return err
		}
	}
	c.state = stateRunning
	// The running state holds one count of each group, released by Close, so that a
	// consumer whose handlers are all unregistered keeps running until Close.
	c.workers.Add(1)
	c.wg.Add(1)
	for _, h := range c.handlers {
		h.start()
	}
	if len(c.handlers) > 0 || len(c.owners) > 0 {
		c.startLoops()
	}
	for _, o := range c.owners {
		o.start()
	}
	c.log.Info("stream: consumer started", "handlers", len(c.handlers))
	return nil
}

// startLoops starts the consumer's own goroutines (trimmer, shutdown waiters) with its
// first handler, so that a consumer without handlers runs none; c.mu is held.
func (c *Consumer) startLoops() {
	if c.loops {
		return
	}
	c.loops = true
	go func() { c.workers.Wait(); close(c.drained) }()
	if c.cfg.Trim.Mode != TrimOff {
		c.wg.Add(1)
		go c.trimLoop()
	}
	go func() {
		c.wg.Wait()
		c.leaveGroups()
		close(c.done)
	}()
}

// Run starts c (unless it was started already), blocks until ctx is done or Close is
// called, then shuts down as Close does: it stops reading, lets in-flight handlers finish
// for Config.ShutdownTimeout, acknowledges what finished and leaves the rest pending. It
// returns nil after a clean shutdown, the error of Start, or Close's error (wrapping
// ErrShutdownTimeout when handlers were cut short).
//
// A worker's main is typically:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	err := consumer.Run(ctx)
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	state := c.state
	c.mu.Unlock()
	switch state {
	case stateNew:
		if err := c.Start(ctx); err != nil && !errors.Is(err, ErrStarted) {
			return err
		}
	case stateClosed:
		return ErrClosed
	}
	select {
	case <-ctx.Done():
	case <-c.stopped:
	}
	return c.Close(context.Background())
}

// Close stops reading and scanning and lets the handlers finish the messages already read,
// for at most Config.ShutdownTimeout (or until ctx ends, if earlier); it acknowledges their
// results, deletes this consumer from each group where it owns no pending entry, and waits
// for every goroutine to exit. When the drain time ends first, Close cancels the handlers'
// context, waits a little (1 s) longer for them, and returns an error wrapping
// ErrShutdownTimeout, or ctx.Err() when ctx ended first; entries whose handling was cut
// short stay pending and are delivered again later. Every Redis call Close waits for has a
// deadline within that time, so Close returns in time even when Redis is down or hung.
// Closing a Consumer that was never started, or twice, returns nil. Close does not close the
// rueidis client.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	switch c.state {
	case stateNew:
		c.state = stateClosed
		close(c.stopped)
		close(c.drained)
		close(c.done)
		c.mu.Unlock()
		c.runCancel()
		c.hardStop()
		return nil
	case stateClosed:
		c.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
		}
		return nil
	}
	c.state = stateClosed
	close(c.stopped)
	if c.resume != nil {
		close(c.resume)
		c.resume = nil
	}
	if !c.loops { // started, but never had a handler: nothing to wait for
		close(c.drained)
		close(c.done)
		c.mu.Unlock()
		c.runCancel()
		c.hardStop()
		c.log.Info("stream: consumer stopped")
		return nil
	}
	c.mu.Unlock()

	drainEnd := time.Now().Add(c.cfg.ShutdownTimeout)
	ctxBound := false // ctx's deadline, not ShutdownTimeout, ends the drain
	if dl, ok := ctx.Deadline(); ok && dl.Before(drainEnd) {
		drainEnd, ctxBound = dl, true
	}
	c.ioDeadline.Store(drainEnd.Add(closeGrace).UnixNano())
	c.runCancel()
	c.workers.Done() // the running state's counts (Start)
	c.wg.Done()
	c.log.Info("stream: consumer stopping", "shutdown_timeout", c.cfg.ShutdownTimeout)

	timer := time.NewTimer(time.Until(drainEnd))
	defer timer.Stop()
	cut := false // a running Handle call was cancelled
	select {
	case <-c.drained:
	case <-timer.C:
		cut = c.InFlight() > 0
		c.hardStop() // queued entries not started by now stay pending
	case <-ctx.Done():
		cut = c.InFlight() > 0
		c.hardStop()
	}
	grace := time.NewTimer(time.Until(time.Unix(0, c.ioDeadline.Load())))
	defer grace.Stop()
	finished := false
	select {
	case <-c.done:
		finished = true
	case <-grace.C:
	case <-ctx.Done():
	}
	c.hardStop()
	if finished && !cut {
		c.log.Info("stream: consumer stopped")
		return nil
	}
	n := c.InFlight()
	what := fmt.Sprintf("%d handlers still running", n)
	if !cut {
		what = "acknowledgements or the group exit did not complete (Redis unreachable?)"
	}
	c.log.Warn("stream: shutdown cut short; unfinished entries stay pending", "in_flight", n, "reason", what)
	err := ctx.Err()
	if err == nil && ctxBound {
		// The drain timer set at ctx's deadline can fire a moment before ctx itself ends.
		err = context.DeadlineExceeded
	}
	if err != nil {
		return fmt.Errorf("stream: close: %w; %s", err, what)
	}
	return fmt.Errorf("stream: close: %w (%v); %s", ErrShutdownTimeout, c.cfg.ShutdownTimeout, what)
}

// ioContext returns a context for one background Redis call: parent's values and
// cancellation, a deadline of ioTimeout, and once Close has begun no later than its drain
// deadline plus a second.
func (c *Consumer) ioContext(parent context.Context) (context.Context, context.CancelFunc) {
	dl := time.Now().Add(ioTimeout)
	if ns := c.ioDeadline.Load(); ns != 0 {
		if end := time.Unix(0, ns); end.Before(dl) {
			dl = end
		}
	}
	return context.WithDeadline(parent, dl)
}

// report passes err to Config.OnError.
func (c *Consumer) report(err error) {
	if err != nil && c.cfg.OnError != nil {
		c.cfg.OnError(err)
	}
}

func (c *Consumer) trimLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.cfg.Trim.Interval)
	defer tick.Stop()
	for {
		select {
		case <-c.runCtx.Done():
			return
		case <-tick.C:
		}
		type target struct {
			topic string
			part  int
		}
		streams := map[string]target{}
		c.mu.Lock()
		for _, h := range c.handlers {
			if !h.deadLetters { // dead-letter streams have their own bounds
				streams[h.stream] = target{h.topic, h.partition}
			}
		}
		c.mu.Unlock()
		for stream, t := range streams {
			ctx, cancel := context.WithTimeout(c.runCtx, trimTimeout)
			_, err := c.trimmer.trimStream(ctx, t.topic, t.part, stream)
			cancel()
			if c.runCtx.Err() != nil {
				return
			}
			if err != nil {
				c.cfg.Metrics.GetOrCreateCounter(backgroundErrorName(t.topic, t.part, "", "trim")).Inc()
				c.trimState.fail(c.log, "stream: trimming fails", err, "topic", t.topic)
				c.report(err)
			} else {
				c.trimState.ok(c.log, "stream: trimming works again", "topic", t.topic)
			}
		}
	}
}
