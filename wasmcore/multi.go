package wasmcore

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// MultiLimiter applies several limits to every key, all-or-nothing: a request is admitted
// only if every limit admits it, and only then is it recorded in every limit. Every limit's
// decision is computed by its step export in the module (steps are pure: they return the
// new state without storing it), and the decisions are merged with core.Combine: the
// smallest Remaining (with that limit's Limit) and the largest RetryAfter, ResetAfter and
// Delay.
//
// The limits of one key live in one entry of a sharded host-side map and are decided under
// one lock with one instance, so the combination is atomic. A denied request changes no
// limit's state. Keys whose every limit has fully recovered are evicted as by [Limiter].
//
// A MultiLimiter is safe for concurrent use. Its zero value is not usable; call
// [NewMultiLimiter].
type MultiLimiter struct {
	limits []multiLimit
	opts   resolved
	t      table[*multiEntry]
}

var _ redstream.Limiter = (*MultiLimiter)(nil)

// multiInline is the number of limits a decision handles without allocating.
const multiInline = 8

// multiLimit is one limit: its spec, validated parameters, step export and the index of its
// state in a multiEntry's slice for its kind.
type multiLimit struct {
	spec   redstream.Spec
	params redstream.Params
	fn     fn
	window int64
	slot   int
}

// multiEntry is the state of one key: TATs of its buckets, window states and logs.
type multiEntry struct {
	ints []int64
	wins []core.WindowState
	logs [][]int64
}

// NewMultiLimiter returns an all-or-nothing limiter of specs (at least one) on every key.
// It returns an error wrapping redstream.ErrInvalidConfig when specs is empty or a spec or
// opts is invalid; the message names the spec.
func NewMultiLimiter(specs []redstream.Spec, opts Options) (*MultiLimiter, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("wasmcore: %w: no specs", errInvalidConfig)
	}
	m := &MultiLimiter{}
	var nInts, nWins, nLogs int
	for i, spec := range specs {
		p, err := spec.Params()
		if err != nil {
			return nil, fmt.Errorf("wasmcore: specs[%d]: %w", i, err)
		}
		ml := multiLimit{spec: spec, params: p, window: spec.Window.Microseconds()}
		switch p.Algorithm {
		case redstream.AlgorithmTokenBucket:
			ml.fn, ml.slot, nInts = fnTokenBucket, nInts, nInts+1
		case redstream.AlgorithmLeakyBucket:
			ml.fn, ml.slot, nInts = fnLeakyBucket, nInts, nInts+1
		case redstream.AlgorithmFixedWindow:
			ml.fn, ml.slot, nWins = fnFixedWindow, nWins, nWins+1
		case redstream.AlgorithmSlidingCounter:
			ml.fn, ml.slot, nWins = fnSlidingCounter, nWins, nWins+1
		case redstream.AlgorithmSlidingWindow:
			ml.fn, ml.slot, nLogs = fnSlidingLog, nLogs, nLogs+1
		}
		m.limits = append(m.limits, ml)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	m.opts, m.t = r, newTable[*multiEntry](r)
	return m, nil
}

// Params returns the validated parameters of each limit, in the order of the specs.
func (m *MultiLimiter) Params() []redstream.Params {
	ps := make([]redstream.Params, len(m.limits))
	for i, l := range m.limits {
		ps[i] = l.params
	}
	return ps
}

// TrackedKeys returns the number of keys whose state the limiter currently holds.
func (m *MultiLimiter) TrackedKeys() int { return m.t.len() }

// Allow is shorthand for AllowN(ctx, key, time.Time{}, 1): cost 1 at the limiter's clock.
func (m *MultiLimiter) Allow(ctx context.Context, key string) (redstream.Decision, error) {
	return m.AllowN(ctx, key, time.Time{}, 1)
}

// AllowAt is shorthand for AllowN(ctx, key, now, 1).
func (m *MultiLimiter) AllowAt(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	return m.AllowN(ctx, key, now, 1)
}

// AllowN decides a request of cost n for key at now (the zero time means Options.Clock)
// against every limit. Errors are those of [Limiter.AllowN]; ErrCostTooLarge is returned
// when n exceeds any limit's Limit. No state changes on an error.
func (m *MultiLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return redstream.Decision{}, fmt.Errorf("wasmcore: %w", err)
	}
	t := m.opts.micros(now)
	in, err := m.opts.rt.acquire(ctx)
	if err != nil {
		return redstream.Decision{}, err
	}
	defer m.opts.rt.release(in)

	var (
		dsBuf     [multiInline]core.Decision
		intsBuf   [multiInline]int64
		winsBuf   [multiInline]core.WindowState
		deltasBuf [multiInline]logDelta
	)
	ds, ints, wins, deltas := dsBuf[:0], intsBuf[:0], winsBuf[:0], deltasBuf[:0]
	if len(m.limits) > multiInline {
		ds = make([]core.Decision, 0, len(m.limits))
		ints = make([]int64, 0, len(m.limits))
		wins = make([]core.WindowState, 0, len(m.limits))
		deltas = make([]logDelta, 0, len(m.limits))
	}

	s := m.t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		e = m.newEntry()
	}
	ints, wins, deltas = ints[:len(e.ints)], wins[:len(e.wins)], deltas[:len(e.logs)]
	all := true
	for i := range m.limits {
		l := &m.limits[i]
		var d core.Decision
		switch l.fn {
		case fnTokenBucket, fnLeakyBucket:
			ints[l.slot], d, err = in.gcraStep(ctx, l.fn, l.spec.Capacity, l.spec.Rate, e.ints[l.slot], t, n)
		case fnFixedWindow:
			wins[l.slot], d, err = in.fixedWindowStep(ctx, l.window, l.spec.Limit, e.wins[l.slot], t, n)
		case fnSlidingCounter:
			wins[l.slot], d, err = in.slidingCounterStep(ctx, l.window, l.spec.Limit, e.wins[l.slot], t, n)
		case fnSlidingLog:
			deltas[l.slot], d, err = in.slidingLogStep(ctx, l.window, l.spec.Limit, e.logs[l.slot], t, n)
		}
		if err != nil {
			return redstream.Decision{}, fmt.Errorf("wasmcore: limit %d: %w", i, err)
		}
		ds = append(ds, d)
		all = all && d.Allowed
	}
	if all {
		copy(e.ints, ints)
		copy(e.wins, wins)
		for j, dl := range deltas {
			e.logs[j] = applyDelta(e.logs[j], dl)
		}
		if !ok {
			m.t.insert(s, key, e, func(v *multiEntry) bool { return m.idle(v, t) })
		}
	}
	return redstream.DecisionFromCore(core.Combine(ds)), nil
}

func (m *MultiLimiter) newEntry() *multiEntry {
	var e multiEntry
	for _, l := range m.limits {
		switch l.fn {
		case fnTokenBucket, fnLeakyBucket:
			e.ints = append(e.ints, 0)
		case fnSlidingLog:
			e.logs = append(e.logs, nil)
		default:
			e.wins = append(e.wins, core.WindowState{})
		}
	}
	return &e
}

// idle reports whether every limit of e is back to its initial state at now.
func (m *MultiLimiter) idle(e *multiEntry, now int64) bool {
	for _, l := range m.limits {
		var idle bool
		switch l.fn {
		case fnTokenBucket, fnLeakyBucket:
			idle = e.ints[l.slot] <= now // GCRA.Idle
		case fnFixedWindow:
			idle = l.params.FixedWindow.Idle(e.wins[l.slot], now)
		case fnSlidingCounter:
			idle = l.params.SlidingCounter.Idle(e.wins[l.slot], now)
		case fnSlidingLog:
			idle = logIdle(e.logs[l.slot], l.window, now)
		}
		if !idle {
			return false
		}
	}
	return true
}

// applyDelta applies a sliding log step's delta to the log ts.
func applyDelta(ts []int64, d logDelta) []int64 {
	if d.Pruned > 0 {
		ts = ts[:copy(ts, ts[d.Pruned:])]
	}
	for i := int64(0); i < d.Appended; i++ {
		ts = append(ts, d.At)
	}
	return ts
}

// logIdle is core.SlidingLog.Idle on a log held as a slice.
func logIdle(ts []int64, window, now int64) bool {
	return len(ts) == 0 || ts[len(ts)-1] <= now-window
}
