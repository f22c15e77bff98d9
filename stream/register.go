package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
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
//     once MaxDeliveries deliveries have failed it is dead-lettered and OnFailure gets
//     an error matching ErrMaxRetryExceeded.
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
	// RetryPolicy decides the backoff between deliveries. Nil means the default: the first
	// redelivery Config.RetryBackoff (1 s) after a failure, each later wait twice the one
	// before, up to Config.Autoclaim.MinIdle.
	RetryPolicy DeliveryRetryPolicy
	// NoRetry turns retries off: a failed message is given up at once (OnFailure, dead
	// letter, ack). The default retries.
	NoRetry bool
	// Concurrency is the number of goroutines calling Handle, 1 to 10,000. Default 1
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
	// timeout by default); at most 30 days.
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
	// Pool, if set, handles the handler's messages on the pool's goroutines, shared with the
	// other handlers of the pool, by Weight (see Pool); Concurrency then only sizes the
	// entries the handler holds in hand. Nil: the handler's own Concurrency goroutines. Not
	// with a topic of priority levels, whose levels share a pool of their own.
	Pool *Pool
	// Weight is the handler's weight in Pool, 1 to 1000. Default 1.
	Weight int
	// PriorityWeights are the weights of the levels of a topic with priority levels
	// (Config.Priorities), level 0 first, each 1 to 1000: under load, each level is handed
	// to Handle in proportion to its weight (a smooth weighted round robin over the levels
	// with messages waiting, so no level is starved; see Pool). Nil means 2^p for level p
	// (1, 2, 4, ...). The levels share Concurrency goroutines.
	PriorityWeights []int
	// StrictPriority hands a higher level's messages to Handle before any lower level's,
	// whatever the weights: a lower level waits while a higher one has messages in hand, so
	// a flood of urgent messages starves the rest. Default false: weighted.
	StrictPriority bool
	// Results, if set, records the outcome of every entry the handler takes: its progress
	// reports (Message.Progress), its result (Message.SetResult) when Handle returns nil,
	// or the reason it was dead-lettered, for Producer.Result and Producer.WaitResult (see
	// ResultOptions). Unpartitioned topics only. Nil records nothing.
	Results *ResultOptions
	// Limit, if set, admits each message by a rate limit, a concurrency cap or both, shared
	// across consumers, before Handle is called; a message not admitted waits, parked and
	// uncounted, until the limit admits it (see Limit). Nil: every message is handled as
	// soon as a slot is free.
	Limit *Limit[T]

	deadLetters bool // RegisterDeadLetters: consume the topic's dead-letter stream
	lenient     bool // an undecodable body is no poison: the delivery carries the error
}

// Register adds a handler to c. Before Start it is started by Start; on a running consumer
// Register creates its group (bounded by 5 s) and starts it at once. It returns an error
// for a missing Topic, Group or Handle, a bad topic name, a Concurrency, MaxDeliveries or
// Timeout out of range, a second handler for the same topic and group, a failed group
// creation, or after Close began (ErrClosed). It is safe for concurrent use.
func Register[T any](c *Consumer, h Handler[T]) error {
	if err := h.check(); err != nil {
		return err
	}
	streams, levels, err := topicStreams(c.cfg, h.Topic)
	if h.deadLetters {
		streams, levels = nil, false
		streams, err = PartitionStreams(c.cfg, h.Topic) // a topic's levels share one dead-letter stream
	}
	if err != nil {
		return err
	}
	pool, weights, err := h.pool(levels, len(streams))
	if err != nil {
		return err
	}
	var results *ResultOptions
	if h.Results != nil {
		if len(streams) > 1 || h.deadLetters {
			return errInvalid("handler %s/%s: Results: results are recorded for the handlers of topics of one stream only, not partitioned or prioritised (the id Send returns does not name the stream)", h.Topic, h.Group)
		}
		o, err := h.Results.check(h.Topic, h.Group)
		if err != nil {
			return err
		}
		results = &o
	}
	topic := h.Topic
	if h.deadLetters {
		for i := range streams {
			streams[i] = streamwire.DeadLetterStreamName(streams[i])
		}
		topic = h.Topic + streamwire.DeadLetterSuffix
	}
	log := c.log.With("topic", topic, "group", h.Group)
	policy, maxd := c.retrySettings(log, h.RetryPolicy, h.MaxDeliveries)
	timeout := h.Timeout
	if timeout == 0 {
		timeout = c.cfg.HandlerTimeout
	}
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
	mk := func(i int, takeover bool) *handlerRT {
		p := handlerParams{topic: topic, group: h.Group, stream: streams[i], partition: -1, log: log,
			deadLetters: h.deadLetters, takeover: takeover, concurrency: max(h.Concurrency, defaultConcurrency),
			policy: policy, maxd: maxd, noRetry: h.NoRetry, timeout: timeout, startID: startID,
			ordered: h.OrderedByKey, deleteOnAck: h.DeleteOnAck, results: results, level: -1, pool: pool}
		switch {
		case levels:
			p.level, p.log, p.weight = i, log.With("priority", i), weights[i]
			p.dlq = streamwire.DeadLetterStreamName(streams[0]) // every level's dead letters in the topic's
			if !h.StrictPriority {
				// A weighted level holds entries in hand in proportion to its weight, so that
				// its share holds also when reading and acknowledging, not the handlers, are
				// what limits the rate.
				full := p.concurrency + c.cfg.ReadCount
				p.capacity = max(1, (full*weights[i]+maxOf(weights)-1)/maxOf(weights))
			}
		case len(streams) > 1:
			p.partition, p.log = i, log.With("partition", i)
		}
		if pool != nil && !levels {
			p.weight = weights[0]
		}
		var rt *handlerRT
		rcall := call
		rt = newHandlerRT(c, p, func(ctx context.Context, j job) { processTyped(ctx, rt, &h, rcall, j) },
			func(ctx context.Context, e entry, deliveries, minIdle int64) {
				expireTyped(ctx, rt, &h, e, deliveries, minIdle)
			})
		if h.Dedup != nil {
			rcall = rt.dedup(h.Dedup, call)
		}
		return rt
	}
	if h.OwnPartitions && len(streams) > 1 && !h.deadLetters {
		return c.addOwned(newOwnerSet(c, h.Topic, topic, h.Group, streams, startID, mk, log))
	}
	rts := make([]*handlerRT, len(streams))
	for i := range streams {
		rts[i] = mk(i, false)
	}
	return c.addHandlers(rts, log)
}

// pool returns the pool of h's runtimes and each one's weight: a pool of its own over the
// levels of a topic with priority levels (n of them), Handler.Pool, or none.
func (h *Handler[T]) pool(levels bool, n int) (*Pool, []int, error) {
	if h.Weight < 0 || h.Weight > maxWeight {
		return nil, nil, errInvalid("handler %s/%s: Weight %d: want 1 to %d (0 for 1)", h.Topic, h.Group, h.Weight, maxWeight)
	}
	if !levels {
		if h.PriorityWeights != nil || h.StrictPriority {
			return nil, nil, errInvalid("handler %s/%s: PriorityWeights and StrictPriority need a topic with priority levels (Config.Priorities)", h.Topic, h.Group)
		}
		if h.Pool == nil {
			return nil, nil, nil
		}
		return h.Pool, []int{max(h.Weight, 1)}, nil
	}
	if h.Pool != nil {
		return nil, nil, errInvalid("handler %s/%s: Pool: a topic with priority levels shares the handler's Concurrency over its levels; it cannot join another pool", h.Topic, h.Group)
	}
	weights := h.PriorityWeights
	if weights == nil {
		weights = make([]int, n)
		for p := range weights {
			weights[p] = 1 << p
		}
	}
	if len(weights) != n {
		return nil, nil, errInvalid("handler %s/%s: PriorityWeights: %d weights for %d levels", h.Topic, h.Group, len(weights), n)
	}
	for p, w := range weights {
		if w < 1 || w > maxWeight {
			return nil, nil, errInvalid("handler %s/%s: PriorityWeights[%d] = %d: want 1 to %d", h.Topic, h.Group, p, w, maxWeight)
		}
	}
	return newPool(max(h.Concurrency, defaultConcurrency), h.StrictPriority), weights, nil
}

// maxOf returns the largest of ws (at least one).
func maxOf(ws []int) int {
	m := ws[0]
	for _, w := range ws[1:] {
		m = max(m, w)
	}
	return m
}

// maxWeight bounds Handler.Weight and Handler.PriorityWeights.
const maxWeight = 1000

// check validates h's settings.
func (h *Handler[T]) check() error {
	if h.Handle == nil {
		return errInvalid("handler for topic %q: nil Handle", h.Topic)
	}
	if h.Group == "" {
		return errInvalid("handler for topic %q: empty Group", h.Topic)
	}
	switch {
	case h.Concurrency < 0 || h.Concurrency > maxConcurrency:
		return errInvalid("handler %s/%s: Concurrency %d: want 1 to %d (0 for 1)", h.Topic, h.Group, h.Concurrency, maxConcurrency)
	case h.MaxDeliveries < 0 || h.MaxDeliveries > maxMaxDeliveries:
		return errInvalid("handler %s/%s: MaxDeliveries %d: want 1 to %d (0 for the default)", h.Topic, h.Group, h.MaxDeliveries, maxMaxDeliveries)
	case h.Timeout < 0 || h.Timeout > maxDuration || (h.Timeout > 0 && h.Timeout < minDurationSetting):
		return errInvalid("handler %s/%s: Timeout %v: want 1ms to %v (0 for Config.HandlerTimeout)", h.Topic, h.Group, h.Timeout, maxDuration)
	}
	if h.StartID != "" && h.StartID != "0" && h.StartID != "$" {
		return errInvalid("handler %s/%s: StartID %q: want \"0\" or \"$\"", h.Topic, h.Group, h.StartID)
	}
	if h.Limit != nil {
		return h.Limit.check(h.Topic, h.Group)
	}
	return nil
}

// retrySettings returns a handler's retry policy and delivery cap from its RetryPolicy and
// MaxDeliveries and the consumer's configuration, warning when two of them disagree.
func (c *Consumer) retrySettings(log *slog.Logger, policy DeliveryRetryPolicy, hmax int) (DeliveryRetryPolicy, int) {
	maxd := c.cfg.MaxDeliveries
	if policy != nil {
		pm := policy.MaxDeliveries()
		switch {
		case hmax > 0 && pm != hmax:
			log.Warn("stream: Handler.MaxDeliveries and its RetryPolicy disagree; Handler.MaxDeliveries wins",
				"handler_max_deliveries", hmax, "policy_max_deliveries", pm)
		case hmax == 0 && c.rawMax > 0 && pm != c.rawMax:
			log.Warn("stream: Config.MaxDeliveries (max-retry) and the handler's RetryPolicy disagree; the RetryPolicy wins",
				"config_max_deliveries", c.rawMax, "policy_max_deliveries", pm)
		}
		maxd = pm
	} else {
		policy = defaultRetryPolicy(c.cfg)
	}
	if hmax > 0 {
		maxd = hmax
	}
	return policy, min(max(maxd, 1), maxMaxDeliveries)
}

// addHandlers adds the runtimes of one handler to c, and starts them when c runs.
func (c *Consumer) addHandlers(rts []*handlerRT, log *slog.Logger) error {
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
		var err error
		for _, rt := range rts {
			if err = rt.createGroup(ctx); err != nil {
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
		if err := c.canAdd(rt.topic, rt.group, rt.stream); err != nil {
			return err
		}
	}
	return nil
}

// canAdd reports why a runtime of topic and group reading stream cannot be added to c now;
// c.mu is held.
func (c *Consumer) canAdd(topic, group, stream string) error {
	if c.state == stateClosed {
		return ErrClosed
	}
	for _, o := range c.handlers {
		if o.stream == stream && o.group == group {
			return errInvalid("a handler for topic %q and group %q is already registered", topic, group)
		}
	}
	for _, o := range c.owners {
		if o.handles(topic, group) {
			return errInvalid("a handler for topic %q and group %q is already registered", topic, group)
		}
	}
	return nil
}

// Unregister removes the handler of topic and group. Before Start it only forgets it. On a
// running consumer it stops the handler as Close stops a consumer, without touching the
// other handlers: it stops reading and redelivering, lets the messages in hand finish for
// at most Config.ShutdownTimeout (or until ctx ends), acknowledges what succeeded, leaves
// failures pending for their retry (by another consumer of the group, or this one if the
// handler is registered again) and deletes this consumer from the group when it owns no
// pending entry there. When the drain time ends first, the handler's context is cancelled
// and the error wraps ErrShutdownTimeout (ctx.Err() when ctx ended first); unfinished
// entries stay pending. It returns an error wrapping redstream.ErrNotFound for an unknown pair and
// ErrClosed after Close began. It is safe for concurrent use.
func (c *Consumer) Unregister(ctx context.Context, topic, group string) error {
	stream, err := streamName(c.cfg, topic)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.state == stateClosed {
		c.mu.Unlock()
		return ErrClosed
	}
	for i, o := range c.owners {
		if o.handles(topic, group) {
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
		if (o.stream == stream || (o.deadLetters || o.partition >= 0 || o.level >= 0) && o.topic == topic) && o.group == group {
			hs = append(hs, o)
			continue
		}
		kept = append(kept, o)
	}
	c.handlers = kept
	running := c.state == stateRunning
	c.mu.Unlock()
	if len(hs) == 0 {
		return fmt.Errorf("stream: no handler registered for topic %q, group %q: %w", topic, group, redstream.ErrNotFound)
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
	h.stopReading()
	h.log.Info("stream: handler stopping", "shutdown_timeout", c.cfg.ShutdownTimeout)
	timer := time.NewTimer(time.Until(drainEnd))
	defer timer.Stop()
	drained := h.drained()
	cut := false
	select {
	case <-drained:
	case <-timer.C:
		cut = h.inFlight() > 0
	case <-ctx.Done():
		cut = h.inFlight() > 0
	}
	h.cut()
	grace := time.NewTimer(closeGrace + ioTimeout) // the last acknowledgements, bounded by ioTimeout each
	defer grace.Stop()
	finished := false
	select {
	case <-h.done():
		finished = true
	case <-grace.C:
	case <-ctx.Done():
		if !cut {
			select {
			case <-h.done():
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
	what := fmt.Sprintf("%d handler calls still running", h.inFlight())
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
