package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
)

// NamedLimiter wraps a redstream.Limiter under a name and counts its decisions:
// redis_streaming_rl_allowed_total{name="..."} and redis_streaming_rl_denied_total{name="..."}
// (the Java system's names), plus redis_streaming_rl_errors_total{name="..."} for calls that
// returned an error. The counters are created once, by [Named]: a decision adds one atomic
// increment and no allocation.
//
// Two NamedLimiters with the same name share their counters. A NamedLimiter is safe for
// concurrent use if the wrapped limiter is.
type NamedLimiter struct {
	name    string
	l       redstream.Limiter
	allowed *Counter
	denied  *Counter
	errs    *Counter
}

var _ redstream.Limiter = (*NamedLimiter)(nil)

// Named returns l wrapped under name. It returns an error wrapping redstream.ErrInvalidConfig for an
// empty name or a nil l.
func Named(name string, l redstream.Limiter) (*NamedLimiter, error) {
	if name == "" {
		return nil, fmt.Errorf("metrics: Named: %w: empty name", redstream.ErrInvalidConfig)
	}
	if l == nil {
		return nil, fmt.Errorf("metrics: Named(%q): %w: nil limiter", name, redstream.ErrInvalidConfig)
	}
	a, d, e := RateLimitCounters(name)
	return &NamedLimiter{name: name, l: l, allowed: a, denied: d, errs: e}, nil
}

// Name returns the limiter's name.
func (n *NamedLimiter) Name() string { return n.name }

// Unwrap returns the wrapped limiter.
func (n *NamedLimiter) Unwrap() redstream.Limiter { return n.l }

// Allow calls the wrapped limiter's Allow and counts the outcome.
func (n *NamedLimiter) Allow(ctx context.Context, key string) (redstream.Decision, error) {
	d, err := n.l.Allow(ctx, key)
	n.counter(d.Allowed, err).Inc()
	return d, err
}

// AllowAt calls the wrapped limiter's AllowAt and counts the outcome.
func (n *NamedLimiter) AllowAt(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	d, err := n.l.AllowAt(ctx, key, now)
	n.counter(d.Allowed, err).Inc()
	return d, err
}

// AllowN calls the wrapped limiter's AllowN and counts the outcome.
func (n *NamedLimiter) AllowN(ctx context.Context, key string, now time.Time, cost int64) (redstream.Decision, error) {
	d, err := n.l.AllowN(ctx, key, now, cost)
	n.counter(d.Allowed, err).Inc()
	return d, err
}

// counter returns the counter of an outcome. It is small enough to be inlined, so a
// decision costs one branch and one atomic increment.
func (n *NamedLimiter) counter(allowed bool, err error) *Counter {
	if err != nil {
		return n.errs
	}
	if allowed {
		return n.allowed
	}
	return n.denied
}
