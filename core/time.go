package core

import (
	"fmt"
	"math"
	"time"

	"github.com/redstream-go/redstream/internal/corekit"
)

// Time in core is an int64 count of microseconds since the Unix epoch; durations are int64
// microseconds. Every value the engines exchange stays below 2^53 so that Lua's doubles,
// JavaScript numbers and Go's int64 agree bit for bit.
const (
	// MaxTime is the largest accepted time: 2^52 µs after the epoch (year 2112).
	MaxTime int64 = corekit.MaxTime
	// MaxDuration is the largest accepted window, interval or tolerance: 2^51 µs (71 years).
	// MaxTime + 2*MaxDuration = 2^53, the last integer a double holds exactly.
	MaxDuration int64 = 1 << 51
	// MaxCount bounds limits and capacities: 2^40 (about 1.1e12).
	MaxCount int64 = 1 << 40

	// Millisecond and Second are durations in core units (the unit is the microsecond).
	Millisecond int64 = 1000
	Second      int64 = 1000000
)

// maxExact is 2^53, the bound on every product the algorithms form.
const maxExact int64 = 1 << 53

// checkTime returns ErrInvalidTime when now is outside [0, MaxTime].
func checkTime(now int64) error {
	if now < 0 || now > MaxTime {
		return fmt.Errorf("%w: %d µs", ErrInvalidTime, now)
	}
	return nil
}

// badRequest returns the error for a time or cost that failed the fast range check of a
// step, in the order every step checks them: time first, then cost.
//
//go:noinline
func badRequest(now, n, limit int64) error {
	if err := checkTime(now); err != nil {
		return err
	}
	return checkCost(n, limit)
}

func checkCost(n, limit int64) error {
	if n <= 0 {
		return fmt.Errorf("%w: n = %d", ErrInvalidCost, n)
	}
	if n > limit {
		return fmt.Errorf("%w: n = %d, limit = %d", ErrCostTooLarge, n, limit)
	}
	return nil
}

// finite reports whether f is a usable positive, finite number.
func positiveFinite(f float64) bool {
	return f > 0 && !math.IsNaN(f) && !math.IsInf(f, 0)
}

func badConfig(name string, v any, want string) error {
	return fmt.Errorf("%w: %s = %v, want %s", ErrInvalidConfig, name, v, want)
}

func checkDuration(name string, d int64) error {
	if d <= 0 || d > MaxDuration {
		return badConfig(name, time.Duration(d)*time.Microsecond, fmt.Sprintf("more than 0 and at most %v", time.Duration(MaxDuration)*time.Microsecond))
	}
	return nil
}

func checkLimit(name string, l int64) error {
	if l <= 0 || l > MaxCount {
		return badConfig(name, l, fmt.Sprintf("in [1, %d]", MaxCount))
	}
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
