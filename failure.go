package redstream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// FailurePolicy declares what a limiter does when its backend fails (Redis down, timeout,
// script error). Bad input (ErrEmptyKey, ErrInvalidCost, ErrCostTooLarge, ErrInvalidTime)
// is never subject to the policy: it is always returned as an error.
type FailurePolicy int

const (
	// FailClosed, the default, returns the backend error with a denied Decision.
	FailClosed FailurePolicy = iota
	// FailOpen admits the request (an allowed Decision, nil error) when the backend fails.
	FailOpen
	// FailFallback decides with a fallback limiter (typically an in-process memory engine
	// with the same Spec) when the backend fails.
	FailFallback
)

// String returns "fail-closed", "fail-open" or "fallback".
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailFallback:
		return "fallback"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// ErrCircuitOpen is returned, wrapped, by an engine whose circuit breaker is open: its
// backend failed repeatedly, and until the breaker's cool-down ends calls fail at once
// without reaching the backend. It is a backend failure: failure policies apply to it.
var ErrCircuitOpen = errors.New("redstream: circuit breaker open")

// BreakerState is the state of a backend's circuit breaker. The zero value is
// BreakerClosed. Values are ordered by severity, so a gauge of the state reads 0 when
// healthy.
type BreakerState int32

const (
	// BreakerClosed: the backend is healthy; every call reaches it.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: the cool-down after a failure is over; a few probe calls reach
	// the backend, the others fail with ErrCircuitOpen until a probe succeeds (closed) or
	// fails (open again).
	BreakerHalfOpen
	// BreakerOpen: the backend failed; calls fail at once with ErrCircuitOpen until the
	// cool-down ends.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// IsBadInput reports whether err is caused by the caller's arguments rather than by the
// backend, in which case no failure policy applies.
func IsBadInput(err error) bool {
	return errors.Is(err, ErrEmptyKey) || errors.Is(err, ErrInvalidCost) ||
		errors.Is(err, ErrCostTooLarge) || errors.Is(err, ErrInvalidTime) || errors.Is(err, ErrInvalidConfig)
}

// WithFailurePolicy wraps l so that backend errors follow policy. fallback is required for
// FailFallback and must be nil otherwise. The returned limiter is safe for concurrent use
// if l and fallback are.
func WithFailurePolicy(l Limiter, policy FailurePolicy, fallback Limiter) (Limiter, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil limiter", ErrInvalidConfig)
	}
	switch policy {
	case FailClosed, FailOpen:
		if fallback != nil {
			return nil, fmt.Errorf("%w: a fallback limiter is only used with FailFallback", ErrInvalidConfig)
		}
	case FailFallback:
		if fallback == nil {
			return nil, fmt.Errorf("%w: FailFallback needs a fallback limiter", ErrInvalidConfig)
		}
	default:
		return nil, fmt.Errorf("%w: unknown failure policy %d", ErrInvalidConfig, int(policy))
	}
	if policy == FailClosed {
		return l, nil
	}
	return &policyLimiter{l: l, policy: policy, fallback: fallback}, nil
}

type policyLimiter struct {
	l        Limiter
	policy   FailurePolicy
	fallback Limiter
}

func (p *policyLimiter) Allow(ctx context.Context, key string) (Decision, error) {
	return p.AllowN(ctx, key, time.Time{}, 1)
}

func (p *policyLimiter) AllowAt(ctx context.Context, key string, now time.Time) (Decision, error) {
	return p.AllowN(ctx, key, now, 1)
}

func (p *policyLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (Decision, error) {
	d, err := p.l.AllowN(ctx, key, now, n)
	if err == nil || IsBadInput(err) {
		return d, err
	}
	if p.policy == FailOpen {
		return Decision{Allowed: true}, nil
	}
	// The fallback has its own state; a cancelled context still lets it decide, since it
	// does no I/O in the usual (memory) case.
	return p.fallback.AllowN(context.WithoutCancel(ctx), key, now, n)
}

// Unwrap returns the limiter whose backend errors the policy handles.
func (p *policyLimiter) Unwrap() Limiter { return p.l }

// FailurePolicy returns the policy applied to backend errors.
func (p *policyLimiter) FailurePolicy() FailurePolicy { return p.policy }
