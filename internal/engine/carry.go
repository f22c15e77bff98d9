package engine

import (
	"github.com/redstream-go/redstream/core"

	"github.com/redstream-go/redstream/internal/coreops"
)

// Carrier is where a successor limiter (one whose limits replace another's) finds the
// state a key has under the previous limits, and how it carries it (coreops.SeedState).
// Load returns a copy of the key's state under the previous limits (one per limit, index
// for index), which keeps it; false when the previous limiter holds nothing of the key.
// The successor seeds a key once: from then on it holds the key.
type Carrier struct {
	Load  func(key string) ([]core.State, bool)
	From  []core.Limit // the previous limits, one per limit
	Carry core.Carry
}

// Carry makes l a successor: a key l does not hold is seeded from c on its first decision
// (and stored, whatever the decision), then decided. It must be called before l decides.
func (l *Limiter) Carry(c *Carrier) { l.carry = c }

// Seeder is a Stepper that also seeds a successor's keys: the state of limit i seeded at
// now from the key's state old under the previous limit (coreops.SeedState with the
// Carrier's previous limit and strategy), computed where the Stepper steps (a WebAssembly
// instance). A Stepper that is not a Seeder seeds with core itself.
type Seeder interface {
	Seed(i int, old core.State, now int64) (core.State, error)
}

// seeded returns the state of key (which l does not hold) carried from the previous
// limits at now, seeded by st when it is a Seeder, and true when the previous limiter held
// it. A request the step will refuse (a time outside [0, core.MaxTime], a cost n above a
// limit's Max) seeds nothing, as the Redis scripts check both before they seed. An error of
// the Seeder leaves the key unseeded.
func (l *Limiter) seeded(st Stepper, key string, now, n int64) ([]core.State, bool, error) {
	if l.carry == nil || coreops.CheckTime(now) != nil {
		return nil, false, nil
	}
	for _, lim := range l.limits {
		if n > lim.Max() {
			return nil, false, nil
		}
	}
	old, ok := l.carry.Load(key)
	if !ok {
		return nil, false, nil
	}
	sd, _ := st.(Seeder)
	out := make([]core.State, len(l.limits))
	for j, lim := range l.limits {
		if j >= len(old) || j >= len(l.carry.From) {
			continue
		}
		if sd == nil {
			out[j] = coreops.SeedState(lim, l.carry.From[j], old[j], now, l.carry.Carry)
			continue
		}
		v, err := sd.Seed(j, old[j], now)
		if err != nil {
			return nil, false, err
		}
		out[j] = v
	}
	return out, true, nil
}

// insertOne stores the seeded state v of key in s (locked), which does not hold it (i is
// the slot Find returned), and returns its slot.
func (l *Limiter) insertOne(s *Shard[core.State], i int, key string, tag uint32, v core.State, now int64) int {
	lim := l.limits[0]
	l.one.Insert(s, i, key, tag, v, func(v core.State) bool { return lim.IdleState(&v, now) })
	j, _ := s.Find(key, tag)
	return j
}

// Load returns a copy of the state of key and true; false when l does not hold key. A log
// (the sliding log's, the concurrency limit's) is copied too: a successor keeps the log of a
// limit that did not change, and l may go on deciding with its own.
func (l *Limiter) Load(key string) ([]core.State, bool) {
	if len(l.limits) == 1 {
		s, tag := l.one.Locate(key)
		s.Lock()
		defer s.Unlock()
		i, ok := s.Find(key, tag)
		if !ok {
			return nil, false
		}
		return []core.State{copyState(*s.Val(i))}, true
	}
	s, tag := l.multi.Locate(key)
	s.Lock()
	defer s.Unlock()
	i, ok := s.Find(key, tag)
	if !ok {
		return nil, false
	}
	out := make([]core.State, len(*s.Val(i)))
	for j, v := range *s.Val(i) {
		out[j] = copyState(v)
	}
	return out, true
}

// copyState returns v with a copy of its log, if it has one.
func copyState(v core.State) core.State {
	if v.Log == nil {
		return v
	}
	lg := new(core.Log)
	for i := 0; i < v.Log.Len(); i++ {
		lg.Append(v.Log.At(i))
	}
	v.Log = lg
	return v
}

// Load returns the state of key (its TAT) and true; false when b does not hold key.
func (b *Buckets) Load(key string) ([]core.State, bool) {
	tat, ok := b.TAT(key)
	if !ok {
		return nil, false
	}
	return []core.State{{Words: [3]int64{tat}}}, true
}
