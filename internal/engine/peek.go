package engine

import (
	"fmt"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// Peek decides a request of cost n for key at now without recording it: the decision of
// Decide, with the key's state left as it is (a key the table does not hold is peeked at
// from the zero state and not added). The TAT is read under the shard's lock, so a peek
// never sees a slot being rebuilt.
func (b *Buckets) Peek(key string, now, n int64) (core.Decision, error) {
	tat, _ := b.TAT(key)
	var d core.Decision
	_, err := b.g.decideInto(&d, tat, now, n)
	return d, err
}

// PeekEach decides a request of cost n for key at now against every limit without
// recording it, and returns each limit's own decision (coreops.CheckState), in the order
// of the limits. The key's limits are read under its shard's lock, so the decisions are
// those of one moment; a key the table does not hold is peeked at from the zero state and
// not added. An error of limit i of a multi-limit is prefixed "limit i: ", as Decide's.
func (l *Limiter) PeekEach(key string, now, n int64) ([]core.Decision, error) {
	ds := make([]core.Decision, len(l.limits))
	if len(l.limits) == 1 {
		s, tag := l.one.Locate(key)
		s.Lock()
		defer s.Unlock()
		var st core.State
		p := &st
		if i, ok := s.Find(key, tag); ok {
			p = s.Val(i)
		}
		var next coreops.Next
		return ds, coreops.CheckState(l.limits[0], p, now, n, &ds[0], &next)
	}
	s, tag := l.multi.Locate(key)
	s.Lock()
	defer s.Unlock()
	var e []core.State
	if i, ok := s.Find(key, tag); ok {
		e = *s.Val(i)
	} else {
		e = make([]core.State, len(l.limits))
	}
	for j, lim := range l.limits {
		var next coreops.Next
		if err := coreops.CheckState(lim, &e[j], now, n, &ds[j], &next); err != nil {
			return nil, fmt.Errorf("limit %d: %w", j, err)
		}
	}
	return ds, nil
}
