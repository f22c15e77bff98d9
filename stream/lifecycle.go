package stream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pause stops reading new entries and redelivering pending ones, in every handler of c; a
// read in progress is interrupted. Handlers already running finish, and the entries in hand
// keep their lease. Pause on a paused, new or closed Consumer does nothing.
func (c *Consumer) Pause() {
	c.mu.Lock()
	if c.state == stateClosed || c.resume != nil {
		c.mu.Unlock()
		return
	}
	c.resume = make(chan struct{})
	hs := c.handlers
	c.mu.Unlock()
	for _, h := range hs {
		h.cancelRead()
	}
	c.log.Info("stream: consumer paused")
}

// Resume undoes Pause. Resume on a Consumer that is not paused does nothing.
func (c *Consumer) Resume() {
	c.mu.Lock()
	ch := c.resume
	c.resume = nil
	c.mu.Unlock()
	if ch != nil {
		close(ch)
		c.log.Info("stream: consumer resumed")
	}
}

// isPaused reports whether c is paused (Stats().Paused).
func (c *Consumer) isPaused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resume != nil
}

// pausedChan returns a channel closed by Resume while c is paused, and nil otherwise.
func (c *Consumer) pausedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resume == nil {
		return nil
	}
	return c.resume
}

// isRunning reports whether c was started and Close has not begun (Stats().Running).
func (c *Consumer) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateRunning
}

// inFlight returns the number of Handle calls running, over every handler (Stats().InFlight).
func (c *Consumer) inFlight() int {
	c.mu.Lock()
	hs := c.handlers
	c.mu.Unlock()
	n := 0
	for _, h := range hs {
		n += int(h.inFlight())
	}
	return n
}

// Stats is a snapshot of a Consumer's state.
type Stats struct {
	// Consumer is the consumer's name in its groups: Config.ConsumerName, or the name
	// generated for this Consumer ("consumer-<host>-<pid>-<random>").
	Consumer string
	Running  bool // started and not closing
	Paused   bool
	InFlight int // Handle calls running, over every handler
	Handlers []HandlerStats
}

// HandlerStats is the state of one registered handler. Pending, Lag and DeadLetters are read
// from Redis by the scanner, every Autoclaim.Interval; RefreshedAt says when (zero before the
// first refresh).
type HandlerStats struct {
	Topic, Group string
	// Partition is the partition of a partitioned topic these stats are of (a handler of a
	// topic of P partitions has P HandlerStats), -1 for an unpartitioned topic.
	Partition int
	// Reading is true while the reader runs (started, not paused, not closing) and its last
	// read succeeded.
	Reading bool
	// LastRead is the time of the last successful XREADGROUP (zero before the first).
	LastRead time.Time
	// InFlight is the number of Handle calls running.
	InFlight int
	// Queued is the number of entries read or claimed that wait for a free handler, the
	// KeyWaiting ones included.
	Queued int
	// KeyWaiting is the number of entries waiting behind an earlier entry of their key
	// (Handler.OrderedByKey; 0 otherwise).
	KeyWaiting int
	// RetriesScheduled is the number of this consumer's failed entries waiting for their
	// backoff to end.
	RetriesScheduled int
	// Limited is the number of this consumer's entries parked by the handler's consumption
	// limit (Handler.Limit), waiting for it to admit them.
	Limited int
	// Pending is the group's pending entries, over all its consumers.
	Pending int64
	// Lag is the number of entries not yet delivered to the group, -1 when unknown. LagExact
	// tells whether it is the server's figure (XINFO GROUPS, Redis 7.0+) or a count of the
	// entries after the group's last-delivered id, capped at 10,000 (Redis 6.2, or
	// when Redis cannot compute the lag).
	Lag      int64
	LagExact bool
	// DeadLetters is the number of entries in the topic's dead-letter stream.
	DeadLetters int64
	// Scheduled is the number of the topic's delayed messages waiting for their due time,
	// as this handler's mover last saw it (every Delay.PollInterval at most); -1 when
	// unknown (no successful move yet, or Delay.Disabled).
	Scheduled int64
	// RefreshedAt is when Pending, Lag and DeadLetters were read.
	RefreshedAt time.Time
}

// lagCountCap caps the lag counted where the server reports none.
const lagCountCap = 10000

// Stats returns a snapshot of c's state. It sends nothing to Redis.
func (c *Consumer) Stats() Stats {
	c.mu.Lock()
	s := Stats{Consumer: c.name, Running: c.state == stateRunning, Paused: c.resume != nil}
	hs := c.handlers
	c.mu.Unlock()
	for _, h := range hs {
		hst := h.stats(s.Running, s.Paused)
		s.InFlight += hst.InFlight
		s.Handlers = append(s.Handlers, hst)
	}
	return s
}

// Healthy is a readiness check (a Kubernetes readiness probe, say): it returns nil when c is
// running, Redis answers a PING within ctx (2 s when ctx has no deadline), no handler's
// reads or dead-letter writes are failing and no handler's partition leases
// (Handler.OwnPartitions) are failing.
// Otherwise it returns an error saying why: ErrNotRunning before Start, ErrClosed once
// Close has begun, or the failures joined. A paused Consumer is healthy.
func (c *Consumer) Healthy(ctx context.Context) error {
	c.mu.Lock()
	state, paused, hs, owners := c.state, c.resume != nil, c.handlers, c.owners
	c.mu.Unlock()
	switch state {
	case stateNew:
		return ErrNotRunning
	case stateClosed:
		return ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	var errs []error
	if err := c.client.Do(ctx, c.client.B().Ping().Build()).Error(); err != nil {
		errs = append(errs, fmt.Errorf("stream: redis does not answer: %w", err))
	}
	if !paused {
		for _, h := range hs {
			if h.readsFailing() {
				errs = append(errs, fmt.Errorf("stream: reads of %s/%s are failing", h.topic, h.group))
			}
		}
	}
	for _, h := range hs {
		if n, failing := h.deadLettersFailing(); failing {
			errs = append(errs, fmt.Errorf("stream: dead-letter writes of %s/%s are failing (%d entries wait, pending, to be moved)", h.topic, h.group, n))
		}
	}
	for _, o := range owners {
		if err := o.failing(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
