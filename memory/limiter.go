package memory

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// Limiter is an in-process rate limiter for any [redstream.Algorithm], deciding with the
// algorithm's core step. State lives in a hash table keyed by the user key and split into
// Options.Shards shards; a decision on a key already tracked allocates nothing. Keys whose
// state has fully recovered are evicted by amortized sweeping (see Options.SweepThreshold),
// so memory stays proportional to the keys that still matter.
//
// Per key it stores: for the token and leaky buckets the TAT, packed with a hash tag into
// one 64-bit word next to the key (24 bytes a slot, 27 to 55 bytes a key with the table
// between 7/16 and 7/8 full), decided without a lock by compare-and-swap; for the windows,
// under the shard's mutex, the start and count of the current window (fixed window); start,
// count and previous count (sliding counter); the timestamps of admitted units in a ring
// buffer of at most Limit entries, reused across decisions (sliding window log). Keys are
// referenced, not copied.
//
// An evicted key is indistinguishable from a new one for every request at or after the time
// of the sweep that evicted it. A request that claims an earlier time (a client clock behind
// the one that triggered the sweep) on an evicted key is decided as for a new key.
//
// A Limiter is safe for concurrent use. Its zero value is not usable; call [NewLimiter].
type Limiter struct {
	kind   kind
	params redstream.Params
	opts   resolved

	// token and leaky bucket: the GCRA parameters, and whether decisions carry the leaky
	// bucket's shaping delay
	gcra    core.GCRA
	shaping bool

	// token and leaky bucket: the TAT, keys of up to maxShortKey bytes inline
	tbShort bucketTable[shortKey]
	tbLong  bucketTable[string]
	win     table[core.WindowState] // sliding counter
	fix     table[fixedState]       // fixed window
	logs    table[*core.Log]        // sliding window log
}

var _ redstream.Limiter = (*Limiter)(nil)

// kind is an Algorithm as a small integer, so the hot path switches on an int.
type kind uint8

const (
	kindTokenBucket kind = iota
	kindLeakyBucket
	kindSlidingLog
	kindSlidingCounter
	kindFixedWindow
)

func kindOf(a redstream.Algorithm) kind {
	switch a {
	case redstream.AlgorithmTokenBucket:
		return kindTokenBucket
	case redstream.AlgorithmLeakyBucket:
		return kindLeakyBucket
	case redstream.AlgorithmSlidingWindow:
		return kindSlidingLog
	case redstream.AlgorithmSlidingCounter:
		return kindSlidingCounter
	}
	return kindFixedWindow
}

// fixedState is core.WindowState without the Prev field, which a fixed window never uses.
type fixedState struct{ start, count int64 }

func (f fixedState) core() core.WindowState { return core.WindowState{Start: f.start, Count: f.count} }

// NewLimiter returns an in-process limiter for spec. It validates spec with Spec.Params and
// returns an error wrapping redstream.ErrInvalidConfig when spec or opts is invalid (for
// example a window or limit <= 0, a capacity < 1, a rate <= 0, NaN or infinite values).
func NewLimiter(spec redstream.Spec, opts Options) (*Limiter, error) {
	p, err := spec.Params()
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &Limiter{kind: kindOf(p.Algorithm), params: p, opts: r}
	switch p.Algorithm {
	case redstream.AlgorithmTokenBucket:
		l.gcra = p.TokenBucket.GCRA
	case redstream.AlgorithmLeakyBucket:
		l.gcra, l.shaping = p.LeakyBucket.GCRA, true
	}
	switch l.kind {
	case kindTokenBucket, kindLeakyBucket:
		l.tbShort, l.tbLong = newBucketTable[shortKey](r), newBucketTable[string](r)
	case kindSlidingCounter:
		l.win = newTable[core.WindowState](r)
	case kindFixedWindow:
		l.fix = newTable[fixedState](r)
	case kindSlidingLog:
		l.logs = newTable[*core.Log](r)
	}
	return l, nil
}

// Params returns the validated core parameters the limiter decides with.
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
// time before the Unix epoch or after core.MaxTime, each with a zero Decision and nothing
// recorded. Time going backwards is answered as core defines it for the algorithm.
//
// ctx is not used: a decision does no I/O and waits only for the lock of one shard.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return redstream.Decision{}, wrap(err)
	}
	t := l.opts.micros(now)
	switch l.kind {
	// The buckets keep keys of up to maxShortKey bytes inline (see bucketTable).
	case kindTokenBucket, kindLeakyBucket:
		if len(key) <= maxShortKey {
			return stepBucket(l, &l.tbShort, packShort(key), key, t, n)
		}
		return stepBucket(l, &l.tbLong, key, key, t, n)
	case kindSlidingLog:
		return l.stepSlidingLog(key, t, n)
	case kindSlidingCounter:
		return l.stepSlidingCounter(key, t, n)
	}
	return l.stepFixedWindow(key, t, n)
}

// wrap prefixes an error of core with the package name.
func wrap(err error) error { return fmt.Errorf("memory: %w", err) }

// The window steps lock the key's shard and run the core step on the stored state, storing
// the state it returns (a core step returns the state unchanged when it denies or fails). A
// key the shard does not hold is decided from the zero state and stored only when admitted
// (a denial leaves nothing behind), which may first sweep the shard.

// stepBucket decides a token- or leaky-bucket key already held without a lock (see
// bucketTable): read the TAT, decide with core.GCRA.Decide, and compare-and-swap the new TAT
// in, again if another goroutine changed it meanwhile; a denial stores nothing. k is key as
// the table stores it.
func stepBucket[K bucketKey](l *Limiter, t *bucketTable[K], k K, key string, now, n int64) (redstream.Decision, error) {
	s, home, tag := t.locate(key)
	if sl := s.slots.Load(); sl != nil {
		if i, ok := find(*sl, k, home, tag); ok {
			p := &(*sl)[i].word
			for {
				w := atomic.LoadUint64(p)
				if w>>tagBits == frozenTAT {
					break // the slots are being rebuilt: wait on the lock
				}
				old := int64(w >> tagBits)
				tat, d, err := l.gcra.Decide(old, now, n, l.shaping)
				if tat == old || atomic.CompareAndSwapUint64(p, w, uint64(tat)<<tagBits|tag) {
					if err != nil {
						return redstream.Decision{}, wrap(err)
					}
					return redstream.DecisionFromCore(d), nil
				}
			}
		}
	}
	return stepGCRALocked(l, t, s, k, home, tag, now, n)
}

// stepGCRALocked decides under the shard lock: for a key not held yet (stored only when
// admitted, which may sweep the shard first), or one whose slots were being rebuilt.
func stepGCRALocked[K bucketKey](l *Limiter, t *bucketTable[K], s *bucketShard[K], k K, home, tag uint64, now, n int64) (redstream.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := -1
	if sl := s.slots.Load(); sl != nil {
		var ok bool
		if i, ok = find(*sl, k, home, tag); ok {
			// The current slots are never frozen while the lock is held, but lock-free
			// deciders may still race on the TAT.
			p := &(*sl)[i].word
			for {
				w := atomic.LoadUint64(p)
				old := int64(w >> tagBits)
				tat, d, err := l.gcra.Decide(old, now, n, l.shaping)
				if tat == old || atomic.CompareAndSwapUint64(p, w, uint64(tat)<<tagBits|tag) {
					if err != nil {
						return redstream.Decision{}, wrap(err)
					}
					return redstream.DecisionFromCore(d), nil
				}
			}
		}
	}
	tat, d, err := l.gcra.Decide(0, now, n, l.shaping)
	if err != nil {
		return redstream.Decision{}, wrap(err)
	}
	if d.Allowed {
		g := l.gcra
		t.insert(s, i, k, home, tag, tat, func(v int64) bool { return g.Idle(v, now) })
	}
	return redstream.DecisionFromCore(d), nil
}

func (l *Limiter) stepSlidingCounter(key string, now, n int64) (redstream.Decision, error) {
	p := l.params.SlidingCounter
	s, tag := l.win.locate(key)
	s.mu.Lock()
	i, ok := s.find(key, tag)
	var (
		st  core.WindowState
		d   core.Decision
		err error
	)
	if ok {
		e := &s.ents[i]
		st, d, err = p.Step(e.val, now, n)
		e.val = st
	} else if st, d, err = p.Step(core.WindowState{}, now, n); err == nil && d.Allowed {
		l.win.insert(s, i, key, tag, st, func(v core.WindowState) bool { return p.Idle(v, now) })
	}
	s.mu.Unlock()
	if err != nil {
		return redstream.Decision{}, wrap(err)
	}
	return redstream.DecisionFromCore(d), nil
}

func (l *Limiter) stepFixedWindow(key string, now, n int64) (redstream.Decision, error) {
	p := l.params.FixedWindow
	s, tag := l.fix.locate(key)
	s.mu.Lock()
	i, ok := s.find(key, tag)
	var (
		st  core.WindowState
		d   core.Decision
		err error
	)
	if ok {
		e := &s.ents[i]
		st, d, err = p.Step(e.val.core(), now, n)
		e.val = fixedState{st.Start, st.Count}
	} else if st, d, err = p.Step(core.WindowState{}, now, n); err == nil && d.Allowed {
		l.fix.insert(s, i, key, tag, fixedState{st.Start, st.Count},
			func(v fixedState) bool { return p.Idle(v.core(), now) })
	}
	s.mu.Unlock()
	if err != nil {
		return redstream.Decision{}, wrap(err)
	}
	return redstream.DecisionFromCore(d), nil
}

func (l *Limiter) stepSlidingLog(key string, now, n int64) (redstream.Decision, error) {
	p := l.params.SlidingLog
	s, tag := l.logs.locate(key)
	s.mu.Lock()
	i, ok := s.find(key, tag)
	var (
		d   core.Decision
		err error
	)
	if ok {
		d, err = p.Step(s.ents[i].val, now, n)
	} else {
		lg := new(core.Log)
		if d, err = p.Step(lg, now, n); err == nil && d.Allowed {
			l.logs.insert(s, i, key, tag, lg, func(v *core.Log) bool { return p.Idle(v, now) })
		}
	}
	s.mu.Unlock()
	if err != nil {
		return redstream.Decision{}, wrap(err)
	}
	return redstream.DecisionFromCore(d), nil
}

// TrackedKeys returns the number of keys whose state the limiter holds, counting keys that
// have recovered but not been swept yet. Each shard is counted under its lock; the total is
// exact when no other goroutine is deciding.
func (l *Limiter) TrackedKeys() int {
	switch l.kind {
	case kindTokenBucket, kindLeakyBucket:
		return l.tbShort.len() + l.tbLong.len()
	case kindSlidingCounter:
		return l.win.len()
	case kindFixedWindow:
		return l.fix.len()
	}
	return l.logs.len()
}
