package redstream

import (
	"context"
	"errors"
	"time"

	"github.com/redstream-go/redstream/internal/failure"
)

// Shadow returns l in shadow mode, to roll a new limit out safely: every decision is l's,
// computed and recorded by l exactly as when it enforces (an admitted request consumes, a
// denied one consumes nothing), but the caller is always admitted. A decision l denies is
// returned with Allowed true and Shadow set, keeping the denial's Limit, Remaining,
// RetryAfter and ResetAfter, so that a caller can log what would have happened. Errors
// are l's, unchanged: bad input and backend failures are not admitted by Shadow (wrap l
// with [WithFailurePolicy] for those).
//
// metrics.Named around the shadow limiter counts a shadow denial in
// redis_streaming_rl_allowed_total (the caller was admitted) and in
// redis_streaming_rl_shadow_denied_total, never in redis_streaming_rl_denied_total.
// httplimit sends no rate-limit header fields for a limiter in shadow mode. The limiter
// is safe for concurrent use if l is; AllowBatch (see [AllowBatch]) batches when l does.
// Shadow panics if l is nil.
func Shadow(l Limiter) Limiter {
	if l == nil {
		panic("redstream: Shadow of a nil Limiter")
	}
	return &shadowLimiter{l: l}
}

// shadowLimiter is a limiter in shadow mode (Shadow).
type shadowLimiter struct{ l Limiter }

// shadowed turns a denial into a shadow denial.
func shadowed(d Decision) Decision {
	if !d.Allowed {
		d.Allowed, d.Shadow = true, true
	}
	return d
}

// AllowN decides with the wrapped limiter and admits what it denies (Shadow).
func (s *shadowLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (Decision, error) {
	d, err := s.l.AllowN(ctx, key, now, n)
	if err != nil {
		return d, err
	}
	return shadowed(d), nil
}

// AllowBatch decides keys with the wrapped limiter (in one call when it batches) and
// admits what it denies. The decisions of keys whose backend failed stay denied zero
// values, as AllowBatch returns them.
func (s *shadowLimiter) AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]Decision, error) {
	ds, err := AllowBatch(ctx, s.l, keys, now, n)
	var errs []error
	var be *BatchError
	switch {
	case errors.As(err, &be):
		errs = be.Errs
	case err != nil:
		return ds, err
	}
	for i := range ds {
		if i < len(errs) && errs[i] != nil {
			continue
		}
		ds[i] = shadowed(ds[i])
	}
	return ds, err
}

// Unwrap returns the limiter in shadow mode.
func (s *shadowLimiter) Unwrap() Limiter { return s.l }

// Shadow reports that the limiter is in shadow mode (what httplimit looks for).
func (s *shadowLimiter) Shadow() bool { return true }

// shadowView is the failure.View of a shadow limiter around a failure policy.
func shadowView(l any, o failure.Observer) (any, bool) {
	s, ok := l.(*shadowLimiter)
	if !ok {
		return nil, false
	}
	v, ok := failure.View(s.l, o)
	if !ok {
		return nil, false
	}
	return &shadowLimiter{l: v.(Limiter)}, true
}

func init() { failure.RegisterView(shadowView) }
