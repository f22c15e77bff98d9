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

// Limiter is a rate limiter of one [redstream.Spec] ([NewLimiter]) or of several applied
// all-or-nothing ([NewMultiLimiter]) whose every decision is computed by redstream's core
// compiled to WebAssembly, running in a pooled instance of a [Runtime].
//
// The guest is stateless: the state of each key lives on the host, in a sharded table (one
// mutex per shard), and is passed to the step export and back on every decision. Per key
// and limit it stores one int64 (the TAT of a token or leaky bucket), the window start and
// counts (windows), or the timestamps of admitted units (sliding window log, at most Limit
// entries, copied into guest memory on each decision, so a decision costs O(entries)). Keys
// whose state has fully recovered are evicted by amortized sweeping.
//
// With several limits a request is admitted only if every limit admits it, and only then is
// it recorded in every limit: every limit's decision is computed by its step export (steps
// are pure: they return the new state without storing it), the limits of one key are
// decided under one lock with one instance, and the decisions are merged with
// core.Combine: the smallest Remaining (with that limit's Limit) and the largest
// RetryAfter, ResetAfter and Delay. A denied request changes no limit's state.
//
// A Limiter is safe for concurrent use. Its zero value is not usable; call [NewLimiter] or
// [NewMultiLimiter].
type Limiter struct {
	opts   resolved
	limits []core.Limit
	abi    []abiLimit
	k      *engine.Limiter
	// from and carry are a successor's previous limits and strategy (Successor); nil for
	// a limiter that carries nothing.
	from  []abiLimit
	carry core.Carry
}

var _ redstream.Limiter = (*Limiter)(nil)

// abiLimit is how one limit is called through the ABI's generic step export
// (redstream_limit_step): its algorithm's index in the module's registry and its
// parameters.
type abiLimit struct {
	alg int32
	p   core.Params
	log bool  // the algorithm's state is a log
	max int64 // the limit's Max
}

// algorithmIndex returns the alg argument of the limit exports for the algorithm named
// name: its index in core.Algorithms(), the registry the module was built from (the module
// and this package are built from one core, checked by ModuleSHA256). An algorithm the
// registry lacks is an error wrapping redstream.ErrInvalidConfig.
func algorithmIndex(algs []core.Algorithm, name string) (int32, error) {
	for i, a := range algs {
		if a.Name == name {
			return int32(i), nil
		}
	}
	return -1, fmt.Errorf("wasmcore: %w: the module has no algorithm %q", errInvalidConfig, name)
}

// moduleAlgorithms is the registry of the embedded module, the table algorithmIndex reads.
var moduleAlgorithms = core.Algorithms()

// NewLimiter returns a limiter for spec that decides in the module. It returns an error
// wrapping redstream.ErrInvalidConfig when spec or opts is invalid, and the error of
// [Default] when opts.Runtime is nil and the default runtime cannot be created.
func NewLimiter(spec redstream.Spec, opts Options) (*Limiter, error) {
	return NewMultiLimiter([]redstream.Spec{spec}, opts)
}

// NewMultiLimiter returns an all-or-nothing limiter of specs (at least one) on every key; one
// spec gives the limiter [NewLimiter] returns. It returns an error wrapping
// redstream.ErrInvalidConfig when specs is empty or a spec or opts is invalid; the message
// names the spec.
func NewMultiLimiter(specs []redstream.Spec, opts Options) (*Limiter, error) {
	ls, abi, err := abiLimits(specs)
	if err != nil {
		return nil, err
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &Limiter{opts: r, limits: ls, abi: abi, k: engine.NewLimiter(ls, r.cfg)}, nil
}

// abiLimits validates specs (at least one) and returns their core limits and how each is
// called through the ABI.
func abiLimits(specs []redstream.Spec) ([]core.Limit, []abiLimit, error) {
	ls, err := engine.Limits("wasmcore", specs)
	if err != nil {
		return nil, nil, err
	}
	abi := make([]abiLimit, 0, len(ls))
	for i, lim := range ls {
		alg, err := algorithmIndex(moduleAlgorithms, lim.Name())
		if err != nil {
			return nil, nil, err
		}
		a := moduleAlgorithms[alg]
		p := core.Params{Capacity: specs[i].Capacity, Rate: specs[i].Rate}
		if a.Shape == core.Window {
			p = core.Params{Window: specs[i].Window.Microseconds(), Limit: specs[i].Limit}
		}
		abi = append(abi, abiLimit{alg: alg, p: p, log: a.Words == 0, max: lim.Max()})
	}
	return ls, abi, nil
}

// Limits returns the validated core limits of the limiter's specs, in order, in a new slice.
func (l *Limiter) Limits() []core.Limit { return append([]core.Limit(nil), l.limits...) }

// TrackedKeys returns the number of keys whose state the limiter currently holds.
func (l *Limiter) TrackedKeys() int { return l.k.TrackedKeys() }

// AllowN decides a request of cost n for key at now (the zero time means Options.Clock).
// It returns redstream.ErrEmptyKey for an empty key, redstream.ErrInvalidCost for n <= 0,
// redstream.ErrCostTooLarge when n exceeds the limit (any limit's, with several) and
// redstream.ErrInvalidTime for a time before the Unix epoch or after core.MaxTime, with a
// zero Decision. It waits for a free instance while ctx allows; an error wrapping
// ErrTrapped or ErrClosed (or ctx's error) means the decision was not made and the key's
// state is unchanged.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	var d redstream.Decision
	err := l.allow(ctx, &d, key, now, n)
	return d, err
}

// allow is AllowN deciding into *d, the shape of every call layer of the kernel (see
// engine.Limiter.DecideInto).
func (l *Limiter) allow(ctx context.Context, d *redstream.Decision, key string, now time.Time, n int64) error {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return fmt.Errorf("wasmcore: %w", err)
	}
	t := l.opts.cfg.Micros(now)
	in, err := l.opts.rt.acquire(ctx)
	if err != nil {
		return err
	}
	st := &in.stepper
	st.ctx, st.limits, st.from, st.carry = ctx, l.abi, l.from, l.carry
	err = l.k.DecideInto(d, st, key, t, n)
	st.ctx, st.limits, st.from = nil, nil, nil
	l.opts.rt.release(in)
	if err != nil {
		*d = redstream.Decision{}
		if len(l.abi) > 1 {
			err = fmt.Errorf("wasmcore: %w", err)
		}
		return err
	}
	return nil
}

// stepper is the engine.Stepper of an instance: it calls each limit's step export.
type stepper struct {
	in     *instance
	ctx    context.Context
	limits []abiLimit
	from   []abiLimit // a successor's previous limits (Seed)
	carry  core.Carry
}

// Check calls the generic step export for limit i on s.
// Charge is the charge of limit i's admitted decision, computed in the instance.
func (st *stepper) Charge(i int, now, n int64, d *core.Decision) (coreops.Charge, error) {
	return st.in.limitCharge(st.ctx, &st.limits[i], now, n, d)
}

// Settle settles limit i of a key in state s in the instance.
func (st *stepper) Settle(i int, s *core.State, c coreops.Charge, now, actual int64) error {
	return st.in.limitSettle(st.ctx, &st.limits[i], s, c, now, actual)
}

func (st *stepper) Check(i int, s *core.State, now, n int64, d *core.Decision, next *coreops.Next) error {
	return st.in.limitStep(st.ctx, &st.limits[i], s, now, n, d, next)
}
