package redstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/internal/failure"
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
var ErrCircuitOpen = failure.ErrCircuitOpen

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

// BatchError reports the keys of a batch decision whose backend call failed. Errs has one
// entry per key of the batch: nil for a key that was decided, the error otherwise.
// errors.Is and errors.As look into every key's error.
type BatchError struct {
	Errs []error
}

// Error reports how many keys failed and the first failure.
func (e *BatchError) Error() string {
	for i, err := range e.Errs {
		if err != nil {
			return fmt.Sprintf("redstream: batch: %d of %d decisions failed; key %d: %v", len(e.Unwrap()), len(e.Errs), i, err)
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
// Decision. Bad input (ErrEmptyKey, ErrInvalidCost, ErrCostTooLarge, ErrInvalidTime,
// ErrInvalidConfig, redisbackend.ErrTooLarge) is never subject to the policy.
//
// The returned limiter batches ([AllowBatch]; per key: the keys whose backend call failed
// follow the policy, the others keep the backend's decision) and has a method Unwrap()
// Limiter returning l. Decisions the policy answers are counted by a metrics.Named inside
// l or around the returned limiter. It is safe for concurrent use if l and fallback are.
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
		if o, ok := u.(failure.Observer); ok {
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
	observers []failure.Observer // inside l (found by WithFailurePolicy), then from failure.View
}

var _ batcher = (*policyLimiter)(nil)

func (p *policyLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (Decision, error) {
	d, err := p.l.AllowN(ctx, key, now, n)
	if err == nil || failure.IsBadInput(err) {
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
	if err == nil || failure.IsBadInput(err) && !isBatchError(err) {
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
		if failure.IsBadInput(kerr) {
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
	f := failure.Failure{Fallback: p.policy == FailFallback, Reason: failure.ReasonOf(err), Err: err}
	for _, o := range p.observers {
		o.ObserveFailure(f)
	}
}

// view returns a copy of the wrapper that also reports to o.
func (p *policyLimiter) view(o failure.Observer) Limiter {
	q := *p
	q.observers = append(append([]failure.Observer(nil), p.observers...), o)
	return &q
}

// viewOf is the failure.View of the wrappers of this package: a failure policy, and a
// multi-limiter around one.
func viewOf(l any, o failure.Observer) (any, bool) {
	switch x := l.(type) {
	case *policyLimiter:
		return x.view(o), true
	case *multiLimiter:
		v, ok := failure.View(x.l, o)
		if !ok {
			return nil, false
		}
		return &multiLimiter{l: v.(Limiter), rules: x.rules}, true
	}
	return nil, false
}

func init() { failure.RegisterView(viewOf) }

// Unwrap returns the limiter whose backend errors the policy handles.
func (p *policyLimiter) Unwrap() Limiter { return p.l }

// FailurePolicy returns the policy applied to backend errors.
func (p *policyLimiter) FailurePolicy() FailurePolicy { return p.policy }

// Fallback returns the limiter that decides under FailFallback (nil under FailOpen).
func (p *policyLimiter) Fallback() Limiter { return p.fallback }

// batcher is implemented by limiters that decide many keys in one call.
type batcher interface {
	AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]Decision, error)
}

// AllowBatch decides a request of cost n for each of keys at now with l; decision i is for
// keys[i]. It makes one call when l batches (l has a method AllowBatch of this signature:
// redisbackend's Limiter pipelines the keys in one round trip, and the limiters of
// [WithFailurePolicy], [Multi] and metrics.Named pass it on), else one AllowN per key, in
// order. Bad input of any key returns an error before any decision when l batches. When
// the backend fails for some keys, the error is a *[BatchError] giving each key's error,
// and the decisions of those keys are denied zero values.
func AllowBatch(ctx context.Context, l Limiter, keys []string, now time.Time, n int64) ([]Decision, error) {
	if b, ok := l.(batcher); ok {
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
