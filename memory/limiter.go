package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// Limiter is an in-process rate limiter for any [redstream.Algorithm], deciding with the
// algorithm's core step. State lives in a sharded map keyed by the user key, one mutex per
// shard; a decision on a key already tracked allocates nothing. Keys whose state has fully
// recovered are evicted by amortized sweeping (see Options.SweepThreshold), so memory stays
// proportional to the keys that still matter.
//
// Per key it stores: the TAT as one int64 (token and leaky bucket); the start and count of
// the current window (fixed window); start, count and previous count (sliding counter);
// the timestamps of admitted units in a ring buffer of at most Limit entries that is reused
// across decisions (sliding window log).
//
// A Limiter is safe for concurrent use. Its zero value is not usable; call [NewLimiter].
type Limiter struct {
	params redstream.Params
	opts   resolved

	tb   table[int64]            // token and leaky bucket: TAT
	win  table[core.WindowState] // sliding counter
	fix  table[fixedState]       // fixed window
	logs table[*core.Log]        // sliding window log
}

var _ redstream.Limiter = (*Limiter)(nil)

// fixedState is core.WindowState without the Prev field, which a fixed window never uses.
type fixedState struct{ start, count int64 }

// NewLimiter returns an in-process limiter for spec. It returns an error wrapping
// redstream.ErrInvalidConfig when spec or opts is invalid.
func NewLimiter(spec redstream.Spec, opts Options) (*Limiter, error) {
	p, err := spec.Params()
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &Limiter{params: p, opts: r}
	switch p.Algorithm {
	case redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket:
		l.tb = newTable[int64](r)
	case redstream.AlgorithmSlidingCounter:
		l.win = newTable[core.WindowState](r)
	case redstream.AlgorithmFixedWindow:
		l.fix = newTable[fixedState](r)
	case redstream.AlgorithmSlidingWindow:
		l.logs = newTable[*core.Log](r)
	}
	return l, nil
}

// Params returns the validated parameters the limiter decides with.
func (l *Limiter) Params() redstream.Params { return l.params }

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
// time before the Unix epoch or after core.MaxTime; errors come with a zero Decision.
// Time going backwards is answered as core defines it for the algorithm. ctx is not used:
// a decision does no I/O and waits only for the lock of the key's shard.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return redstream.Decision{}, fmt.Errorf("memory: %w", err)
	}
	t := l.opts.micros(now)
	var (
		d   core.Decision
		err error
	)
	switch l.params.Algorithm {
	case redstream.AlgorithmTokenBucket:
		d, err = l.stepTokenBucket(key, t, n)
	case redstream.AlgorithmLeakyBucket:
		d, err = l.stepLeakyBucket(key, t, n)
	case redstream.AlgorithmSlidingWindow:
		d, err = l.stepSlidingLog(key, t, n)
	case redstream.AlgorithmSlidingCounter:
		d, err = l.stepSlidingCounter(key, t, n)
	case redstream.AlgorithmFixedWindow:
		d, err = l.stepFixedWindow(key, t, n)
	}
	if err != nil {
		return redstream.Decision{}, fmt.Errorf("memory: %w", err)
	}
	return redstream.DecisionFromCore(d), nil
}

func (l *Limiter) stepTokenBucket(key string, now, n int64) (core.Decision, error) {
	p := l.params.TokenBucket
	s := l.tb.shard(key)
	s.mu.Lock()
	old, ok := s.m[key]
	tat, d, err := p.Step(old, now, n)
	if err == nil && tat != old {
		if ok {
			s.m[key] = tat
		} else {
			l.tb.insert(s, key, tat, func(v int64) bool { return p.Idle(v, now) })
		}
	}
	s.mu.Unlock()
	return d, err
}

func (l *Limiter) stepLeakyBucket(key string, now, n int64) (core.Decision, error) {
	p := l.params.LeakyBucket
	s := l.tb.shard(key)
	s.mu.Lock()
	old, ok := s.m[key]
	tat, d, err := p.Step(old, now, n)
	if err == nil && tat != old {
		if ok {
			s.m[key] = tat
		} else {
			l.tb.insert(s, key, tat, func(v int64) bool { return p.Idle(v, now) })
		}
	}
	s.mu.Unlock()
	return d, err
}

func (l *Limiter) stepSlidingCounter(key string, now, n int64) (core.Decision, error) {
	p := l.params.SlidingCounter
	s := l.win.shard(key)
	s.mu.Lock()
	old, ok := s.m[key]
	st, d, err := p.Step(old, now, n)
	if err == nil && st != old {
		if ok {
			s.m[key] = st
		} else {
			l.win.insert(s, key, st, func(v core.WindowState) bool { return p.Idle(v, now) })
		}
	}
	s.mu.Unlock()
	return d, err
}

func (l *Limiter) stepFixedWindow(key string, now, n int64) (core.Decision, error) {
	p := l.params.FixedWindow
	s := l.fix.shard(key)
	s.mu.Lock()
	old, ok := s.m[key]
	st, d, err := p.Step(core.WindowState{Start: old.start, Count: old.count}, now, n)
	if nw := (fixedState{st.Start, st.Count}); err == nil && nw != old {
		if ok {
			s.m[key] = nw
		} else {
			l.fix.insert(s, key, nw, func(v fixedState) bool {
				return p.Idle(core.WindowState{Start: v.start, Count: v.count}, now)
			})
		}
	}
	s.mu.Unlock()
	return d, err
}

func (l *Limiter) stepSlidingLog(key string, now, n int64) (core.Decision, error) {
	p := l.params.SlidingLog
	s := l.logs.shard(key)
	s.mu.Lock()
	lg, ok := s.m[key]
	if ok {
		d, err := p.Step(lg, now, n)
		s.mu.Unlock()
		return d, err
	}
	lg = new(core.Log)
	d, err := p.Step(lg, now, n)
	if err == nil && lg.Len() > 0 {
		l.logs.insert(s, key, lg, func(v *core.Log) bool { return p.Idle(v, now) })
	}
	s.mu.Unlock()
	return d, err
}

// TrackedKeys returns the number of keys whose state the limiter holds. It includes keys
// that have recovered but not been swept yet, and is exact at the moment each shard is
// counted.
func (l *Limiter) TrackedKeys() int {
	switch l.params.Algorithm {
	case redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket:
		return l.tb.len()
	case redstream.AlgorithmSlidingCounter:
		return l.win.len()
	case redstream.AlgorithmFixedWindow:
		return l.fix.len()
	case redstream.AlgorithmSlidingWindow:
		return l.logs.len()
	}
	return 0
}
