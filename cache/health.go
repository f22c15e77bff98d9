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

// outcome classifies the error of a Redis call that the breaker let through with ticket
// tk, made for a caller whose context is ctx: nil and a nil reply are successes (nil is
// returned for both); an error after ctx ended is the caller's (returned as it is, not
// counted); any other error is a Redis failure, counted, reported to the breaker when it
// is an outage, and returned marked as such.
func (c *Cache) outcome(ctx context.Context, tk health.Ticket, err error) error {
	if err == nil || rueidis.IsRedisNil(err) {
		c.done(ctx, tk, nil)
		return nil
	}
	if ctx.Err() != nil {
		c.done(ctx, tk, err) // forgotten by the breaker: the caller gave up
		return err
	}
	var rf *redisFailure
	if errors.As(err, &rf) {
		return err // already classified
	}
	c.m.redisErrors.Inc()
	if outage(err) {
		c.done(ctx, tk, err)
	} else {
		c.done(ctx, tk, nil) // the server answered: it is up
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
	return c.cfg.OnRedisError == LoadOnError && ctx.Err() == nil && errors.Is(err, ErrUnavailable)
}

// gate asks the breaker whether a call may go to Redis: it returns the ticket to give
// outcome, or an ErrUnavailable error wrapping redstream.ErrCircuitOpen.
func (c *Cache) gate() (health.Ticket, error) {
	if c.health == nil {
		return health.Ticket{}, nil
	}
	tk, err := c.health.Allow()
	if err != nil {
		return tk, &redisFailure{err: fmt.Errorf("cache: %w", err)}
	}
	return tk, nil
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
