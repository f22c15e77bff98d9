package core

import (
	"fmt"
	"math"
	"math/bits"
)

// Jitter selects how a Backoff randomizes its delays.
type Jitter int

const (
	// JitterNone returns the exponential delay as is.
	JitterNone Jitter = iota
	// JitterFull returns a uniform delay in [0, d].
	JitterFull
	// JitterEqual returns d/2 plus a uniform delay in [0, d/2].
	JitterEqual
	// JitterDecorrelated returns min(Max, uniform in [Initial, 3*prev]), where prev is the
	// previous delay returned (Initial for the first retry).
	JitterDecorrelated
)

// String returns the mode's name as used in configuration: none, full, equal, decorrelated.
func (j Jitter) String() string {
	switch j {
	case JitterNone:
		return "none"
	case JitterFull:
		return "full"
	case JitterEqual:
		return "equal"
	case JitterDecorrelated:
		return "decorrelated"
	}
	return fmt.Sprintf("Jitter(%d)", int(j))
}

// Backoff computes retry delays: Base(attempt) = min(Initial * Multiplier^(attempt-1), Max)
// for attempt >= 1 and 0 for attempt <= 0, with the multiplier held as an integer number of
// thousandths so every runtime computes the same delays. Each step is the truncated product
// d*MultiplierMilli/1000, clamped without overflow: attempt 1000 (or 2^62) returns Max, and the
// work per call is bounded (about 30,000 steps in the worst case) whatever the attempt.
type Backoff struct {
	Initial         int64 // µs, >= 0
	Max             int64 // µs, >= Initial
	MultiplierMilli int64 // multiplier * 1000, >= 1000
	Jitter          Jitter
}

// NewBackoff validates initial and max (µs, 0 <= initial <= max <= MaxDuration), multiplier
// (finite, in [1, 1000], kept to three decimals) and the jitter mode.
func NewBackoff(initial, max int64, multiplier float64, jitter Jitter) (Backoff, error) {
	if initial < 0 || initial > MaxDuration {
		return Backoff{}, badConfig("initialDelay", fmt.Sprintf("%dµs", initial), "in [0, MaxDuration]")
	}
	if max < initial || max > MaxDuration {
		return Backoff{}, badConfig("maxDelay", fmt.Sprintf("%dµs", max), "in [initialDelay, MaxDuration]")
	}
	if math.IsNaN(multiplier) || multiplier < 1 || multiplier > 1000 {
		return Backoff{}, badConfig("multiplier", multiplier, "a finite number in [1, 1000]")
	}
	if jitter < JitterNone || jitter > JitterDecorrelated {
		return Backoff{}, badConfig("jitter", int(jitter), "none, full, equal or decorrelated")
	}
	return Backoff{Initial: initial, Max: max, MultiplierMilli: int64(math.Round(multiplier * 1000)), Jitter: jitter}, nil
}

// Base returns the delay before retry number attempt (1-based) without jitter.
func (b Backoff) Base(attempt int64) int64 {
	if attempt <= 0 {
		return 0
	}
	d := min64(b.Initial, b.Max)
	if b.MultiplierMilli == 1000 || d == 0 {
		return d
	}
	for i := int64(1); i < attempt; i++ {
		if d >= b.Max {
			return b.Max
		}
		hi, lo := bits.Mul64(uint64(d), uint64(b.MultiplierMilli))
		q, _ := bits.Div64(hi, lo, 1000) // hi < 1000: d < 2^53, MultiplierMilli <= 2^20
		if q > uint64(b.Max) {
			return b.Max
		}
		if int64(q) == d {
			return d // a fixed point of the truncating product: every later attempt is the same
		}
		d = int64(q)
	}
	return min64(d, b.Max)
}

// Delay returns the delay before retry number attempt with the jitter mode applied. prev is
// the previous delay returned (used by JitterDecorrelated; pass 0 for the first retry).
// rnd(n) must return a uniform integer in [0, n) for n > 0; it is never called with n <= 0.
// Delay is deterministic for a deterministic rnd.
func (b Backoff) Delay(attempt, prev int64, rnd func(n int64) int64) int64 {
	d := b.Base(attempt)
	if d <= 0 {
		return 0
	}
	switch b.Jitter {
	case JitterFull:
		return rnd(d + 1)
	case JitterEqual:
		h := d / 2
		return d - h + rnd(h+1)
	case JitterDecorrelated:
		if prev < b.Initial {
			prev = b.Initial
		}
		hi := min64(b.Max, 3*min64(prev, b.Max))
		if hi <= b.Initial {
			return min64(b.Initial, b.Max)
		}
		return b.Initial + rnd(hi-b.Initial+1)
	}
	return d
}
