package memory

import (
	"fmt"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
)

// Successor returns a limiter of specs (one per spec of l, index for index, as
// NewMultiLimiter takes them) that replaces l without losing its keys' state: the first
// decision or reservation (ReserveN) on a key the successor does not hold reads the key's
// state in l and seeds it by c (core.Carry: as-is, proportional or reset,
// coreops.SeedState), once, under the successor's lock for that key; from then on the
// successor holds the key. A request refused before it is decided (a cost above a limit)
// seeds nothing. A limit that did not change keeps the key's state as it is, a sliding
// log's or concurrency limit's log included (copied: l's own goes on apart). l keeps its
// state and still decides its own requests, which the successor no longer sees: decide
// with the successor from the change on.
//
// The successor has l's Options. It returns an error wrapping redstream.ErrInvalidConfig
// for specs l cannot carry into by c (coreops.CheckCarry: another algorithm, another
// window, a changed sliding log or concurrency limit; reset and an unchanged limit always
// work) or a number of specs other than l's. A
// successor of a single token or leaky bucket decides under the shard lock (the lock-free
// path holds no predecessor).
func (l *Limiter) Successor(c core.Carry, specs ...redstream.Spec) (*Limiter, error) {
	if len(specs) != len(l.limits) {
		return nil, fmt.Errorf("memory: %w: Successor of %d specs for a limiter of %d", redstream.ErrInvalidConfig, len(specs), len(l.limits))
	}
	ls, err := engine.Limits("memory", specs)
	if err != nil {
		return nil, err
	}
	for i := range ls {
		if err := coreops.CheckCarry(ls[i], l.limits[i], c); err != nil {
			return nil, wrap(err)
		}
	}
	s := &Limiter{cfg: l.cfg, limits: ls, specs: append([]redstream.Spec(nil), specs...), k: engine.NewLimiter(ls, l.cfg)}
	if c != core.CarryReset {
		s.k.Carry(&engine.Carrier{Load: l.load, From: append([]core.Limit(nil), l.limits...), Carry: c})
	}
	return s, nil
}

// load returns a copy of key's state (engine.Carrier.Load).
func (l *Limiter) load(key string) ([]core.State, bool) {
	if l.buckets != nil {
		return l.buckets.Load(key)
	}
	return l.k.Load(key)
}
