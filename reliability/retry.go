package reliability

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// The defaults of DefaultPolicy, those of the Java system's RetryPolicy builder.
const (
	defaultMaxAttempts  = 3                      // retries after the first try
	defaultInitialDelay = 100 * time.Millisecond // the wait before the first retry
	defaultMaxDelay     = 10 * time.Second       // caps every wait
	defaultMultiplier   = 2.0                    // the exponential backoff factor
)

// ErrorMatcher reports whether an error belongs to a class of errors. Build one with [Is] or
// [As], or write one; it sees the error as returned, wrapped chain included.
type ErrorMatcher func(err error) bool

// Is returns a matcher of errors for which errors.Is(err, target) holds.
func Is(target error) ErrorMatcher {
	return func(err error) bool { return errors.Is(err, target) }
}

// As returns a matcher of errors with an error of type E in their chain (errors.As). E may
// be a concrete type such as *net.OpError or an interface such as net.Error.
func As[E error]() ErrorMatcher {
	return func(err error) bool {
		var target E
		return errors.As(err, &target)
	}
}

// RetryPolicy says how often and how long to wait before a failed function is tried again.
//
// [DefaultPolicy] holds the defaults (3 retries, 100 ms doubling up to 10 s). The zero value
// is a valid policy that never retries: MaxAttempts 0 means "no retry", so it cannot also
// mean "the default". A RetryPolicy is a plain value; copy it freely.
type RetryPolicy struct {
	// MaxAttempts is the number of retries after the first try: a function runs at most
	// MaxAttempts+1 times. At least 0.
	MaxAttempts int
	// InitialDelay is the wait before the first retry, in [0, MaxDelay]. Durations are used
	// in whole microseconds.
	InitialDelay time.Duration
	// MaxDelay caps every wait; at least InitialDelay.
	MaxDelay time.Duration
	// Multiplier is the factor between consecutive waits when Exponential is set: a finite
	// number in [1, 1000], used to three decimals. Ignored otherwise.
	Multiplier float64
	// Exponential makes waits grow by Multiplier; without it every wait is InitialDelay.
	Exponential bool
	// Jitter randomizes the waits (core's modes): core.JitterNone (the zero value) keeps
	// them exact; core.JitterFull waits [0, d], core.JitterEqual d/2 + [0, d/2],
	// core.JitterDecorrelated min(MaxDelay, [InitialDelay, 3 × previous]).
	Jitter core.Jitter
	// Retryable, when not empty, restricts retries to errors matched by one of its matchers.
	Retryable []ErrorMatcher
	// NonRetryable lists errors that are never retried; it wins over Retryable. With
	// neither set, every error is retried.
	NonRetryable []ErrorMatcher
	// Rand returns a uniform integer in [0, n) for n > 0; it drives the jitter. Nil means
	// math/rand/v2. It must be safe for concurrent use if the Executor is shared.
	Rand func(n int64) int64
	// OnRetry, if set, is called before each wait with the number of the retry about to run
	// (1 for the first retry), the error that caused it and the wait.
	OnRetry func(retry int, err error, wait time.Duration)
}

// DefaultPolicy returns the default policy: 3 retries, waits of 100 ms, 200 ms, 400 ms...
// capped at 10 s.
func DefaultPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:  defaultMaxAttempts,
		InitialDelay: defaultInitialDelay,
		MaxDelay:     defaultMaxDelay,
		Multiplier:   defaultMultiplier,
		Exponential:  true,
	}
}

// FixedDelay returns a policy of maxAttempts retries that waits delay before each (not
// exponential; MaxDelay is raised to delay when delay exceeds the default 10 s).
func FixedDelay(maxAttempts int, delay time.Duration) RetryPolicy {
	p := DefaultPolicy()
	p.MaxAttempts = maxAttempts
	p.InitialDelay = delay
	p.Exponential = false
	if delay > p.MaxDelay {
		p.MaxDelay = delay
	}
	return p
}

// validate reports the first invalid field, wrapping redstream.ErrInvalidConfig; the message
// names the field, e.g. "reliability: RetryPolicy.MaxDelay = 1s, want >= InitialDelay (2s)".
func (p RetryPolicy) validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("reliability: %w: RetryPolicy.%s = %v, want %s", redstream.ErrInvalidConfig, field, v, want)
	}
	maxDur := time.Duration(core.MaxDuration) * time.Microsecond
	switch {
	case p.MaxAttempts < 0:
		return bad("MaxAttempts", p.MaxAttempts, ">= 0")
	case p.InitialDelay < 0 || p.InitialDelay > maxDur:
		return bad("InitialDelay", p.InitialDelay, fmt.Sprintf("in [0, %v]", maxDur))
	case p.MaxDelay < p.InitialDelay || p.MaxDelay > maxDur:
		return bad("MaxDelay", p.MaxDelay, fmt.Sprintf(">= InitialDelay (%v) and <= %v", p.InitialDelay, maxDur))
	case p.Exponential && (math.IsNaN(p.Multiplier) || p.Multiplier < 1 || p.Multiplier > 1000):
		return bad("Multiplier", p.Multiplier, "a finite number in [1, 1000] when Exponential is set")
	case p.Jitter < core.JitterNone || p.Jitter > core.JitterDecorrelated:
		return bad("Jitter", int(p.Jitter), "none, full, equal or decorrelated")
	}
	for i, m := range p.Retryable {
		if m == nil {
			return bad(fmt.Sprintf("Retryable[%d]", i), "nil", "a matcher")
		}
	}
	for i, m := range p.NonRetryable {
		if m == nil {
			return bad(fmt.Sprintf("NonRetryable[%d]", i), "nil", "a matcher")
		}
	}
	return nil
}

// backoff returns the core backoff of p. Out-of-range fields are clamped, so it is total;
// validate reports them.
func (p RetryPolicy) backoff() core.Backoff {
	initial := clamp(p.InitialDelay.Microseconds(), 0, core.MaxDuration)
	maxd := clamp(p.MaxDelay.Microseconds(), initial, core.MaxDuration)
	m := 1.0
	if p.Exponential && !math.IsNaN(p.Multiplier) {
		m = math.Min(math.Max(p.Multiplier, 1), 1000)
	}
	j := p.Jitter
	if j < core.JitterNone || j > core.JitterDecorrelated {
		j = core.JitterNone
	}
	b, err := core.NewBackoff(initial, maxd, m, j)
	if err != nil { // unreachable: every argument is clamped into range
		return core.Backoff{MultiplierMilli: 1000}
	}
	return b
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// Delay returns the wait before retry number attempt (1-based) without jitter:
// min(InitialDelay × Multiplier^(attempt-1), MaxDelay), or InitialDelay when not
// exponential, and 0 for attempt <= 0. It never overflows: a huge attempt returns MaxDelay.
// Fields out of range are clamped as NewExecutor describes.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	return time.Duration(p.backoff().Base(int64(attempt))) * time.Microsecond
}

// attempts returns the total number of tries, MaxAttempts+1 and at least 1.
func (p RetryPolicy) attempts() int {
	if p.MaxAttempts < 0 {
		return 1
	}
	if p.MaxAttempts == math.MaxInt {
		return math.MaxInt
	}
	return p.MaxAttempts + 1
}

// isRetryable reports whether err may be retried: false for nil and for errors matched by
// NonRetryable; otherwise true when Retryable is empty or one of its matchers matches.
func (p RetryPolicy) isRetryable(err error) bool {
	if err == nil {
		return false
	}
	for _, m := range p.NonRetryable {
		if m != nil && m(err) {
			return false
		}
	}
	if len(p.Retryable) == 0 {
		return true
	}
	for _, m := range p.Retryable {
		if m != nil && m(err) {
			return true
		}
	}
	return false
}
