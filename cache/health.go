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

// ticket is one Redis call the breaker let through: its ticket, and how long the caller's
// own deadline left it (0 without one).
type ticket struct {
	tk     health.Ticket
	budget time.Duration
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
		c.done(ctx, t.tk, nil)
		return nil
	}
	var rf *redisFailure
	if errors.As(err, &rf) {
		return err // already classified
	}
	if cerr := callerErr(ctx); cerr != nil {
		if t.budget >= minCallerBudget && errors.Is(cerr, context.DeadlineExceeded) && outage(err) {
			c.m.redisErrors.Inc()
			c.done(context.Background(), t.tk, err)
		} else {
			c.done(ctx, t.tk, err) // forgotten by the breaker: the caller gave up
		}
		return err
	}
	c.m.redisErrors.Inc()
	if outage(err) {
		c.done(ctx, t.tk, err)
	} else {
		c.done(ctx, t.tk, nil) // the server answered: it is up
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %v)", err, c.cfg.Timeout)
	}
	return &redisFailure{err: err}
}

// done reports a call's outcome to the breaker, if there is one.
func (c *Cache) done(ctx context.Context, tk health.Ticket, err error) {
	if c.health != nil {
		c.health.Done(ctx, tk, err)
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
// MetricFallbacks).
func fallbackReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, redstream.ErrCircuitOpen):
		return ReasonBreakerOpen
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	}
	return ReasonError
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

// gate asks the breaker whether a call for a caller whose context is ctx may go to Redis:
// it returns the ticket to give outcome, or an ErrUnavailable error wrapping
// redstream.ErrCircuitOpen.
func (c *Cache) gate(ctx context.Context) (ticket, error) {
	var t ticket
	if dl, ok := ctx.Deadline(); ok {
		t.budget = time.Until(dl)
	}
	if c.health == nil {
		return t, nil
	}
	var err error
	if t.tk, err = c.health.Allow(); err != nil {
		return t, &redisFailure{err: fmt.Errorf("cache: %w", err)}
	}
	return t, nil
}

// newBreaker returns the cache's circuit breaker (nil with Breaker.Disabled). Its state is
// exported as MetricBreakerState; each change goes to the log (one Warn when Redis starts
// failing, one Info when it works again) and to Breaker.OnStateChange.
func (c *Cache) newBreaker() (*health.Breaker, error) {
	b := c.cfg.Breaker
	gauge := MetricBreakerState + `{name="` + escapeLabel(c.cfg.Name) + `"}`
	if b.Disabled {
		c.m.set.NewGauge(gauge, func() float64 { return 0 })
		return nil, nil
	}
	degraded := "GetOrLoad and GetMany return the error (on-redis-error: error)"
	if c.cfg.OnRedisError == LoadOnError {
		degraded = "GetOrLoad and GetMany answer from the loader and cache nothing (on-redis-error: load)"
	}
	cfg := health.Config{
		Failures: b.Failures, ErrorRate: b.ErrorRate, MinCalls: b.MinCalls, Window: b.Window,
		CoolDown: b.CoolDown, Probes: b.Probes, Logger: c.log, Component: "cache",
		Degraded: degraded, Attrs: []slog.Attr{slog.String("cache", c.cfg.Name)}, OnFailure: b.OnFailure,
	}
	if f := b.OnStateChange; f != nil {
		name := c.cfg.Name
		cfg.OnStateChange = func(ch health.Change) {
			f(BreakerChange{Cache: name, From: ch.From, To: ch.To, Err: ch.Err, At: ch.At})
		}
	}
	br, err := health.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: Breaker: %w", err)
	}
	c.m.set.NewGauge(gauge, func() float64 { return float64(br.State()) })
	return br, nil
}

// BreakerChange is one transition of a Cache's circuit breaker, given to
// BreakerConfig.OnStateChange.
type BreakerChange struct {
	// Cache is Config.Name.
	Cache string
	// From and To are the states before and after.
	From, To redstream.BreakerState
	// Err is the Redis failure that opened the breaker; nil when it half-opens or closes.
	Err error
	// At is when the transition happened.
	At time.Time
}
