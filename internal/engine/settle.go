package engine

import (
	"fmt"
	"hash/maphash"
	"sync/atomic"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
	"github.com/redstream-go/redstream/internal/coreops"
)

// Settler settles limit i of a reservation, natively ([Native]) or in a WebAssembly
// instance: the charge of an admitted decision (coreops.ChargeOf) and the settlement of
// a key's state (coreops.SettleState, changing *s). Like a Stepper, it is used by one
// goroutine at a time.
type Settler interface {
	Charge(i int, now, n int64, d *core.Decision) (coreops.Charge, error)
	Settle(i int, s *core.State, c coreops.Charge, now, actual int64) error
}

// Charge calls ChargeOf of limit i.
func (ls Native) Charge(i int, now, n int64, d *core.Decision) (coreops.Charge, error) {
	return coreops.ChargeOf(ls[i], now, n, d), nil
}

// Settle calls SettleState of limit i.
func (ls Native) Settle(i int, s *core.State, c coreops.Charge, now, actual int64) error {
	_, err := coreops.SettleState(ls[i], s, c, now, actual)
	return err
}

// Reserve decides a request of cost n for key at now like DecideNative and, when every
// limit admits it, returns what it took from each limit (coreops.ChargeOf), in the
// order of the limits; a denial takes nothing and returns no charges. A successor seeds a
// key it does not hold first, exactly as a decision does (and stores it, whatever the
// decision).
func (l *Limiter) Reserve(key string, now, n int64) (core.Decision, []coreops.Charge, error) {
	return l.ReserveWith(l.native, Native(l.limits), key, now, n)
}

// ReserveWith is Reserve deciding with st (and seeding with it when it is a Seeder) and
// charging with se.
func (l *Limiter) ReserveWith(st Stepper, se Settler, key string, now, n int64) (core.Decision, []coreops.Charge, error) {
	if len(l.limits) == 1 {
		s, tag := l.one.Locate(key)
		s.Lock()
		defer s.Unlock()
		i, ok := s.Find(key, tag)
		if !ok && l.carry != nil {
			e, seeded, err := l.seeded(st, key, now, n)
			if err != nil {
				return core.Decision{}, nil, err
			}
			if seeded {
				i, ok = l.insertOne(s, i, key, tag, e[0], now), true
			}
		}
		var v core.State
		p := &v
		if ok {
			p = s.Val(i)
		}
		lim := l.limits[0]
		var (
			d    core.Decision
			next coreops.Next
		)
		if err := st.Check(0, p, now, n, &d, &next); err != nil || !d.Allowed {
			return d, nil, err
		}
		c, err := se.Charge(0, now, n, &d)
		if err != nil {
			return core.Decision{}, nil, err
		}
		coreops.CommitState(lim, p, next)
		if !ok {
			l.one.Insert(s, i, key, tag, v, func(v core.State) bool { return lim.IdleState(&v, now) })
		}
		return d, []coreops.Charge{c}, nil
	}
	s, tag := l.multi.Locate(key)
	s.Lock()
	defer s.Unlock()
	i, ok := s.Find(key, tag)
	var e []core.State
	if !ok && l.carry != nil {
		seed, seeded, err := l.seeded(st, key, now, n)
		if err != nil {
			return core.Decision{}, nil, err
		}
		if seeded {
			l.multi.Insert(s, i, key, tag, seed, func(v []core.State) bool { return l.idle(v, now) })
			e, ok = seed, true
		}
	}
	switch {
	case e != nil:
	case ok:
		e = *s.Val(i)
	default:
		e = make([]core.State, len(l.limits))
	}
	ds := make([]core.Decision, len(l.limits))
	nexts := make([]coreops.Next, len(l.limits))
	all := true
	for j := range l.limits {
		if err := st.Check(j, &e[j], now, n, &ds[j], &nexts[j]); err != nil {
			return core.Decision{}, nil, fmt.Errorf("limit %d: %w", j, err)
		}
		all = all && ds[j].Allowed
	}
	if !all {
		return core.Combine(ds), nil, nil
	}
	cs := make([]coreops.Charge, len(l.limits))
	for j := range l.limits {
		c, err := se.Charge(j, now, n, &ds[j])
		if err != nil {
			return core.Decision{}, nil, fmt.Errorf("limit %d: %w", j, err)
		}
		cs[j] = c
	}
	for j, lim := range l.limits {
		coreops.CommitState(lim, &e[j], nexts[j])
	}
	if !ok {
		l.multi.Insert(s, i, key, tag, e, func(v []core.State) bool { return l.idle(v, now) })
	}
	return core.Combine(ds), cs, nil
}

// Settle applies the actual cost of a reservation whose charges Reserve returned to every
// limit of key at now (coreops.SettleState). A key forgotten since is settled from a new
// key's state and stored again only when the settlement left it not idle.
func (l *Limiter) Settle(key string, cs []coreops.Charge, now, actual int64) error {
	return l.SettleWith(Native(l.limits), key, cs, now, actual)
}

// SettleWith is Settle settling with se.
func (l *Limiter) SettleWith(se Settler, key string, cs []coreops.Charge, now, actual int64) error {
	if len(cs) != len(l.limits) {
		return fmt.Errorf("%w: %d charges for %d limits", core.ErrInvalidConfig, len(cs), len(l.limits))
	}
	if len(l.limits) == 1 {
		s, tag := l.one.Locate(key)
		s.Lock()
		defer s.Unlock()
		i, ok := s.Find(key, tag)
		var v core.State
		p := &v
		if ok {
			p = s.Val(i)
		}
		lim := l.limits[0]
		if err := se.Settle(0, p, cs[0], now, actual); err != nil {
			return err
		}
		if !ok && !lim.IdleState(&v, now) {
			l.one.Insert(s, i, key, tag, v, func(v core.State) bool { return lim.IdleState(&v, now) })
		}
		return nil
	}
	s, tag := l.multi.Locate(key)
	s.Lock()
	defer s.Unlock()
	i, ok := s.Find(key, tag)
	var e []core.State
	if ok {
		e = *s.Val(i)
	} else {
		e = make([]core.State, len(l.limits))
	}
	for j := range l.limits {
		if err := se.Settle(j, &e[j], cs[j], now, actual); err != nil {
			return fmt.Errorf("limit %d: %w", j, err)
		}
	}
	if !ok && !l.idle(e, now) {
		l.multi.Insert(s, i, key, tag, e, func(v []core.State) bool { return l.idle(v, now) })
	}
	return nil
}

// Reserve is Limiter.Reserve for a single bucket: the decision and, when admitted, its
// charge.
func (b *Buckets) Reserve(key string, now, n int64) (core.Decision, []coreops.Charge, error) {
	d, err := b.Decide(key, now, n)
	if err != nil || !d.Allowed {
		return d, nil, err
	}
	return d, []coreops.Charge{coreops.ChargeOf(b.g.lim, now, n, &d)}, nil
}

// Settle is Limiter.Settle for a single bucket: the TAT of key is settled by
// compare-and-swap under the shard lock (lock-free deciders may race on it), or stored
// for a key forgotten since when the settlement left it not idle.
func (b *Buckets) Settle(key string, cs []coreops.Charge, now, actual int64) error {
	if len(cs) != 1 {
		return fmt.Errorf("%w: %d charges for 1 limit", core.ErrInvalidConfig, len(cs))
	}
	if len(key) <= maxShortKey {
		k := packShort(key)
		return settleBucket(b, &b.short, k, hashShort(&b.short.short, k), cs[0], now, actual)
	}
	return settleBucket(b, &b.long, key, maphash.String(b.long.seed, key), cs[0], now, actual)
}

func settleBucket[K bucketKey](b *Buckets, t *bucketTable[K], k K, h uint64, c coreops.Charge, now, actual int64) error {
	s, home, tag := t.locate(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	i := -1
	if sl := s.slots.Load(); sl != nil {
		var ok bool
		if i, ok = find(*sl, k, home, tag); ok {
			p := &(*sl)[i].word
			for {
				w := atomic.LoadUint64(p)
				st := core.State{Words: [3]int64{int64(w >> tagBits)}}
				if _, err := coreops.SettleState(b.g.lim, &st, c, now, actual); err != nil {
					return err
				}
				if atomic.CompareAndSwapUint64(p, w, uint64(st.Words[0])<<tagBits|tag) {
					return nil
				}
			}
		}
	}
	var st core.State
	if _, err := coreops.SettleState(b.g.lim, &st, c, now, actual); err != nil {
		return err
	}
	if !corekit.GCRAIdle(st.Words[0], now) {
		t.insert(s, i, k, home, tag, st.Words[0], func(v int64) bool { return corekit.GCRAIdle(v, now) })
	}
	return nil
}
