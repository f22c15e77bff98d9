// Package sink adapts functions to redstream.Sink, the end of a pipeline of values ([Func]),
// and provides a sink that
// rate-limits values on their way to another ([Limiting]) with any redstream.Limiter,
// dropping or rejecting ([ErrRateLimited]) what the limiter denies, as the Java system's
// rate-limited sink does.
package sink

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
)

// Func adapts a function to a redstream.Sink.
type Func[T any] func(ctx context.Context, value T) error

// Invoke calls f(ctx, value).
func (f Func[T]) Invoke(ctx context.Context, value T) error { return f(ctx, value) }

// DenyPolicy says what a Limiting sink does with a value its limiter denies.
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

// nullKey is the key a Limiting sink uses when its key selector returns the empty string: the
// Java system mapped a null key to the string "null", and limiters reject the empty key.
const nullKey = "null"

// ErrRateLimited is matched, under errors.Is, by the *RateLimitedError a Limiting sink
// with DenyThrow returns for a denied value.
var ErrRateLimited = errors.New("sink: rate limited")

// RateLimitedError is returned by a Limiting sink with DenyThrow for a denied value. It
// matches ErrRateLimited under errors.Is; errors.As gives the denied Decision (RetryAfter
// says when to try again).
type RateLimitedError struct {
	// Key is the value's key.
	Key string
	// Decision is the limiter's denial.
	Decision redstream.Decision
}

// Error describes the denial.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("sink: rate limited: key %q, retry after %v", e.Key, e.Decision.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// Limiting passes values to another Sink while its limiter admits them. Each value costs
// 1 under the key its key selector returns (an empty key becomes "null", as in the Java
// system, since limiters reject the empty key). On a denial it drops the value (DenyDrop) or
// returns a *RateLimitedError (DenyThrow); a limiter error is returned as is, wrapped, and the
// value is not delivered (a failure policy, redstream.WithFailurePolicy, has already been
// applied by the limiter).
//
// A Limiting sink is safe for concurrent use if its limiter, key selector and next sink are.
type Limiting[T any] struct {
	l       redstream.Limiter
	key     func(T) string
	next    redstream.Sink[T]
	policy  DenyPolicy
	dropped atomic.Int64
}

var _ redstream.Sink[string] = (*Limiting[string])(nil)

// NewLimiting returns a sink that rate-limits values on their way to next. It returns an
// error wrapping ErrInvalidConfig for a nil limiter, key selector or next sink, or an unknown
// policy.
func NewLimiting[T any](l redstream.Limiter, key func(T) string, next redstream.Sink[T], policy DenyPolicy) (*Limiting[T], error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("sink: NewLimiting: %w: nil limiter", redstream.ErrInvalidConfig)
	case key == nil:
		return nil, fmt.Errorf("sink: NewLimiting: %w: nil key selector", redstream.ErrInvalidConfig)
	case next == nil:
		return nil, fmt.Errorf("sink: NewLimiting: %w: nil next sink", redstream.ErrInvalidConfig)
	case policy != DenyDrop && policy != DenyThrow:
		return nil, fmt.Errorf("sink: NewLimiting: %w: unknown deny policy %d", redstream.ErrInvalidConfig, int(policy))
	}
	return &Limiting[T]{l: l, key: key, next: next, policy: policy}, nil
}

// Invoke asks the limiter for value's key at the limiter's clock and, if admitted, delivers
// value to the next sink.
func (s *Limiting[T]) Invoke(ctx context.Context, value T) error {
	k := s.key(value)
	if k == "" {
		k = nullKey
	}
	d, err := s.l.AllowN(ctx, k, time.Time{}, 1)
	if err != nil {
		return fmt.Errorf("sink: Limiting: %w", err)
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

// Dropped returns how many values DenyDrop has dropped so far.
func (s *Limiting[T]) Dropped() int64 { return s.dropped.Load() }
