package redstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Sink receives values, one call per value: the end of a pipeline (a writer, a publisher, a
// database). Implementations document whether they are safe for concurrent use.
type Sink[T any] interface {
	// Invoke delivers value. An error means the value was not delivered.
	Invoke(ctx context.Context, value T) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc[T any] func(ctx context.Context, value T) error

// Invoke calls f(ctx, value).
func (f SinkFunc[T]) Invoke(ctx context.Context, value T) error { return f(ctx, value) }

// DenyPolicy says what a LimitingSink does with a value its limiter denies.
type DenyPolicy int

const (
	// DenyDrop, the default, drops the value silently: Invoke returns nil.
	DenyDrop DenyPolicy = iota
	// DenyThrow returns a *RateLimitedError, which matches ErrRateLimited under errors.Is.
	DenyThrow
)

// String returns "DROP" or "THROW", the names of the Java system's DenyPolicy.
func (p DenyPolicy) String() string {
	switch p {
	case DenyDrop:
		return "DROP"
	case DenyThrow:
		return "THROW"
	}
	return fmt.Sprintf("DenyPolicy(%d)", int(p))
}

// nullKey is the key a LimitingSink uses when its key selector returns the empty string: the
// Java system mapped a null key to the string "null", and limiters reject the empty key.
const nullKey = "null"

// RateLimitedError is returned by components that turn a denial into an error. It matches
// ErrRateLimited under errors.Is and carries the denied Decision (RetryAfter says when to
// try again).
type RateLimitedError struct {
	Key      string
	Decision Decision
}

// Error describes the denial.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("redstream: rate limited: key %q, retry after %v", e.Key, e.Decision.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// LimitingSink passes values to another Sink while its limiter admits them. Each value costs
// 1 under the key its key selector returns (an empty key becomes "null", as in the Java
// system, since limiters reject the empty key). On a denial it drops the value (DenyDrop) or
// returns a *RateLimitedError (DenyThrow); a limiter error is returned as is, wrapped, and the
// value is not delivered (a failure policy, WithFailurePolicy, has already been applied by the limiter).
//
// A LimitingSink is safe for concurrent use if its limiter, key selector and next sink are.
type LimitingSink[T any] struct {
	l       Limiter
	key     func(T) string
	next    Sink[T]
	policy  DenyPolicy
	dropped atomic.Int64
}

var _ Sink[string] = (*LimitingSink[string])(nil)

// NewLimitingSink returns a sink that rate-limits values on their way to next. It returns an
// error wrapping ErrInvalidConfig for a nil limiter, key selector or next sink, or an unknown
// policy.
func NewLimitingSink[T any](l Limiter, key func(T) string, next Sink[T], policy DenyPolicy) (*LimitingSink[T], error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("redstream: NewLimitingSink: %w: nil limiter", ErrInvalidConfig)
	case key == nil:
		return nil, fmt.Errorf("redstream: NewLimitingSink: %w: nil key selector", ErrInvalidConfig)
	case next == nil:
		return nil, fmt.Errorf("redstream: NewLimitingSink: %w: nil next sink", ErrInvalidConfig)
	case policy != DenyDrop && policy != DenyThrow:
		return nil, fmt.Errorf("redstream: NewLimitingSink: %w: unknown deny policy %d", ErrInvalidConfig, int(policy))
	}
	return &LimitingSink[T]{l: l, key: key, next: next, policy: policy}, nil
}

// Invoke asks the limiter for value's key at the limiter's clock and, if admitted, delivers
// value to the next sink.
func (s *LimitingSink[T]) Invoke(ctx context.Context, value T) error {
	k := s.key(value)
	if k == "" {
		k = nullKey
	}
	d, err := s.l.AllowN(ctx, k, time.Time{}, 1)
	if err != nil {
		return fmt.Errorf("redstream: LimitingSink: %w", err)
	}
	if !d.Allowed {
		if s.policy == DenyThrow {
			return &RateLimitedError{Key: k, Decision: d}
		}
		s.dropped.Add(1)
		return nil
	}
	return s.next.Invoke(ctx, value)
}

// Policy returns the sink's deny policy.
func (s *LimitingSink[T]) Policy() DenyPolicy { return s.policy }

// Dropped returns how many values DenyDrop has dropped so far.
func (s *LimitingSink[T]) Dropped() int64 { return s.dropped.Load() }

// IsRateLimited reports whether err is (or wraps) a rate-limit denial, and returns the
// denied Decision when err carries one.
func IsRateLimited(err error) (Decision, bool) {
	var e *RateLimitedError
	if errors.As(err, &e) {
		return e.Decision, true
	}
	return Decision{}, errors.Is(err, ErrRateLimited)
}
