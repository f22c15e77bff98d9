package wasmcore

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
)

// ConcurrencyLimiter is a [redstream.ConcurrencyLimiter] whose every admission, release
// and extension is computed by redstream's core compiled to WebAssembly: leases on one
// concurrency limit ([redstream.Concurrency]), alone or all-or-nothing with rate limits on
// the same key ([NewConcurrencyLimiter]). It behaves exactly as memory.ConcurrencyLimiter
// does (the same specs give the same leases, denials and answers); the keys' states live
// on the host, in one map under one mutex, and the module steps them (redstream_limit_step,
// redstream_lease_release, redstream_lease_extend).
//
// A ConcurrencyLimiter is safe for concurrent use; its zero value is not usable.
type ConcurrencyLimiter struct {
	opts   resolved
	abi    []abiLimit
	leases *engine.Leases
}

var _ redstream.ConcurrencyLimiter = (*ConcurrencyLimiter)(nil)

// NewConcurrencyLimiter returns a limiter handing out leases on the one spec of specs whose
// algorithm is redstream.AlgorithmConcurrency; the other specs are rate limits charged by
// every acquisition, all-or-nothing with it. It returns an error wrapping
// redstream.ErrInvalidConfig for an invalid spec or opts, or when specs holds no
// concurrency spec or more than one, and the error of [Default] when opts.Runtime is nil
// and the default runtime cannot be created.
func NewConcurrencyLimiter(specs []redstream.Spec, opts Options) (*ConcurrencyLimiter, error) {
	ls, abi, err := abiLimits(specs)
	if err != nil {
		return nil, err
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	leases, err := engine.NewLeases("wasmcore", ls, r.cfg)
	if err != nil {
		return nil, err
	}
	return &ConcurrencyLimiter{opts: r, abi: abi, leases: leases}, nil
}

// Acquire asks for n units of key at now (the zero time means Options.Clock): a lease when
// every limit admits the request, else a denied Lease whose RetryAfter is core's. Bad input
// returns the errors of Limiter.AllowN and records nothing, as does a failure of the module
// (ErrTrapped) or ctx ending while it waits for an instance.
func (l *ConcurrencyLimiter) Acquire(ctx context.Context, key string, now time.Time, n int64) (redstream.Lease, error) {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return redstream.Lease{}, fmt.Errorf("wasmcore: %w", err)
	}
	t := l.opts.cfg.Micros(now)
	var lease redstream.Lease
	err := l.with(ctx, func(st *stepper) (err error) {
		lease, err = l.leases.Acquire(st, key, t, n)
		return err
	})
	return lease, err
}

// Release frees lease's units at now (the zero time means Options.Clock) if it still holds
// them, and reports whether it did: a lease that expired, was released already, or whose
// token this limiter never issued changes nothing.
func (l *ConcurrencyLimiter) Release(ctx context.Context, lease redstream.Lease, now time.Time) (bool, error) {
	if err := engine.CheckRequest(lease.Key, now, 1); err != nil {
		return false, fmt.Errorf("wasmcore: %w", err)
	}
	t := l.opts.cfg.Micros(now)
	var ok bool
	err := l.with(ctx, func(st *stepper) (err error) {
		ok, err = l.leases.Release(st, lease, t)
		return err
	})
	return ok, err
}

// Extend renews lease at now (the zero time means Options.Clock) for another lease TTL and
// returns it with its new Expiry, or an error wrapping redstream.ErrLeaseLost for a lease
// that no longer holds its units.
func (l *ConcurrencyLimiter) Extend(ctx context.Context, lease redstream.Lease, now time.Time) (redstream.Lease, error) {
	if err := engine.CheckRequest(lease.Key, now, 1); err != nil {
		return lease, fmt.Errorf("wasmcore: %w", err)
	}
	t := l.opts.cfg.Micros(now)
	out := lease
	err := l.with(ctx, func(st *stepper) (err error) {
		out, err = l.leases.Extend(st, lease, t)
		return err
	})
	return out, err
}

// with runs f with an instance's stepper bound to ctx and the limiter's limits.
func (l *ConcurrencyLimiter) with(ctx context.Context, f func(st *stepper) error) error {
	return withStepper(ctx, l.opts.rt, l.abi, nil, core.CarryReset, f)
}

// Release frees a lease of limit i (engine.LeaseStepper) in the instance.
func (st *stepper) Release(i int, s *core.State, at, now, n int64) (bool, error) {
	ok, _, err := st.in.lease(st.ctx, fnLeaseRelease, &st.limits[i], s, at, now, n)
	return ok, err
}

// Extend renews a lease of limit i (engine.LeaseStepper) in the instance.
func (st *stepper) Extend(i int, s *core.State, at, now, n int64) (int64, bool, error) {
	ok, at, err := st.in.lease(st.ctx, fnLeaseExtend, &st.limits[i], s, at, now, n)
	return at, ok, err
}

// Seed seeds limit i of a successor's key from its state under the previous limit
// (engine.Seeder) in the instance.
func (st *stepper) Seed(i int, old core.State, now int64) (core.State, error) {
	return st.in.limitSeed(st.ctx, &st.limits[i], &st.from[i], old, now, st.carry)
}

// Successor returns a limiter of specs (one per spec of l, index for index) that replaces
// l without losing its keys' state, exactly as memory.Limiter.Successor does: the first
// decision or reservation (ReserveN) on a key the successor does not hold reads the key's
// state in l and seeds it by c (core.Carry), once, in the module (redstream_limit_seed);
// from then on the successor holds the key. A limit that did not change keeps the key's
// state as it is, its log included (copied). l keeps its state and still decides its own requests, which the successor
// no longer sees: decide with the successor from the change on.
//
// The successor has l's Options. It returns an error wrapping redstream.ErrInvalidConfig
// for specs l cannot carry into by c (coreops.CheckCarry: another algorithm, another
// window, a changed sliding log or concurrency limit; reset and an unchanged limit always
// work) or a number of specs other than l's.
func (l *Limiter) Successor(c core.Carry, specs ...redstream.Spec) (*Limiter, error) {
	if len(specs) != len(l.limits) {
		return nil, fmt.Errorf("wasmcore: %w: Successor of %d specs for a limiter of %d", errInvalidConfig, len(specs), len(l.limits))
	}
	ls, abi, err := abiLimits(specs)
	if err != nil {
		return nil, err
	}
	for i := range ls {
		if err := coreops.CheckCarry(ls[i], l.limits[i], c); err != nil {
			return nil, fmt.Errorf("wasmcore: %w", err)
		}
	}
	s := &Limiter{opts: l.opts, limits: ls, abi: abi, k: engine.NewLimiter(ls, l.opts.cfg)}
	if c != core.CarryReset {
		s.from, s.carry = l.abi, c
		s.k.Carry(&engine.Carrier{Load: l.k.Load, From: append([]core.Limit(nil), l.limits...), Carry: c})
	}
	return s, nil
}
