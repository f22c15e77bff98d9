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
// backend, in which case no failure policy applies: ErrEmptyKey, ErrInvalidCost,
// ErrCostTooLarge, ErrInvalidTime, ErrInvalidConfig, or an error of an engine with a
// method BadInput() bool that returns true (redisbackend.ErrTooLarge).
func IsBadInput(err error) bool {
	if errors.Is(err, ErrEmptyKey) || errors.Is(err, ErrInvalidCost) ||
		errors.Is(err, ErrCostTooLarge) || errors.Is(err, ErrInvalidTime) || errors.Is(err, ErrInvalidConfig) {
		return true
	}
	return badInput(err)
}

// badInput reports whether err or an error it wraps has a BadInput method returning true.
// It walks the chain itself: errors.As would allocate its target on every failure.
func badInput(err error) bool {
	for err != nil {
		if b, ok := err.(interface{ BadInput() bool }); ok && b.BadInput() {
			return true
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if badInput(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// FailureReason says why a backend call failed, as the label of a fallback metric.
type FailureReason string

// The failure reasons ReasonOf tells apart.
const (
	// ReasonTimeout: the backend did not answer within the engine's deadline (for example
	// redisbackend's Options.Timeout) or the caller's.
	ReasonTimeout FailureReason = "timeout"
	// ReasonBreakerOpen: the engine's circuit breaker is open, so the backend was not
	// called (ErrCircuitOpen).
	ReasonBreakerOpen FailureReason = "breaker_open"
	// ReasonCanceled: the caller cancelled its context.
	ReasonCanceled FailureReason = "canceled"
	// ReasonError: any other backend failure (connection refused, an error reply).
	ReasonError FailureReason = "error"
)

// ReasonOf classifies a backend error: ReasonBreakerOpen for ErrCircuitOpen,
// ReasonTimeout for context.DeadlineExceeded, ReasonCanceled for context.Canceled,
// ReasonError otherwise (and for nil).
func ReasonOf(err error) FailureReason {
	switch {
	case errors.Is(err, ErrCircuitOpen):
		return ReasonBreakerOpen
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	}
	return ReasonError
}

// Failure is one decision a failure policy answered because the backend failed.
type Failure struct {
	// Policy is the policy that answered (FailOpen or FailFallback).
	Policy FailurePolicy
	// Reason classifies Err (ReasonOf).
	Reason FailureReason
	// Err is the backend's error.
	Err error
}

// FailureObserver is told of every decision a failure policy answered instead of the
// backend. metrics.Named implements it to count redis_streaming_rl_fallback_total and
// backend errors. ObserveFailure is called synchronously on the deciding goroutine; it
// must be fast and safe for concurrent use.
type FailureObserver interface {
	ObserveFailure(Failure)
}

// Observable is implemented by the limiter WithFailurePolicy returns and by wrappers that
// pass it on ([MultiLimiter], metrics.Named). Observe returns a limiter that decides
// exactly as this one, over the same state and fallback, and also tells o of every
// decision the failure policy answered. It is how a wrapper outside the policy (metrics
// around WithFailurePolicy) learns of failures the policy hides from it, at no cost per
// decision: Observe is called once, when the wrapper is built.
type Observable interface {
	Observe(o FailureObserver) Limiter
}

// BatchLimiter is implemented by limiters that decide many keys in one call (the Redis
// engine pipelines them in one round trip). AllowBatch decides a request of cost n for
// each of keys at now; decision i is for keys[i]. Bad input returns an error and no
// decision. When the backend fails for some keys, the error is a *BatchError giving each
// key's error, and the decisions of those keys are denied zero values. The limiter
// WithFailurePolicy returns, MultiLimiter and metrics.Named implement it over any limiter
// (one AllowN per key when the wrapped limiter does not batch).
type BatchLimiter interface {
	Limiter
	AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]Decision, error)
}

// BatchError reports the keys of a batch decision whose backend call failed. Errs has one
// entry per key of the batch: nil for a key that was decided, the error otherwise.
// errors.Is and errors.As look into every key's error.
type BatchError struct {
	Errs []error
}

// Failed returns the number of keys whose decision failed.
func (e *BatchError) Failed() int {
	n := 0
	for _, err := range e.Errs {
		if err != nil {
			n++
		}
	}
	return n
}

// Error reports how many keys failed and the first failure.
func (e *BatchError) Error() string {
	for i, err := range e.Errs {
		if err != nil {
			return fmt.Sprintf("redstream: batch: %d of %d decisions failed; key %d: %v", e.Failed(), len(e.Errs), i, err)
		}
	}
	return fmt.Sprintf("redstream: batch: 0 of %d decisions failed", len(e.Errs))
}

// Unwrap returns the errors of the keys that failed.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// WithFailurePolicy wraps l so that backend errors follow policy; it is the one place
// redstream applies a failure policy. Under FailFallback, fallback decides while the
// backend fails; a nil fallback means an in-process limiter of l's specs, made by the
// engine (the Redis engine provides it: an in-process limiter of the same spec or specs,
// found through l's Unwrap chain by a method NewLocal() (Limiter, error)). The fallback
// keeps its own state, per process: N replicas in fallback admit up to N times the limit
// between them. fallback must be nil for FailClosed and FailOpen.
//
// Under FailClosed l is returned as is: a backend error is returned with a denied
// Decision. Bad input (IsBadInput) is never subject to the policy.
//
// The returned limiter also implements [BatchLimiter] (per key: the keys whose backend
// call failed follow the policy, the others keep the backend's decision) and
// [Observable]. Decisions the policy answers are reported to every [FailureObserver]
// found in l's Unwrap chain (a metrics.Named inside counts them) and to the observers
// given to Observe. It is safe for concurrent use if l and fallback are.
func WithFailurePolicy(l Limiter, policy FailurePolicy, fallback Limiter) (Limiter, error) {
	if l == nil {
		return nil, fmt.Errorf("redstream: WithFailurePolicy: %w: nil limiter", ErrInvalidConfig)
	}
	switch policy {
	case FailClosed, FailOpen:
		if fallback != nil {
			return nil, fmt.Errorf("redstream: WithFailurePolicy: %w: a fallback limiter is only used with FailFallback", ErrInvalidConfig)
		}
	case FailFallback:
		if fallback == nil {
			local, err := localOf(l)
			if err != nil {
				return nil, err
			}
			fallback = local
		}
	default:
		return nil, fmt.Errorf("redstream: WithFailurePolicy: %w: unknown failure policy %d", ErrInvalidConfig, int(policy))
	}
	if policy == FailClosed {
		return l, nil
	}
	p := &policyLimiter{l: l, policy: policy, fallback: fallback}
	for u := l; u != nil; u = unwrap(u) {
		if o, ok := u.(FailureObserver); ok {
			p.observers = append(p.observers, o)
		}
	}
	return p, nil
}

// localOf returns the in-process limiter the engine under l offers as a fallback.
func localOf(l Limiter) (Limiter, error) {
	for u := l; u != nil; u = unwrap(u) {
		if e, ok := u.(interface{ NewLocal() (Limiter, error) }); ok {
			local, err := e.NewLocal()
			if err != nil {
				return nil, fmt.Errorf("redstream: WithFailurePolicy: fallback: %w", err)
			}
			return local, nil
		}
	}
	return nil, fmt.Errorf("redstream: WithFailurePolicy: %w: FailFallback needs a fallback limiter (%T offers no in-process one)", ErrInvalidConfig, l)
}

// unwrap returns the limiter l wraps, or nil.
func unwrap(l Limiter) Limiter {
	if u, ok := l.(interface{ Unwrap() Limiter }); ok {
		return u.Unwrap()
	}
	return nil
}

type policyLimiter struct {
	l         Limiter
	policy    FailurePolicy
	fallback  Limiter
	observers []FailureObserver // inside l (found by WithFailurePolicy), then from Observe
}

var (
	_ BatchLimiter = (*policyLimiter)(nil)
	_ Observable   = (*policyLimiter)(nil)
)

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
	p.observe(err)
	if p.policy == FailOpen {
		return Decision{Allowed: true}, nil
	}
	// The fallback has its own state; a cancelled context still lets it decide, since it
	// does no I/O in the usual (memory) case.
	return p.fallback.AllowN(context.WithoutCancel(ctx), key, now, n)
}

// AllowBatch decides keys with l's AllowBatch when l batches (one AllowN per key
// otherwise); the keys whose backend call failed follow the policy.
func (p *policyLimiter) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]Decision, error) {
	ds, err := AllowBatch(ctx, p.l, keys, now, n)
	if err == nil || IsBadInput(err) && !isBatchError(err) {
		return ds, err
	}
	var be *BatchError
	if !errors.As(err, &be) || len(be.Errs) != len(keys) || len(ds) != len(keys) {
		// The whole batch failed: every key follows the policy.
		be = &BatchError{Errs: make([]error, len(keys))}
		for i := range be.Errs {
			be.Errs[i] = err
		}
		ds = make([]Decision, len(keys))
	}
	var left []error
	var failed []int
	for i, kerr := range be.Errs {
		if kerr == nil {
			continue
		}
		if IsBadInput(kerr) {
			if left == nil {
				left = make([]error, len(keys))
			}
			left[i] = kerr
			continue
		}
		p.observe(kerr)
		failed = append(failed, i)
	}
	if p.policy == FailOpen {
		for _, i := range failed {
			ds[i] = Decision{Allowed: true}
		}
	} else if len(failed) > 0 {
		fkeys := make([]string, len(failed))
		for j, i := range failed {
			fkeys[j] = keys[i]
		}
		fds, ferr := AllowBatch(context.WithoutCancel(ctx), p.fallback, fkeys, now, n)
		var fbe *BatchError
		errors.As(ferr, &fbe)
		for j, i := range failed {
			if j < len(fds) {
				ds[i] = fds[j]
			}
			switch {
			case fbe != nil && j < len(fbe.Errs):
				if fbe.Errs[j] != nil {
					if left == nil {
						left = make([]error, len(keys))
					}
					left[i] = fbe.Errs[j]
				}
			case ferr != nil:
				if left == nil {
					left = make([]error, len(keys))
				}
				left[i] = ferr
			}
		}
	}
	if left != nil {
		return ds, &BatchError{Errs: left}
	}
	return ds, nil
}

func isBatchError(err error) bool {
	var be *BatchError
	return errors.As(err, &be)
}

// observe tells the observers of a decision the policy answers.
func (p *policyLimiter) observe(err error) {
	if len(p.observers) == 0 {
		return
	}
	f := Failure{Policy: p.policy, Reason: ReasonOf(err), Err: err}
	for _, o := range p.observers {
		o.ObserveFailure(f)
	}
}

// Observe returns a copy of the wrapper that also reports to o.
func (p *policyLimiter) Observe(o FailureObserver) Limiter {
	q := *p
	q.observers = append(append([]FailureObserver(nil), p.observers...), o)
	return &q
}

// Unwrap returns the limiter whose backend errors the policy handles.
func (p *policyLimiter) Unwrap() Limiter { return p.l }

// FailurePolicy returns the policy applied to backend errors.
func (p *policyLimiter) FailurePolicy() FailurePolicy { return p.policy }

// Fallback returns the limiter that decides under FailFallback (nil under FailOpen).
func (p *policyLimiter) Fallback() Limiter { return p.fallback }

// AllowBatch decides a request of cost n for each of keys at now with l: in one call when
// l is a [BatchLimiter], else with one AllowN per key, in order. Decision i is for keys[i].
// Bad input of any key returns an error before any decision when l batches; one AllowN
// per key reports the keys that failed in a *BatchError, as a batching engine does.
func AllowBatch(ctx context.Context, l Limiter, keys []string, now time.Time, n int64) ([]Decision, error) {
	if b, ok := l.(BatchLimiter); ok {
		return b.AllowBatch(ctx, keys, now, n)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	ds := make([]Decision, len(keys))
	var errs []error
	for i, k := range keys {
		d, err := l.AllowN(ctx, k, now, n)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(keys))
			}
			errs[i] = err
		}
		ds[i] = d
	}
	if errs != nil {
		return ds, &BatchError{Errs: errs}
	}
	return ds, nil
}
