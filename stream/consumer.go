package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

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
	if strings.TrimSpace(name) == "" {
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
		if err := h.createGroup(ctx); err != nil {
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
	return c.drain(ctx)
}

// drain stops a running consumer that had handlers (Close): reads end, the handlers finish
// within the drain time, and every goroutine exits within the I/O deadline.
func (c *Consumer) drain(ctx context.Context) error {
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
		cut = c.inFlight() > 0
		c.hardStop() // queued entries not started by now stay pending
	case <-ctx.Done():
		cut = c.inFlight() > 0
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
	n := c.inFlight()
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
