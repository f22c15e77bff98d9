package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
)

// Defaults of ConnectOptions.
const (
	// DefaultAttemptTimeout bounds one attempt of a Connector to make its client.
	DefaultAttemptTimeout = 2 * time.Second
	// DefaultMinBackoff is the pause after a Connector's first failed attempt; it doubles
	// after each failure, up to DefaultMaxBackoff.
	DefaultMinBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff is the longest pause between two attempts of a Connector.
	DefaultMaxBackoff = 5 * time.Second
)

// ConnectOptions configures a Connector. The zero value is valid.
type ConnectOptions struct {
	// AttemptTimeout bounds each attempt (default DefaultAttemptTimeout). An attempt
	// still running then is abandoned: the next one starts after the backoff, and a
	// client the abandoned attempt makes later is closed.
	AttemptTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause between attempts, which doubles after
	// each failure from MinBackoff up to MaxBackoff, with up to 20% random jitter
	// (defaults DefaultMinBackoff, DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Logger receives one Warn when the first attempt fails (with the error) and one Info
	// when the client is made (default slog.Default()); the attempts in between log
	// nothing.
	Logger *slog.Logger
}

// Connector makes the rueidis client of its engines in the background, so that a service
// can start while Redis is down: rueidis.NewClient dials at once and fails when no server
// answers, which would otherwise make the service fail at start. Until a client is made,
// the calls of the Connector's engines fail at once with an error wrapping
// ErrNotConnected, a backend failure: wrapped in redstream.WithFailurePolicy, a limiter
// answers with its policy (with FailFallback, an in-process limiter of the same specs).
// Once the client is made, every engine of the Connector uses it.
//
// The Connector owns the client it makes: Close closes it. A Connector is safe for
// concurrent use.
type Connector struct {
	newClient func(context.Context) (rueidis.Client, error)
	opts      ConnectOptions
	log       *slog.Logger

	conn    atomic.Pointer[connected]
	lastErr atomic.Pointer[error]
	ready   chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	closeOnce sync.Once
}

type connected struct {
	client rueidis.Client
	caps   *caps
}

// Connect returns a Connector that calls newClient (for example a function calling
// rueidis.NewClient with the service's options) until it returns a client: at once, then
// after each failure with exponential backoff. The ctx given to newClient ends at the
// attempt's deadline (ConnectOptions.AttemptTimeout). It returns an error wrapping
// redstream.ErrInvalidConfig for a nil newClient or bad options.
func Connect(newClient func(ctx context.Context) (rueidis.Client, error), opts ConnectOptions) (*Connector, error) {
	if newClient == nil {
		return nil, fmt.Errorf("redisbackend: Connect: %w: nil newClient", errInvalidConfig)
	}
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	switch {
	case opts.AttemptTimeout < 0:
		return nil, fmt.Errorf("redisbackend: Connect: %w: AttemptTimeout = %v, want > 0", errInvalidConfig, opts.AttemptTimeout)
	case opts.MinBackoff < 0:
		return nil, fmt.Errorf("redisbackend: Connect: %w: MinBackoff = %v, want > 0", errInvalidConfig, opts.MinBackoff)
	case opts.MaxBackoff < opts.MinBackoff:
		return nil, fmt.Errorf("redisbackend: Connect: %w: MaxBackoff = %v is below MinBackoff = %v", errInvalidConfig, opts.MaxBackoff, opts.MinBackoff)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Connector{newClient: newClient, opts: opts, log: log, ready: make(chan struct{}),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go c.run()
	return c, nil
}

// run makes attempts until one succeeds or the Connector is closed.
func (c *Connector) run() {
	defer close(c.done)
	backoff := c.opts.MinBackoff
	for failures := 0; ; failures++ {
		client, err := c.attempt()
		if err == nil {
			c.conn.Store(&connected{client: client, caps: capsOf(client)})
			close(c.ready)
			c.log.LogAttrs(c.ctx, slog.LevelInfo, "redisbackend: Connector: connected to Redis", slog.Int("failed_attempts", failures))
			return
		}
		if c.ctx.Err() != nil {
			return
		}
		c.lastErr.Store(&err)
		if failures == 0 {
			c.log.LogAttrs(c.ctx, slog.LevelWarn, "redisbackend: Connector: cannot connect to Redis yet; retrying in the background, engines fail with ErrNotConnected meanwhile",
				slog.Any("error", err))
		}
		pause := backoff + time.Duration(rand.Int64N(int64(backoff)/5+1))
		backoff = min(2*backoff, c.opts.MaxBackoff)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
	}
}

// attempt runs newClient once, giving up at the attempt's deadline.
func (c *Connector) attempt() (rueidis.Client, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.AttemptTimeout)
	defer cancel()
	type result struct {
		client rueidis.Client
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.err = fmt.Errorf("newClient panicked: %v", p)
				}
			}()
			r.client, r.err = c.newClient(ctx)
		}()
		if r.err == nil && r.client == nil {
			r.err = errors.New("newClient returned a nil client")
		}
		ch <- r
	}()
	select {
	case r := <-ch:
		if r.err != nil && r.client != nil {
			r.client.Close()
		}
		return r.client, r.err
	case <-ctx.Done():
		go func() { // close the client of an abandoned attempt
			if r := <-ch; r.client != nil {
				r.client.Close()
			}
		}()
		if c.ctx.Err() != nil {
			return nil, c.ctx.Err()
		}
		return nil, fmt.Errorf("attempt abandoned after %v: %w", c.opts.AttemptTimeout, ctx.Err())
	}
}

// get returns the client, or an error wrapping ErrNotConnected.
func (c *Connector) get() (rueidis.Client, *caps, error) {
	if k := c.conn.Load(); k != nil {
		return k.client, k.caps, nil
	}
	if c.ctx.Err() != nil {
		return nil, nil, fmt.Errorf("%w: the Connector is closed", ErrNotConnected)
	}
	if e := c.lastErr.Load(); e != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotConnected, *e)
	}
	return nil, nil, ErrNotConnected
}

// Client returns the client, or nil until it is made.
func (c *Connector) Client() rueidis.Client {
	if k := c.conn.Load(); k != nil {
		return k.client
	}
	return nil
}

// Ready returns a channel closed once the client is made.
func (c *Connector) Ready() <-chan struct{} { return c.ready }

// Wait returns the client once it is made, or ctx's error first.
func (c *Connector) Wait(ctx context.Context) (rueidis.Client, error) {
	select {
	case <-c.ready:
		return c.Client(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		if cl := c.Client(); cl != nil {
			return cl, nil
		}
		return nil, fmt.Errorf("%w: the Connector is closed", ErrNotConnected)
	}
}

// Close stops the attempts and closes the client, if one was made; the Connector's
// engines then fail with ErrNotConnected or the client's closed error. It is idempotent.
func (c *Connector) Close() {
	c.closeOnce.Do(func() {
		c.cancel()
		<-c.done
		if k := c.conn.Load(); k != nil {
			k.client.Close()
		}
	})
}

// NewLimiter returns a limiter of spec on the Connector's client, as the package's
// NewLimiter does; until the client is made, its decisions fail with ErrNotConnected.
func (c *Connector) NewLimiter(spec redstream.Spec, opts Options) (*Limiter, error) {
	l, err := newSingle(spec, opts)
	if err != nil {
		return nil, err
	}
	l.link = link{conn: c}
	l.g.bind(l.link)
	return l, nil
}

// NewMultiLimiter returns an all-or-nothing limiter of specs on the Connector's client,
// as the package's NewMultiLimiter does.
func (c *Connector) NewMultiLimiter(specs []redstream.Spec, opts Options) (*Limiter, error) {
	l, err := newMulti(specs, opts)
	if err != nil {
		return nil, err
	}
	l.link = link{conn: c}
	l.g.bind(l.link)
	return l, nil
}

// NewDeduplicator returns the deduplicator of spec.Strategy named name on the Connector's
// client, as the package's NewDeduplicator does; until the client is made, its calls fail
// with ErrNotConnected.
func (c *Connector) NewDeduplicator(name string, spec redstream.DedupSpec, opts DedupOptions) (redstream.Deduplicator, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("redisbackend: %w", err)
	}
	kind := map[redstream.DedupStrategy]string{redstream.DedupSet: "set", redstream.DedupBloom: "bloom"}[spec.Strategy]
	if kind == "" {
		kind = "window"
	}
	b, err := newDedupBaseOf(name, kind, opts)
	if err != nil {
		return nil, err
	}
	b.link = link{conn: c}
	b.g.bind(b.link)
	if opts.JavaCompatible && spec.Strategy != redstream.DedupSet {
		_, err := javaDedupKey(name, spec.Strategy, opts) // the error: no shared Java layout
		return nil, err
	}
	switch spec.Strategy {
	case redstream.DedupSet:
		return newSetDedup(b, opts)
	case redstream.DedupBloom:
		return newBloomDedup(b, spec)
	}
	return newWindowDedup(b, spec.WithDefaults().Window)
}
