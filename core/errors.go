package core

import "errors"

// Sentinel errors shared by every engine. The root package re-exports them, so callers
// compare with errors.Is against either name.
var (
	// ErrInvalidConfig is wrapped by every constructor that rejects its parameters
	// (non-positive, NaN, infinite or out-of-range values). The wrapping message names the
	// parameter and the value.
	ErrInvalidConfig = errors.New("redstream: invalid configuration")

	// ErrInvalidCost is returned when a request's cost n is zero or negative.
	ErrInvalidCost = errors.New("redstream: cost must be positive")

	// ErrCostTooLarge is returned when a request's cost n exceeds what a key can ever
	// hold (the limiter's Limit), so the request could never be admitted.
	ErrCostTooLarge = errors.New("redstream: cost exceeds the limit")

	// ErrInvalidTime is returned when a time lies before the Unix epoch or after MaxTime.
	ErrInvalidTime = errors.New("redstream: time outside [Unix epoch, MaxTime]")
)
