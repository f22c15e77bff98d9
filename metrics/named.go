package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/failure"
	"github.com/redstream-go/redstream/internal/health"
)

// NamedLimiter wraps a redstream.Limiter under a name and counts its decisions:
// redis_streaming_rl_allowed_total{name="..."} and redis_streaming_rl_denied_total{name="..."}
// (the Java system's names), plus redis_streaming_rl_errors_total{name="..."} for calls whose
// backend failed or that returned an error, and redis_streaming_rl_shadow_denied_total{name="..."}
// for the denials of a limiter in shadow mode (redstream.Shadow), which were admitted and
// count as allowed too. The counters are created once, by [Named]: a
// decision adds one atomic increment and no allocation.
//
// Degradation is counted however Named and redstream.WithFailurePolicy are stacked: a
// decision a failure policy answered because the backend failed counts in
// redis_streaming_rl_errors_total and in
// redis_streaming_rl_fallback_total{name="...",reason="..."} (reason timeout, error,
// breaker_open or canceled), whether the policy wraps the NamedLimiter (the policy reports
// to the NamedLimiter it finds inside) or the NamedLimiter wraps the policy (Named
// subscribes to the policy when it is built). When the engine under it has a
// circuit breaker (a method BreakerState() redstream.BreakerState, as redisbackend's
// limiters have), Named exports its state as the gauge
// redis_streaming_rl_breaker_state{name="..."}: 0 closed, 1 half-open, 2 open.
//
// Two NamedLimiters with the same name share their counters, so a limiter rebuilt under its
// name (a configuration loaded again) continues its series; the breaker gauge reads the
// engine of the one built last. Limiters used side by side need distinct names:
// redstream.NewRegistry (and so config) refuses two under one name. A NamedLimiter is safe
// for concurrent use if the wrapped limiter is.
type NamedLimiter struct {
	name     string
	orig     redstream.Limiter // as given to Named, for Unwrap
	l        redstream.Limiter // orig, or a view of it reporting failures to n (Observe)
	allowed  *Counter
	denied   *Counter
	errs     *Counter
	shadow   *Counter // redis_streaming_rl_shadow_denied_total
	fallback *fallbackCounters
}

var _ failure.Observer = (*NamedLimiter)(nil)

// fallbackCounters are the redis_streaming_rl_fallback_total counters of one name, one
// per reason, made once so that counting a fallback allocates nothing.
type fallbackCounters struct {
	timeout, err, open, canceled *Counter
}

func newFallbackCounters(name string) *fallbackCounters {
	c := func(r failure.Reason) *Counter {
		return RateLimit.GetOrCreateCounter(Name(rateLimitFallbackTotal, "name", name, "reason", string(r)))
	}
	return &fallbackCounters{
		timeout:  c(failure.Timeout),
		err:      c(failure.Error),
		open:     c(failure.BreakerOpen),
		canceled: c(failure.Canceled),
	}
}

func (f *fallbackCounters) of(r failure.Reason) *Counter {
	switch r {
	case failure.Timeout:
		return f.timeout
	case failure.BreakerOpen:
		return f.open
	case failure.Canceled:
		return f.canceled
	}
	return f.err
}

// breakerReporter is what an engine with a circuit breaker offers.
type breakerReporter interface {
	BreakerState() redstream.BreakerState
}

// registerBreaker exports the breaker state of the engine under l, if it has one, as
// redis_streaming_rl_breaker_state{name}.
func registerBreaker(name string, l redstream.Limiter) {
	for u := l; u != nil; {
		if r, ok := u.(breakerReporter); ok {
			health.RegisterGauge(RateLimit, Name(rateLimitBreakerState, "name", name), r.BreakerState)
			return
		}
		w, ok := u.(interface{ Unwrap() redstream.Limiter })
		if !ok {
			return
		}
		u = w.Unwrap()
	}
}

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
	n := &NamedLimiter{name: name, orig: l, l: l, allowed: a, denied: d, errs: e,
		shadow: RateLimit.GetOrCreateCounter(Name(rateLimitShadowDeniedTotal, "name", name)), fallback: newFallbackCounters(name)}
	if v, ok := failure.View(l, (*outerObserver)(n)); ok {
		n.l = v.(redstream.Limiter)
	}
	registerBreaker(name, l)
	return n, nil
}

// Name returns the limiter's name.
func (n *NamedLimiter) Name() string { return n.name }

// Unwrap returns the wrapped limiter.
func (n *NamedLimiter) Unwrap() redstream.Limiter { return n.orig }

// ObserveFailure counts a decision that a failure policy wrapping this NamedLimiter
// answered after the NamedLimiter returned the backend's error (already counted in
// redis_streaming_rl_errors_total): redis_streaming_rl_fallback_total{name, reason}.
// redstream.WithFailurePolicy calls it; it is safe for concurrent use.
func (n *NamedLimiter) ObserveFailure(f failure.Failure) {
	n.fallback.of(f.Reason).Inc()
}

// outerObserver is how a NamedLimiter outside a failure policy hears of the failures the
// policy answers: it never saw the error, so it counts it too.
type outerObserver NamedLimiter

func (o *outerObserver) ObserveFailure(f failure.Failure) {
	o.errs.Inc()
	o.fallback.of(f.Reason).Inc()
}

// viewOf is the failure.View of a NamedLimiter: one counting as n does whose failure
// policy, if it wraps one, also reports to o.
func viewOf(l any, o failure.Observer) (any, bool) {
	n, ok := l.(*NamedLimiter)
	if !ok {
		return nil, false
	}
	v, ok := failure.View(n.l, o)
	if !ok {
		return nil, false
	}
	m := *n
	m.l = v.(redstream.Limiter)
	return &m, true
}

func init() { failure.RegisterView(viewOf) }

// AllowBatch decides keys with the wrapped limiter (in one call when it batches, see
// redstream.AllowBatch) and counts every key's outcome.
func (n *NamedLimiter) AllowBatch(ctx context.Context, keys []string, now time.Time, cost int64) ([]redstream.Decision, error) {
	ds, err := redstream.AllowBatch(ctx, n.l, keys, now, cost)
	if err != nil && len(ds) != len(keys) {
		n.errs.Add(len(keys))
		return ds, err
	}
	var be *redstream.BatchError
	if err != nil && !errors.As(err, &be) {
		n.errs.Add(len(keys))
		return ds, err
	}
	for i, d := range ds {
		var kerr error
		if be != nil && i < len(be.Errs) {
			kerr = be.Errs[i]
		}
		n.counter(d.Allowed, kerr).Inc()
		if d.Shadow && kerr == nil {
			n.shadow.Inc()
		}
	}
	return ds, err
}

// AllowN calls the wrapped limiter's AllowN and counts the outcome.
func (n *NamedLimiter) AllowN(ctx context.Context, key string, now time.Time, cost int64) (redstream.Decision, error) {
	d, err := n.l.AllowN(ctx, key, now, cost)
	n.counter(d.Allowed, err).Inc()
	if d.Shadow && err == nil {
		n.shadow.Inc()
	}
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
