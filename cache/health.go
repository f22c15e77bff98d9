package cache

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/rueidis"
)

// redisFailure marks an error caused by Redis failing (see ErrUnavailable). Its message is
// the cause's; errors.Is matches both ErrUnavailable and the cause.
type redisFailure struct{ err error }

func (e *redisFailure) Error() string   { return e.err.Error() }
func (e *redisFailure) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// outcome classifies the error of a Redis call made for a caller whose context is ctx: nil
// and a nil reply are successes (nil is returned for both); an error after ctx ended is the
// caller's (returned as it is, not counted); any other error is a Redis failure, counted
// and reported to the breaker, and returned marked as such.
func (c *Cache) outcome(ctx context.Context, err error) error {
	if err == nil || rueidis.IsRedisNil(err) {
		c.health.success()
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	var rf *redisFailure
	if errors.As(err, &rf) {
		return err // already classified (the breaker refused the call)
	}
	c.m.redisErrors.Inc()
	if outage(err) {
		c.health.failure(err)
	} else {
		c.health.success() // the server answered: it is up
	}
	return &redisFailure{err: err}
}

// outage reports whether err says the server cannot serve at all (no reply, a timeout, or
// a state in which it answers nothing useful), as opposed to an error reply about one
// command (WRONGTYPE, OOM on a write) from a server that works. Only outages move the
// circuit breaker.
func outage(err error) bool {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

// fallbackReason names why a call was answered from the loader (the reason label of
// MetricFallbacks).
func fallbackReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, errBreakerOpen):
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

// gate asks the breaker whether a call may go to Redis; it returns nil, or the marked
// errBreakerOpen.
func (c *Cache) gate() error {
	if c.health.allow() {
		return nil
	}
	return &redisFailure{err: errBreakerOpen}
}
