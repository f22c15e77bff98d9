// Package failure carries what package redstream's failure policy tells others: which
// errors are the caller's (bad input, never subject to a policy), why a backend call failed
// (the reason label of the fallback metrics), and the decisions a policy answered instead of
// the backend, reported to observers (metrics.Named). It imports nothing of the library, so
// that the root package, the engines and package metrics can all use it.
package failure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redstream-go/redstream/core"
)

// ErrEmptyKey is redstream.ErrEmptyKey.
var ErrEmptyKey = errors.New("redstream: empty key")

// ErrCircuitOpen is redstream.ErrCircuitOpen.
var ErrCircuitOpen = errors.New("redstream: circuit breaker open")

// IsBadInput reports whether err is caused by the caller's arguments rather than by the
// backend, in which case no failure policy applies: ErrEmptyKey, core's ErrInvalidCost,
// ErrCostTooLarge, ErrInvalidTime, ErrInvalidConfig, or an error of an engine with a method
// BadInput() bool that returns true (redisbackend.ErrTooLarge).
func IsBadInput(err error) bool {
	if errors.Is(err, ErrEmptyKey) || errors.Is(err, core.ErrInvalidCost) ||
		errors.Is(err, core.ErrCostTooLarge) || errors.Is(err, core.ErrInvalidTime) || errors.Is(err, core.ErrInvalidConfig) {
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

// Reason says why a backend call failed: the reason label of
// redis_streaming_rl_fallback_total and of the deduplicators' failure counters.
type Reason string

// The reasons ReasonOf tells apart.
const (
	// Timeout: the backend did not answer within the engine's deadline or the caller's.
	Timeout Reason = "timeout"
	// BreakerOpen: the engine's circuit breaker is open, so the backend was not called.
	BreakerOpen Reason = "breaker_open"
	// Canceled: the caller cancelled its context.
	Canceled Reason = "canceled"
	// Error: any other backend failure (connection refused, an error reply).
	Error Reason = "error"
)

// ReasonOf classifies a backend error: BreakerOpen for ErrCircuitOpen, Timeout for
// context.DeadlineExceeded, Canceled for context.Canceled, Error otherwise (and for nil).
func ReasonOf(err error) Reason {
	switch {
	case errors.Is(err, ErrCircuitOpen):
		return BreakerOpen
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Error
}

// Failure is one decision a failure policy answered because the backend failed.
type Failure struct {
	// Fallback is true when a fallback limiter decided, false when the policy admitted
	// (fail-open).
	Fallback bool
	// Reason classifies Err.
	Reason Reason
	// Err is the backend's error.
	Err error
}

// Observer is told of every decision a failure policy answered instead of the backend. A
// failure policy reports to each Observer it finds in its limiter's Unwrap chain. It is
// called synchronously on the deciding goroutine; it must be fast and safe for concurrent
// use.
type Observer interface {
	// ObserveFailure is told of one decision a failure policy answered.
	ObserveFailure(Failure)
}

// A viewer returns a limiter that decides exactly as l, over the same state, and also tells
// o of every decision a failure policy inside l answers; ok is false when l is not a type
// the viewer knows or holds no failure policy.
type viewer func(l any, o Observer) (v any, ok bool)

var viewers []viewer

// RegisterView adds a viewer. Packages register theirs from init, for their wrapper types
// (the failure policy and the multi-limiter of package redstream, metrics.NamedLimiter).
func RegisterView(v func(l any, o Observer) (any, bool)) { viewers = append(viewers, v) }

// View returns a limiter deciding as l that also reports the failures of a failure policy
// inside l to o, and true; or l and false when no registered viewer finds a policy in l.
// It is how a wrapper outside a policy (metrics around WithFailurePolicy) hears of the
// failures the policy hides from it, at no cost per decision: View is called once, when
// the wrapper is built.
func View(l any, o Observer) (any, bool) {
	for _, v := range viewers {
		if w, ok := v(l, o); ok {
			return w, true
		}
	}
	return l, false
}

// Prefixed returns err under the package prefix pkg ("memory", "redisbackend"), so that an
// error carries one prefix: an error of the root (its sentinels, the errors of Spec), whose
// text starts with "redstream: ", reads "memory: invalid configuration: ..." rather than
// "memory: redstream: invalid configuration: ...". errors.Is and As see err either way.
func Prefixed(pkg string, err error) error {
	if err == nil {
		return nil
	}
	if rest, ok := strings.CutPrefix(err.Error(), "redstream: "); ok {
		return &prefixed{msg: pkg + ": " + rest, err: err}
	}
	return fmt.Errorf("%s: %w", pkg, err)
}

// prefixed is err with its root prefix replaced by a package's.
type prefixed struct {
	msg string
	err error
}

func (e *prefixed) Error() string { return e.msg }
func (e *prefixed) Unwrap() error { return e.err }
