package redstream

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Limit is a Spec under a name: one limit of a multi-limit (for example "per-second" and
// "per-day"), one entry of an HTTP RateLimit-Policy header.
type Limit struct {
	Name string
	Spec Spec
}

// MultiBuilder builds an engine's all-or-nothing multi-limiter from specs, in the order
// given. Engines provide one; for example
//
//	func(specs []redstream.Spec) (redstream.Limiter, error) {
//		return memory.NewMultiLimiter(specs, memory.Options{})
//	}
type MultiBuilder func(specs []Spec) (Limiter, error)

// MultiLimiter applies several named limits to every key, all-or-nothing: a request is
// admitted only if every limit admits it, and only then does every limit record it. The
// atomicity comes from the engine (one lock in memory, one Lua script on Redis); MultiLimiter
// adds the names, validation and the [Limiter] contract. Its Decision is the engines'
// combination (core.Combine): the smallest Remaining with that limit's Limit, and the largest
// RetryAfter and ResetAfter.
//
// A MultiLimiter is safe for concurrent use if the engine's limiter is.
type MultiLimiter struct {
	l      Limiter
	limits []Limit
}

var (
	_ BatchLimiter = (*MultiLimiter)(nil)
	_ Observable   = (*MultiLimiter)(nil)
)

// Multi builds a multi-limiter of limits with build. It returns an error wrapping
// ErrInvalidConfig when build is nil or returns a nil limiter, when limits is empty, or when
// a name is empty or repeated or a Spec is invalid (the message names the limit).
func Multi(build MultiBuilder, limits ...Limit) (*MultiLimiter, error) {
	if build == nil {
		return nil, fmt.Errorf("redstream: Multi: %w: nil MultiBuilder", ErrInvalidConfig)
	}
	if len(limits) == 0 {
		return nil, fmt.Errorf("redstream: Multi: %w: no limits", ErrInvalidConfig)
	}
	specs := make([]Spec, len(limits))
	seen := make(map[string]bool, len(limits))
	for i, lim := range limits {
		if lim.Name == "" {
			return nil, fmt.Errorf("redstream: Multi: %w: limits[%d].Name is empty", ErrInvalidConfig, i)
		}
		if seen[lim.Name] {
			return nil, fmt.Errorf("redstream: Multi: %w: limits[%d].Name %q is repeated", ErrInvalidConfig, i, lim.Name)
		}
		seen[lim.Name] = true
		if _, err := lim.Spec.Core(); err != nil {
			return nil, fmt.Errorf("redstream: Multi: limits[%d] (%q).Spec: %w", i, lim.Name, err)
		}
		specs[i] = lim.Spec
	}
	l, err := build(specs)
	if err != nil {
		return nil, fmt.Errorf("redstream: Multi: %w", err)
	}
	if l == nil {
		return nil, fmt.Errorf("redstream: Multi: %w: MultiBuilder returned a nil limiter", ErrInvalidConfig)
	}
	return &MultiLimiter{l: l, limits: slices.Clone(limits)}, nil
}

// Limits returns the limits, in the order given to Multi, in a new slice.
func (m *MultiLimiter) Limits() []Limit { return slices.Clone(m.limits) }

// Unwrap returns the engine's limiter.
func (m *MultiLimiter) Unwrap() Limiter { return m.l }

// Allow is shorthand for AllowN(ctx, key, time.Time{}, 1).
func (m *MultiLimiter) Allow(ctx context.Context, key string) (Decision, error) {
	return m.l.AllowN(ctx, key, time.Time{}, 1)
}

// AllowAt is shorthand for AllowN(ctx, key, now, 1).
func (m *MultiLimiter) AllowAt(ctx context.Context, key string, now time.Time) (Decision, error) {
	return m.l.AllowN(ctx, key, now, 1)
}

// AllowN decides a request of cost n against every limit, all-or-nothing. A cost above the
// smallest limit is ErrCostTooLarge.
func (m *MultiLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (Decision, error) {
	return m.l.AllowN(ctx, key, now, n)
}

// AllowBatch decides a request of cost n for each of keys, all-or-nothing per key, in one
// call when the engine's limiter batches (see [BatchLimiter]).
func (m *MultiLimiter) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]Decision, error) {
	return AllowBatch(ctx, m.l, keys, now, n)
}

// Observe returns a MultiLimiter over the same limits whose failure policy, if the
// engine's limiter is wrapped in one (WithFailurePolicy), also reports to o; without one it
// returns m.
func (m *MultiLimiter) Observe(o FailureObserver) Limiter {
	if ob, ok := m.l.(Observable); ok {
		return &MultiLimiter{l: ob.Observe(o), limits: m.limits}
	}
	return m
}

// ParseFailurePolicy parses "fail-closed", "fail-open" or "fallback" (the String forms; case
// and the separators '-' and '_' are ignored, and "closed", "open" are accepted too).
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch normalizeName(s) {
	case "failclosed", "closed":
		return FailClosed, nil
	case "failopen", "open":
		return FailOpen, nil
	case "fallback", "failfallback", "localfallback":
		return FailFallback, nil
	}
	return 0, fmt.Errorf("redstream: %w: unknown failure policy %q, want fail-closed, fail-open or fallback", ErrInvalidConfig, s)
}

// normalizeName lowercases s and drops '-', '_' and spaces.
func normalizeName(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' || c == '_' || c == ' ':
		case 'A' <= c && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}
