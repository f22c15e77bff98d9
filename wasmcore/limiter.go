package wasmcore

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// Limiter is a rate limiter for any [redstream.Algorithm] whose every decision is computed
// by redstream's core compiled to WebAssembly, running in a pooled instance of a [Runtime].
//
// The guest is stateless: the state of each key lives on the host, in a sharded map (one
// mutex per shard), and is passed to the step export and back on every decision. Per key it
// stores one int64 (the TAT of a token or leaky bucket), the window start and counts
// (windows), or the timestamps of admitted units (sliding window log, at most Limit entries,
// copied into guest memory on each decision, so a decision costs O(entries)). Keys whose
// state has fully recovered are evicted by amortized sweeping.
//
// A Limiter is safe for concurrent use. Its zero value is not usable; call [NewLimiter].
type Limiter struct {
	spec   redstream.Spec
	params redstream.Params
	opts   resolved
	fn     fn
	window int64 // µs, windows only

	tb   table[int64]
	win  table[core.WindowState]
	logs table[*[]int64]
}

var _ redstream.Limiter = (*Limiter)(nil)

// NewLimiter returns a limiter for spec that decides in the module. It returns an error
// wrapping redstream.ErrInvalidConfig when spec or opts is invalid, and the error of
// [Default] when opts.Runtime is nil and the default runtime cannot be created.
func NewLimiter(spec redstream.Spec, opts Options) (*Limiter, error) {
	p, err := spec.Params()
	if err != nil {
		return nil, fmt.Errorf("wasmcore: %w", err)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &Limiter{spec: spec, params: p, opts: r, window: spec.Window.Microseconds()}
	switch p.Algorithm {
	case redstream.AlgorithmTokenBucket:
		l.fn, l.tb = fnTokenBucket, newTable[int64](r)
	case redstream.AlgorithmLeakyBucket:
		l.fn, l.tb = fnLeakyBucket, newTable[int64](r)
	case redstream.AlgorithmSlidingCounter:
		l.fn, l.win = fnSlidingCounter, newTable[core.WindowState](r)
	case redstream.AlgorithmFixedWindow:
		l.fn, l.win = fnFixedWindow, newTable[core.WindowState](r)
	case redstream.AlgorithmSlidingWindow:
		l.fn, l.logs = fnSlidingLog, newTable[*[]int64](r)
	}
	return l, nil
}

// Params returns the validated parameters of the limiter's spec.
func (l *Limiter) Params() redstream.Params { return l.params }

// TrackedKeys returns the number of keys whose state the limiter currently holds.
func (l *Limiter) TrackedKeys() int {
	switch l.fn {
	case fnTokenBucket, fnLeakyBucket:
		return l.tb.len()
	case fnSlidingLog:
		return l.logs.len()
	}
	return l.win.len()
}

// Allow is shorthand for AllowN(ctx, key, time.Time{}, 1): cost 1 at the limiter's clock.
func (l *Limiter) Allow(ctx context.Context, key string) (redstream.Decision, error) {
	return l.AllowN(ctx, key, time.Time{}, 1)
}

// AllowAt is shorthand for AllowN(ctx, key, now, 1).
func (l *Limiter) AllowAt(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	return l.AllowN(ctx, key, now, 1)
}

// AllowN decides a request of cost n for key at now (the zero time means Options.Clock).
// It returns redstream.ErrEmptyKey for an empty key, redstream.ErrInvalidCost for n <= 0,
// redstream.ErrCostTooLarge when n exceeds the limit and redstream.ErrInvalidTime for a
// time before the Unix epoch or after core.MaxTime, with a zero Decision. It waits for a
// free instance while ctx allows; an error wrapping ErrTrapped or ErrClosed (or ctx's
// error) means the decision was not made and the key's state is unchanged.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return redstream.Decision{}, fmt.Errorf("wasmcore: %w", err)
	}
	t := l.opts.micros(now)
	in, err := l.opts.rt.acquire(ctx)
	if err != nil {
		return redstream.Decision{}, err
	}
	var d core.Decision
	switch l.fn {
	case fnTokenBucket, fnLeakyBucket:
		d, err = l.stepGCRA(ctx, in, key, t, n)
	case fnSlidingLog:
		d, err = l.stepLog(ctx, in, key, t, n)
	default:
		d, err = l.stepWindow(ctx, in, key, t, n)
	}
	l.opts.rt.release(in)
	if err != nil {
		return redstream.Decision{}, err
	}
	return redstream.DecisionFromCore(d), nil
}

func (l *Limiter) stepGCRA(ctx context.Context, in *instance, key string, now, n int64) (core.Decision, error) {
	s := l.tb.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[key]
	tat, d, err := in.gcraStep(ctx, l.fn, l.spec.Capacity, l.spec.Rate, old, now, n)
	if err == nil && tat != old {
		if ok {
			s.m[key] = tat
		} else {
			l.tb.insert(s, key, tat, func(v int64) bool { return v <= now }) // GCRA.Idle
		}
	}
	return d, err
}

func (l *Limiter) stepWindow(ctx context.Context, in *instance, key string, now, n int64) (core.Decision, error) {
	s := l.win.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[key]
	var (
		st   core.WindowState
		d    core.Decision
		err  error
		idle func(core.WindowState) bool
	)
	limit := l.spec.Limit
	if l.fn == fnFixedWindow {
		st, d, err = in.fixedWindowStep(ctx, l.window, limit, old, now, n)
		idle = func(v core.WindowState) bool { return l.params.FixedWindow.Idle(v, now) }
	} else {
		st, d, err = in.slidingCounterStep(ctx, l.window, limit, old, now, n)
		idle = func(v core.WindowState) bool { return l.params.SlidingCounter.Idle(v, now) }
	}
	if err == nil && st != old {
		if ok {
			s.m[key] = st
		} else {
			l.win.insert(s, key, st, idle)
		}
	}
	return d, err
}

func (l *Limiter) stepLog(ctx context.Context, in *instance, key string, now, n int64) (core.Decision, error) {
	s := l.logs.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	lg, ok := s.m[key]
	var ts []int64
	if ok {
		ts = *lg
	}
	delta, d, err := in.slidingLogStep(ctx, l.window, l.spec.Limit, ts, now, n)
	if err != nil {
		return d, err
	}
	ts = applyDelta(ts, delta)
	switch {
	case ok:
		*lg = ts
	case len(ts) > 0:
		l.logs.insert(s, key, &ts, func(v *[]int64) bool { return logIdle(*v, l.window, now) })
	}
	return d, nil
}
