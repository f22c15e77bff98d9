package memory

import (
	"context"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/engine"
)

// ConcurrencyLimiter is an in-process [redstream.ConcurrencyLimiter]: leases on one
// concurrency limit ([redstream.Concurrency]), alone or all-or-nothing with rate limits on
// the same key ([NewConcurrencyLimiter]). Admission is core's step of every limit, as for a
// [Limiter] of the same specs; a lease is the units its acquisition recorded in the
// concurrency limit's log, found again by its token.
//
// All keys are held in one map under one mutex (a lease's release and extension must find
// the state its acquisition wrote); keys whose limits are all idle again are swept as by
// Options.SweepThreshold. Options.Shards is not used. A ConcurrencyLimiter is safe for
// concurrent use; its zero value is not usable.
type ConcurrencyLimiter struct {
	cfg    engine.Config
	leases *engine.Leases
	native engine.Native
}

var _ redstream.ConcurrencyLimiter = (*ConcurrencyLimiter)(nil)

// NewConcurrencyLimiter returns a limiter handing out leases on the one spec of specs whose
// algorithm is redstream.AlgorithmConcurrency; the other specs are rate limits charged by
// every acquisition, all-or-nothing with it. It returns an error wrapping
// redstream.ErrInvalidConfig for an invalid spec or opts, or when specs holds no
// concurrency spec or more than one.
func NewConcurrencyLimiter(specs []redstream.Spec, opts Options) (*ConcurrencyLimiter, error) {
	ls, err := engine.Limits("memory", specs)
	if err != nil {
		return nil, err
	}
	c, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	leases, err := engine.NewLeases("memory", ls, c)
	if err != nil {
		return nil, err
	}
	return &ConcurrencyLimiter{cfg: c, leases: leases, native: engine.Native(ls)}, nil
}

// Acquire asks for n units of key at now (the zero time means Options.Clock): a lease when
// every limit admits the request, else a denied Lease whose RetryAfter is core's. Bad input
// returns the errors of Limiter.AllowN and records nothing. ctx is not used.
func (l *ConcurrencyLimiter) Acquire(ctx context.Context, key string, now time.Time, n int64) (redstream.Lease, error) {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return redstream.Lease{}, wrap(err)
	}
	lease, err := l.leases.Acquire(l.native, key, l.cfg.Micros(now), n)
	if err != nil {
		return redstream.Lease{}, wrap(err)
	}
	return lease, nil
}

// Release frees lease's units at now (the zero time means Options.Clock) if it still holds
// them, and reports whether it did: a lease that expired, was released already, or whose
// token this limiter never issued changes nothing. ctx is not used.
func (l *ConcurrencyLimiter) Release(ctx context.Context, lease redstream.Lease, now time.Time) (bool, error) {
	if err := engine.CheckRequest(lease.Key, now, 1); err != nil {
		return false, wrap(err)
	}
	return l.leases.Release(l.native, lease, l.cfg.Micros(now))
}

// Extend renews lease at now (the zero time means Options.Clock) for another lease TTL and
// returns it with its new Expiry, or an error wrapping redstream.ErrLeaseLost for a lease
// that no longer holds its units. ctx is not used.
func (l *ConcurrencyLimiter) Extend(ctx context.Context, lease redstream.Lease, now time.Time) (redstream.Lease, error) {
	if err := engine.CheckRequest(lease.Key, now, 1); err != nil {
		return lease, wrap(err)
	}
	return l.leases.Extend(l.native, lease, l.cfg.Micros(now))
}
