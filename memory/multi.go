package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// MultiLimiter applies several limits to every key, all-or-nothing: a request is admitted
// only if every limit admits it, and only then is it recorded in every limit. Its Decision
// is core.Combine of the limits' decisions: the smallest Remaining (with that limit's
// Limit) and the largest RetryAfter, ResetAfter and Delay.
//
// The limits of one key live in one entry of a sharded map and are decided under one lock,
// so the combination is atomic. A denied request changes no limit's state (sliding logs may
// drop entries that fell out of their window, which changes no answer). For the sliding log
// the check and the record are core.SlidingLog.Check and Record.
//
// A decision on a key already tracked allocates nothing when there are at most
// [MultiInline] limits. Keys whose every limit has fully recovered are evicted as by
// [Limiter].
//
// A MultiLimiter is safe for concurrent use. Its zero value is not usable; call
// [NewMultiLimiter]. Package redstream's Multi gives the limits names.
type MultiLimiter struct {
	params []redstream.Params
	kinds  []kind
	slots  []int // index of each limit in its kind's slice of a multiEntry
	nInts  int   // buckets
	nWins  int   // fixed windows and sliding counters
	nLogs  int   // sliding logs
	opts   resolved
	t      table[*multiEntry]
}

var _ redstream.Limiter = (*MultiLimiter)(nil)

// MultiInline is the number of limits a MultiLimiter decides without allocating.
const MultiInline = 8

// multiEntry is the state of one key: the TATs of its buckets, the states of its windows
// and the logs of its sliding logs, in the order of the specs.
type multiEntry struct {
	ints []int64
	wins []core.WindowState
	logs []core.Log
}

// NewMultiLimiter returns an all-or-nothing limiter of specs (at least one) on every key.
// It returns an error wrapping redstream.ErrInvalidConfig when specs is empty or a spec or
// opts is invalid; the message names the spec.
func NewMultiLimiter(specs []redstream.Spec, opts Options) (*MultiLimiter, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("memory: %w: no specs", redstream.ErrInvalidConfig)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	m := &MultiLimiter{opts: r, t: newTable[*multiEntry](r)}
	for i, spec := range specs {
		p, err := spec.Params()
		if err != nil {
			return nil, fmt.Errorf("memory: specs[%d]: %w", i, err)
		}
		k := kindOf(p.Algorithm)
		var slot int
		switch k {
		case kindTokenBucket, kindLeakyBucket:
			slot, m.nInts = m.nInts, m.nInts+1
		case kindSlidingLog:
			slot, m.nLogs = m.nLogs, m.nLogs+1
		default:
			slot, m.nWins = m.nWins, m.nWins+1
		}
		m.params = append(m.params, p)
		m.kinds = append(m.kinds, k)
		m.slots = append(m.slots, slot)
	}
	return m, nil
}

// Params returns the validated core parameters of each limit, in the order of the specs.
func (m *MultiLimiter) Params() []redstream.Params {
	return append([]redstream.Params(nil), m.params...)
}

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
// when n exceeds any limit's Limit. ctx is not used.
func (m *MultiLimiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return redstream.Decision{}, wrap(err)
	}
	t := m.opts.micros(now)

	var (
		dsBuf   [MultiInline]core.Decision
		intsBuf [MultiInline]int64
		winsBuf [MultiInline]core.WindowState
	)
	ds, ints, wins := dsBuf[:0], intsBuf[:0], winsBuf[:0]
	if len(m.kinds) > MultiInline {
		ds = make([]core.Decision, 0, len(m.kinds))
		ints = make([]int64, 0, m.nInts)
		wins = make([]core.WindowState, 0, m.nWins)
	}
	ints, wins = ints[:m.nInts], wins[:m.nWins]

	s, tag := m.t.locate(key)
	s.mu.Lock()
	slot, ok := s.find(key, tag)
	var e *multiEntry
	if ok {
		e = s.ents[slot].val
	} else {
		e = m.newEntry()
	}
	all := true
	for i, k := range m.kinds {
		p, j := &m.params[i], m.slots[i]
		var (
			d   core.Decision
			err error
		)
		switch k {
		case kindTokenBucket:
			ints[j], d, err = p.TokenBucket.Step(e.ints[j], t, n)
		case kindLeakyBucket:
			ints[j], d, err = p.LeakyBucket.Step(e.ints[j], t, n)
		case kindSlidingCounter:
			wins[j], d, err = p.SlidingCounter.Step(e.wins[j], t, n)
		case kindFixedWindow:
			wins[j], d, err = p.FixedWindow.Step(e.wins[j], t, n)
		case kindSlidingLog:
			d, err = p.SlidingLog.Check(&e.logs[j], t, n)
		}
		if err != nil {
			s.mu.Unlock()
			return redstream.Decision{}, fmt.Errorf("memory: limit %d: %w", i, err)
		}
		ds = append(ds, d)
		all = all && d.Allowed
	}
	if all {
		copy(e.ints, ints)
		copy(e.wins, wins)
		for i, k := range m.kinds {
			if k == kindSlidingLog {
				m.params[i].SlidingLog.Record(&e.logs[m.slots[i]], t, n)
			}
		}
		if !ok {
			m.t.insert(s, slot, key, tag, e, func(v *multiEntry) bool { return m.idle(v, t) })
		}
	}
	s.mu.Unlock()
	return redstream.DecisionFromCore(core.Combine(ds)), nil
}

func (m *MultiLimiter) newEntry() *multiEntry {
	return &multiEntry{
		ints: make([]int64, m.nInts),
		wins: make([]core.WindowState, m.nWins),
		logs: make([]core.Log, m.nLogs),
	}
}

// idle reports whether every limit of e is back to its initial state at now.
func (m *MultiLimiter) idle(e *multiEntry, now int64) bool {
	for i, k := range m.kinds {
		p, j := &m.params[i], m.slots[i]
		var idle bool
		switch k {
		case kindTokenBucket:
			idle = p.TokenBucket.Idle(e.ints[j], now)
		case kindLeakyBucket:
			idle = p.LeakyBucket.Idle(e.ints[j], now)
		case kindSlidingCounter:
			idle = p.SlidingCounter.Idle(e.wins[j], now)
		case kindFixedWindow:
			idle = p.FixedWindow.Idle(e.wins[j], now)
		case kindSlidingLog:
			idle = p.SlidingLog.Idle(&e.logs[j], now)
		}
		if !idle {
			return false
		}
	}
	return true
}

// TrackedKeys returns the number of keys whose state the limiter holds, as
// [Limiter.TrackedKeys] does.
func (m *MultiLimiter) TrackedKeys() int { return m.t.len() }
