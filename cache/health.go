package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/health"
)

// redisFailure marks an error caused by Redis failing (see ErrUnavailable). Its message is
// the cause's; errors.Is matches both ErrUnavailable and the cause.
type redisFailure struct{ err error }

func (e *redisFailure) Error() string   { return e.err.Error() }
func (e *redisFailure) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// ticket is one Redis call the breakers let through: the breaker of the master of its
// (first) key and its ticket, those of the other masters of a call spanning several, and
// how long the caller's own deadline left it (0 without one).
type ticket struct {
	br     *health.Breaker // nil without a breaker
	tk     health.Ticket
	more   []nodeTicket
	budget time.Duration
}

// nodeTicket is the ticket of one more master of a call.
type nodeTicket struct {
	br *health.Breaker
	tk health.Ticket
}

// minCallerBudget is the least time a caller's own deadline must have left a Redis call
// for its expiry to count as a failure of Redis (as in redisbackend): ten times a healthy
// call. A caller whose deadline was nearly spent says nothing about Redis; one with 50ms
// that a hung server let pass does, or callers with deadlines shorter than Timeout would
// never open the breaker.
const minCallerBudget = 10 * time.Millisecond

// outcome classifies the error of a Redis call the breaker let through (t), made for a
// caller whose context is ctx (context.Background() for writes no caller waits for): nil
// and a nil reply are successes (nil is returned for both); an error after ctx ended is
// the caller's and returned as it is, not counted, except that an outage outliving the
// caller's own deadline of at least minCallerBudget counts for the breaker; any other
// error is a Redis failure, counted, reported to the breaker when it is an outage, and
// returned marked as such.
func (c *Cache) outcome(ctx context.Context, t ticket, err error) error {
	if err == nil || rueidis.IsRedisNil(err) {
		c.done(ctx, t, nil)
		return nil
	}
	var rf *redisFailure
	if errors.As(err, &rf) {
		return err // already classified
	}
	if cerr := callerErr(ctx); cerr != nil {
		if t.budget >= minCallerBudget && errors.Is(cerr, context.DeadlineExceeded) && outage(err) {
			c.m.redisErrors.Inc()
			c.done(context.Background(), t, err)
		} else {
			c.done(ctx, t, err) // forgotten by the breaker: the caller gave up
		}
		return err
	}
	c.m.redisErrors.Inc()
	if outage(err) {
		c.done(ctx, t, err)
	} else {
		c.done(ctx, t, nil) // the server answered: it is up
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %v)", err, c.cfg.Timeout)
	}
	return &redisFailure{err: err}
}

// done reports a call's outcome to its breakers, if there are. A failure of a call that
// spanned several masters counts for the one the error names (a refused or reset
// connection names its address) and is forgotten by the others; one that names none (a
// timeout, an EOF) is forgotten by all: it cannot be told which master failed, and
// counting it for every one would fail fast the keys of healthy masters.
func (c *Cache) done(ctx context.Context, t ticket, err error) {
	if t.br == nil {
		return
	}
	if err == nil || len(t.more) == 0 {
		t.br.Done(ctx, t.tk, err)
		for _, m := range t.more {
			m.br.Done(ctx, m.tk, err)
		}
		return
	}
	named := c.health.ForNode(health.NodeOf(err))
	for _, m := range append(t.more, nodeTicket{t.br, t.tk}) {
		if m.br == named {
			m.br.Done(ctx, m.tk, err)
		} else {
			m.br.Forget(m.tk)
		}
	}
}

// outage reports whether err says the server cannot serve at all (no reply, a timeout, or
// an error reply of a server that cannot serve now), as opposed to an error reply about one
// command (WRONGTYPE, a script error) from a server that works. Only outages move the
// circuit breaker. Unlike the limiters, OOM is not an outage for the cache: a server out of
// memory still serves the reads, and a failed write-back only costs a reload.
func outage(err error) bool {
	if re, ok := rueidis.IsRedisErr(err); ok {
		code, _, _ := strings.Cut(re.Error(), " ")
		switch code {
		case "LOADING", "BUSY", "READONLY", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN",
			"NOREPLICAS", "MISCONF", "NOAUTH", "WRONGPASS", "NOPERM", "UNBLOCKED":
			return true
		}
		return strings.Contains(re.Error(), "max number of clients")
	}
	return true
}

// fallbackReason names why a call was answered from the loader (the reason label of
// metricFallbacks).
func fallbackReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, redstream.ErrCircuitOpen):
		return reasonBreakerOpen
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return reasonTimeout
	}
	return reasonError
}

// fallsBack reports whether err, returned for a caller whose context is ctx, is answered
// from the loader: the policy is LoadOnError, ctx is alive and err is a Redis failure.
func (c *Cache) fallsBack(ctx context.Context, err error) bool {
	return c.cfg.OnRedisError == LoadOnError && callerErr(ctx) == nil && errors.Is(err, ErrUnavailable)
}

// callerErr returns ctx's error, or DeadlineExceeded once its deadline has passed even if
// its timer has not fired yet: rueidis bounds a call by the connection's deadline, set to
// the context's, and the I/O timeout can come back a moment before ctx reports it.
func callerErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// gate asks the breakers of the masters serving keys (the Redis keys of the call; one
// breaker for a single server) whether a call for a caller whose context is ctx may go to
// Redis: it returns the ticket to give outcome, or an ErrUnavailable error wrapping
// redstream.ErrCircuitOpen when any of them is open (the call needs that master).
func (c *Cache) gate(ctx context.Context, keys ...string) (ticket, error) {
	var t ticket
	if dl, ok := ctx.Deadline(); ok {
		t.budget = time.Until(dl)
	}
	if c.health == nil || len(keys) == 0 {
		return t, nil
	}
	br := c.health.For(keys[0])
	tk, err := br.Allow()
	if err != nil {
		return t, &redisFailure{err: fmt.Errorf("cache: %w", err)}
	}
	t.br, t.tk = br, tk
	if br == c.health.Default() && c.health.Single() {
		return t, nil
	}
next:
	for _, k := range keys[1:] {
		br := c.health.Of(k)
		if br == t.br {
			continue
		}
		for _, m := range t.more {
			if m.br == br {
				continue next
			}
		}
		tk, err := br.Allow()
		if err != nil {
			t.br.Forget(t.tk)
			for _, m := range t.more {
				m.br.Forget(m.tk)
			}
			return ticket{budget: t.budget}, &redisFailure{err: fmt.Errorf("cache: %w", err)}
		}
		t.more = append(t.more, nodeTicket{br, tk})
	}
	return t, nil
}

// newBreaker returns the cache's circuit breakers (nil with Breaker.Disabled): one per
// master on a Redis Cluster, one for a single server. Their worst state is exported as
// metricBreakerState; each change goes to the log (one Warn when a node starts failing,
// one Info when it works again) and to Breaker.OnStateChange.
func (c *Cache) newBreaker() (*health.Set, error) {
	b := c.cfg.Breaker
	gauge := metricBreakerState + `{name="` + escapeLabel(c.cfg.Name) + `"}`
	if b.Disabled {
		c.m.set.NewGauge(gauge, func() float64 { return 0 })
		return nil, nil
	}
	degraded := "GetOrLoad and GetMany return the error (on-redis-error: error)"
	if c.cfg.OnRedisError == LoadOnError {
		degraded = "GetOrLoad and GetMany answer from the loader and cache nothing (on-redis-error: load)"
	}
	cfg := health.Config{BreakerOptions: b, Logger: c.log, Component: "cache", Degraded: degraded,
		Attrs: []slog.Attr{slog.String("cache", c.cfg.Name)}}
	client := c.client
	br, err := health.NewSet(cfg, health.ClusterLookup(func() (rueidis.Client, error) { return client, nil }))
	if err != nil {
		return nil, fmt.Errorf("cache: Breaker: %w", err)
	}
	c.m.set.NewGauge(gauge, func() float64 { return float64(br.State()) })
	return br, nil
}
