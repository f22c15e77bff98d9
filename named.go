package redstream

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/metrics"
)

// NamedLimiter wraps a Limiter under a name and counts its decisions in package metrics:
// redis_streaming_rl_allowed_total{name="..."} and redis_streaming_rl_denied_total{name="..."}
// (the Java system's names), plus redis_streaming_rl_errors_total{name="..."} for calls that
// returned an error. The counters are created once, by [Named]: a decision adds one atomic
// increment and no allocation.
//
// Two NamedLimiters with the same name share their counters. A NamedLimiter is safe for
// concurrent use if the wrapped limiter is.
type NamedLimiter struct {
	name    string
	l       Limiter
	allowed *metrics.Counter
	denied  *metrics.Counter
	errs    *metrics.Counter
}

var _ Limiter = (*NamedLimiter)(nil)

// Named returns l wrapped under name. It returns an error wrapping ErrInvalidConfig for an
// empty name or a nil l.
func Named(name string, l Limiter) (*NamedLimiter, error) {
	if name == "" {
		return nil, fmt.Errorf("redstream: Named: %w: empty name", ErrInvalidConfig)
	}
	if l == nil {
		return nil, fmt.Errorf("redstream: Named(%q): %w: nil limiter", name, ErrInvalidConfig)
	}
	a, d, e := metrics.RateLimitCounters(name)
	return &NamedLimiter{name: name, l: l, allowed: a, denied: d, errs: e}, nil
}

// Name returns the limiter's name.
func (n *NamedLimiter) Name() string { return n.name }

// Unwrap returns the wrapped limiter.
func (n *NamedLimiter) Unwrap() Limiter { return n.l }

// Allow calls the wrapped limiter's Allow and counts the outcome.
func (n *NamedLimiter) Allow(ctx context.Context, key string) (Decision, error) {
	d, err := n.l.Allow(ctx, key)
	n.counter(d.Allowed, err).Inc()
	return d, err
}

// AllowAt calls the wrapped limiter's AllowAt and counts the outcome.
func (n *NamedLimiter) AllowAt(ctx context.Context, key string, now time.Time) (Decision, error) {
	d, err := n.l.AllowAt(ctx, key, now)
	n.counter(d.Allowed, err).Inc()
	return d, err
}

// AllowN calls the wrapped limiter's AllowN and counts the outcome.
func (n *NamedLimiter) AllowN(ctx context.Context, key string, now time.Time, cost int64) (Decision, error) {
	d, err := n.l.AllowN(ctx, key, now, cost)
	n.counter(d.Allowed, err).Inc()
	return d, err
}

// counter returns the counter of an outcome. It is small enough to be inlined, so a
// decision costs one branch and one atomic increment.
func (n *NamedLimiter) counter(allowed bool, err error) *metrics.Counter {
	if err != nil {
		return n.errs
	}
	if allowed {
		return n.allowed
	}
	return n.denied
}
