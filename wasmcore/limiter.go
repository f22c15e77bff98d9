package wasmcore

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
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
}

var _ redstream.Limiter = (*Limiter)(nil)

// abiLimit is how one limit is called through the ABI: its step export and arguments.
type abiLimit struct {
	fn             fn
	capacity, rate float64 // buckets
	window, limit  int64   // windows
}

// exports maps an algorithm to its step export.
var exports = map[string]fn{
	"token-bucket":    fnTokenBucket,
	"leaky-bucket":    fnLeakyBucket,
	"fixed":           fnFixedWindow,
	"sliding-counter": fnSlidingCounter,
	"sliding":         fnSlidingLog,
}

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
	ls, err := engine.Limits("wasmcore", specs)
	if err != nil {
		return nil, err
	}
	l := &Limiter{limits: ls}
	for i, lim := range ls {
		f, ok := exports[lim.Name()]
		if !ok {
			return nil, fmt.Errorf("wasmcore: %w: no step export for %q", errInvalidConfig, lim.Name())
		}
		l.abi = append(l.abi, abiLimit{fn: f, capacity: specs[i].Capacity, rate: specs[i].Rate,
			window: specs[i].Window.Microseconds(), limit: specs[i].Limit})
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l.opts, l.k = r, engine.NewLimiter(ls, r.cfg)
	return l, nil
}

// Limits returns the validated core limits of the limiter's specs, in order, in a new slice.
func (l *Limiter) Limits() []core.Limit { return append([]core.Limit(nil), l.limits...) }

// TrackedKeys returns the number of keys whose state the limiter currently holds.
func (l *Limiter) TrackedKeys() int { return l.k.TrackedKeys() }

// Allow is shorthand for AllowN(ctx, key, time.Time{}, 1): cost 1 at the limiter's clock.
func (l *Limiter) Allow(ctx context.Context, key string) (redstream.Decision, error) {
	var d redstream.Decision
	err := l.allow(ctx, &d, key, time.Time{}, 1)
	return d, err
}

// AllowAt is shorthand for AllowN(ctx, key, now, 1).
func (l *Limiter) AllowAt(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	var d redstream.Decision
	err := l.allow(ctx, &d, key, now, 1)
	return d, err
}

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
	st.ctx, st.limits = ctx, l.abi
	err = l.k.DecideInto(d, st, key, t, n)
	st.ctx, st.limits = nil, nil
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
}

// Check calls limit i's step export on s.
func (st *stepper) Check(i int, s *core.State, now, n int64, d *core.Decision, next *core.Next) error {
	l, in := &st.limits[i], st.in
	switch l.fn {
	case fnTokenBucket, fnLeakyBucket:
		tat, err := in.gcraStep(st.ctx, l.fn, l.capacity, l.rate, s.Words[0], now, n, d)
		*next = core.Next{tat}
		return err
	case fnFixedWindow:
		w, err := in.fixedWindowStep(st.ctx, l.window, l.limit, windowOf(s), now, n, d)
		*next = core.Next{w.Start, w.Count, w.Prev}
		return err
	case fnSlidingCounter:
		w, err := in.slidingCounterStep(st.ctx, l.window, l.limit, windowOf(s), now, n, d)
		*next = core.Next{w.Start, w.Count, w.Prev}
		return err
	}
	dl, err := in.slidingLogStep(st.ctx, l.window, l.limit, s.Log, now, n, d)
	*next = core.Next{dl.Pruned, dl.Appended, dl.At}
	return err
}

func windowOf(s *core.State) core.WindowState {
	return core.WindowState{Start: s.Words[0], Count: s.Words[1], Prev: s.Words[2]}
}
