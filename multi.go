package redstream

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Rule is a Spec under a name: one of the specs of a multi-limiter (for example
// "per-second" and "per-day"), and the name of its entry in an HTTP RateLimit-Policy
// header (package httplimit).
type Rule struct {
	// Name names the rule, unique among the rules of one multi-limiter.
	Name string
	// Spec is what the rule enforces.
	Spec Spec
}

// multiLimiter is the limiter Multi returns.
type multiLimiter struct {
	l     Limiter
	rules []Rule
}

var _ batcher = (*multiLimiter)(nil)

// Multi returns a limiter applying every rule to each key, all-or-nothing: a request is
// admitted only if every rule admits it, and only then does every rule record it. build
// makes the engine's multi-limiter of the rules' specs, in the order given, for example
//
//	func(specs []redstream.Spec) (redstream.Limiter, error) {
//		return memory.NewMultiLimiter(specs, memory.Options{})
//	}
//
// The atomicity comes from the engine (one lock in memory, one Lua script on Redis); Multi
// adds the names and their validation. A Decision is the engine's combination
// (core.Combine): the smallest Remaining with that rule's Limit, and the largest
// RetryAfter and ResetAfter; a cost above the smallest limit is ErrCostTooLarge.
//
// The returned limiter batches ([AllowBatch]) when the engine's does, and has the methods
// Rules() []Rule (the rules, in the order given, in a new slice) and Unwrap() Limiter
// (the engine's limiter), through which package httplimit names the entries of its
// RateLimit-Policy header. It is safe for concurrent use if the engine's limiter is.
//
// Multi returns an error wrapping ErrInvalidConfig when build is nil or returns a nil
// limiter, when rules is empty, or when a name is empty or repeated or a Spec is invalid
// (the message names the rule).
func Multi(build func(specs []Spec) (Limiter, error), rules ...Rule) (Limiter, error) {
	if build == nil {
		return nil, fmt.Errorf("redstream: Multi: %w: nil build function", ErrInvalidConfig)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("redstream: Multi: %w: no rules", ErrInvalidConfig)
	}
	specs := make([]Spec, len(rules))
	seen := make(map[string]bool, len(rules))
	for i, r := range rules {
		if r.Name == "" {
			return nil, fmt.Errorf("redstream: Multi: %w: rules[%d].Name is empty", ErrInvalidConfig, i)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("redstream: Multi: %w: rules[%d].Name %q is repeated", ErrInvalidConfig, i, r.Name)
		}
		seen[r.Name] = true
		if _, err := r.Spec.Core(); err != nil {
			return nil, fmt.Errorf("redstream: Multi: rules[%d] (%q).Spec: %w", i, r.Name, err)
		}
		specs[i] = r.Spec
	}
	l, err := build(specs)
	if err != nil {
		return nil, fmt.Errorf("redstream: Multi: %w", err)
	}
	if l == nil {
		return nil, fmt.Errorf("redstream: Multi: %w: build returned a nil limiter", ErrInvalidConfig)
	}
	return &multiLimiter{l: l, rules: slices.Clone(rules)}, nil
}

// Rules returns the rules, in the order given to Multi, in a new slice.
func (m *multiLimiter) Rules() []Rule { return slices.Clone(m.rules) }

// Unwrap returns the engine's limiter.
func (m *multiLimiter) Unwrap() Limiter { return m.l }

// AllowN decides a request of cost n against every rule, all-or-nothing.
func (m *multiLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (Decision, error) {
	return m.l.AllowN(ctx, key, now, n)
}

// AllowBatch decides a request of cost n for each of keys, all-or-nothing per key, in one
// call when the engine's limiter batches.
func (m *multiLimiter) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]Decision, error) {
	return AllowBatch(ctx, m.l, keys, now, n)
}
