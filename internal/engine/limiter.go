package engine

import (
	"fmt"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// Stepper decides limit i of a request for a key in state s without changing s, as
// coreops.CheckState does, natively ([Native]) or in a WebAssembly instance, writing the
// decision into *d and what CommitState must store into *next (both may be left as they
// are on an error). The kernel passes pointers into the locked shard's scratch space, so
// that the call through the interface makes no stack variable escape.
type Stepper interface {
	Check(i int, s *core.State, now, n int64, d *core.Decision, next *coreops.Next) error
}

// Native steps with core itself.
type Native []core.Limit

// Check calls CheckState of limit i.
func (ls Native) Check(i int, s *core.State, now, n int64, d *core.Decision, next *coreops.Next) error {
	return coreops.CheckState(ls[i], s, now, n, d, next)
}

// Inline is the number of limits a multi-limit decision handles without allocating.
const Inline = 8

// Limiter holds the per-key state of one or more limits and decides requests against all
// of them, all-or-nothing: a request is admitted only if every limit admits it, and only
// then is it committed to every limit. The decision is core.Combine of the limits'.
//
// The limits of one key live in one entry of a sharded table and are decided under its
// shard's lock, so a multi-limit decision is atomic. A key the table does not hold is
// decided from the zero state and stored only when admitted (a denial leaves nothing
// behind); storing a new key may first sweep its shard of the keys every limit of which is
// idle (core.Limit.IdleState).
//
// A Limiter is safe for concurrent use if its Stepper is used by one goroutine at a time
// (each call gets its own).
type Limiter struct {
	limits []core.Limit
	native Stepper // Native(limits)
	max    int64
	one    Table[core.State]   // a single limit
	multi  Table[[]core.State] // several limits
	carry  *Carrier            // a successor's previous limiter (carry.go); nil for none
}

// NewLimiter returns a limiter of limits (at least one) configured by c.
func NewLimiter(limits []core.Limit, c Config) *Limiter {
	l := &Limiter{limits: limits, native: Native(limits), max: core.MaxCount}
	for _, lim := range limits {
		l.max = min(l.max, lim.Max())
	}
	if len(limits) == 1 {
		l.one = NewTable[core.State](c)
	} else {
		l.multi = NewTable[[]core.State](c)
	}
	return l
}

// Limits returns the limits, in a new slice.
func (l *Limiter) Limits() []core.Limit { return append([]core.Limit(nil), l.limits...) }

// Max returns the largest cost every limit admits.
func (l *Limiter) Max() int64 { return l.max }

// Decide decides a request of cost n for key at now with st; a nil st steps natively. It
// is DecideInto for callers that want core's decision.
func (l *Limiter) Decide(st Stepper, key string, now, n int64) (core.Decision, error) {
	var out redstream.Decision
	err := l.DecideInto(&out, st, key, now, n)
	return coreOf(&out), err
}

// DecideNative is Decide(nil, key, now, n): core steps, in one call on a key already held.
func (l *Limiter) DecideNative(key string, now, n int64) (core.Decision, error) {
	var out redstream.Decision
	err := l.DecideNativeInto(&out, key, now, n)
	return coreOf(&out), err
}

// DecideInto decides a request of cost n for key at now with st (nil: natively) into *out.
// Every call layer of the kernel writes its decision through a pointer: a Decision is too
// large to be returned in registers, and Go returns one by storing it and copying it,
// which stalls on store-to-load forwarding at each layer (see convert). An error of limit
// i of a multi-limit is prefixed "limit i: ".
func (l *Limiter) DecideInto(out *redstream.Decision, st Stepper, key string, now, n int64) error {
	if st == nil {
		return l.DecideNativeInto(out, key, now, n)
	}
	if len(l.limits) == 1 {
		return l.decideOne(out, st, key, now, n)
	}
	d, err := l.decideMulti(st, key, now, n)
	convert(out, &d)
	return err
}

// DecideNativeInto is DecideInto(out, nil, key, now, n): core steps, in one call on a key
// already held.
//
// A single limit decides a key already held with one call to core.Limit.StepState, in
// place on the key's state under the shard lock, writing the decision into the shard's
// scratch decision (memory the lock owns, so that the pointer passed through the call does
// not make a stack variable escape), and converts it once into the caller's.
func (l *Limiter) DecideNativeInto(out *redstream.Decision, key string, now, n int64) error {
	if len(l.limits) != 1 {
		d, err := l.decideMulti(l.native, key, now, n)
		convert(out, &d)
		return err
	}
	s, tag := l.one.Locate(key)
	s.Lock()
	i, ok := s.Find(key, tag)
	var err error
	if ok {
		err = l.limits[0].StepState(s.Val(i), now, n, &s.scratch)
		convert(out, &s.scratch)
	} else {
		var d core.Decision
		d, err = l.decideOneNew(s, i, key, tag, now, n)
		convert(out, &d)
	}
	s.Unlock()
	return err
}

func (l *Limiter) decideOne(out *redstream.Decision, st Stepper, key string, now, n int64) error {
	s, tag := l.one.Locate(key)
	s.Lock()
	defer s.Unlock()
	d, next := &s.scratch, &s.next
	i, ok := s.Find(key, tag)
	if !ok && l.carry != nil {
		e, seeded, err := l.seeded(st, key, now, n)
		if err != nil {
			return err
		}
		if seeded {
			i, ok = l.insertOne(s, i, key, tag, e[0], now), true
		}
	}
	if !ok {
		var v core.State
		err := st.Check(0, &v, now, n, d, next)
		if err != nil {
			return err
		}
		convert(out, d)
		if d.Allowed {
			lim := l.limits[0]
			coreops.CommitState(lim, &v, *next)
			l.one.Insert(s, i, key, tag, v, func(v core.State) bool { return lim.IdleState(&v, now) })
		}
		return nil
	}
	p := s.Val(i)
	if err := st.Check(0, p, now, n, d, next); err != nil {
		return err
	}
	if d.Allowed {
		coreops.CommitState(l.limits[0], p, *next)
	}
	convert(out, d)
	return nil
}

// decideOneNew decides natively for a key s (locked) does not hold; i is the slot Find
// returned. It is apart so that only a new key's state is allocated.
func (l *Limiter) decideOneNew(s *Shard[core.State], i int, key string, tag uint32, now, n int64) (core.Decision, error) {
	lim := l.limits[0]
	var (
		v    core.State
		d    core.Decision
		next coreops.Next
	)
	if l.carry != nil {
		if e, seeded, _ := l.seeded(nil, key, now, n); seeded { // native seeding never fails
			j := l.insertOne(s, i, key, tag, e[0], now)
			err := lim.StepState(s.Val(j), now, n, &d)
			return d, err
		}
	}
	err := coreops.CheckState(lim, &v, now, n, &d, &next)
	if err == nil && d.Allowed {
		coreops.CommitState(lim, &v, next)
		l.one.Insert(s, i, key, tag, v, func(v core.State) bool { return lim.IdleState(&v, now) })
	}
	return d, err
}

func (l *Limiter) decideMulti(st Stepper, key string, now, n int64) (core.Decision, error) {
	s, tag := l.multi.Locate(key)
	s.Lock()
	defer s.Unlock()
	i, ok := s.Find(key, tag)
	if !ok && l.carry != nil {
		e, seeded, err := l.seeded(st, key, now, n)
		if err != nil {
			return core.Decision{}, err
		}
		if seeded {
			l.multi.Insert(s, i, key, tag, e, func(v []core.State) bool { return l.idle(v, now) })
			return l.decideAll(s, st, e, now, n, nil)
		}
	}
	if !ok {
		e := make([]core.State, len(l.limits))
		return l.decideAll(s, st, e, now, n, func() {
			l.multi.Insert(s, i, key, tag, e, func(v []core.State) bool { return l.idle(v, now) })
		})
	}
	return l.decideAll(s, st, *s.Val(i), now, n, nil)
}

// decideAll decides a request against every limit of a key in state e, and when every
// limit admits commits it to all of them and calls store (if not nil).
func (l *Limiter) decideAll(sh *Shard[[]core.State], st Stepper, e []core.State, now, n int64, store func()) (core.Decision, error) {
	var (
		dsBuf   [Inline]core.Decision
		nextBuf [Inline]coreops.Next
	)
	ds, nexts := dsBuf[:0], nextBuf[:0]
	if len(l.limits) > Inline {
		ds = make([]core.Decision, 0, len(l.limits))
		nexts = make([]coreops.Next, 0, len(l.limits))
	}
	all := true
	d, next := &sh.scratch, &sh.next
	for j := range l.limits {
		if err := st.Check(j, &e[j], now, n, d, next); err != nil {
			return core.Decision{}, fmt.Errorf("limit %d: %w", j, err)
		}
		ds = append(ds, *d)
		nexts = append(nexts, *next)
		all = all && d.Allowed
	}
	if all {
		for j, lim := range l.limits {
			coreops.CommitState(lim, &e[j], nexts[j])
		}
		if store != nil {
			store()
		}
	}
	return core.Combine(ds), nil
}

// idle reports whether every limit of e is back to its initial state at now.
func (l *Limiter) idle(e []core.State, now int64) bool {
	for j, lim := range l.limits {
		if !lim.IdleState(&e[j], now) {
			return false
		}
	}
	return true
}

// TrackedKeys returns the number of keys whose state the limiter holds, counting keys that
// have recovered but not been swept yet. Each shard is counted under its lock; the total is
// exact when no other goroutine is deciding.
func (l *Limiter) TrackedKeys() int {
	if len(l.limits) == 1 {
		return l.one.Len()
	}
	return l.multi.Len()
}
