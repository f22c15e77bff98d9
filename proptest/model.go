package proptest

import (
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// limitModel is the reference model of one limiter: core's two halves (CheckState, then
// CommitState when admitted) over a map of per-key states, one core.State per key whatever
// the algorithm, so that every row of core's registry has its model with no code of its own
// here. It is what every engine must agree with.
type limitModel struct {
	p      core.Limit
	states map[string]*core.State
	last   coreops.Charge // the charge of the last request committed (reservations)
}

func newLimitModel(p core.Limit) *limitModel {
	return &limitModel{p: p, states: map[string]*core.State{}}
}

// decide runs one request through the model. commit=false computes the decision without
// recording anything (used by the multi-limit model).
func (m *limitModel) decide(key string, now time.Time, n int64, commit bool) (core.Decision, error) {
	if err := checkRequest(key, now, n); err != nil {
		return core.Decision{}, err
	}
	s := m.states[key]
	if s == nil {
		s = new(core.State)
		m.states[key] = s
	}
	var (
		d    core.Decision
		next coreops.Next
	)
	err := coreops.CheckState(m.p, s, now.UnixMicro(), n, &d, &next)
	if err == nil && d.Allowed && commit {
		coreops.CommitState(m.p, s, next)
		m.last = coreops.ChargeOf(m.p, now.UnixMicro(), n, &d)
	}
	return d, err
}

// multiModel is the all-or-nothing combination of several limits on one key.
type multiModel struct{ limits []*limitModel }

func (m *multiModel) decide(key string, now time.Time, n int64) (core.Decision, error) {
	if err := checkRequest(key, now, n); err != nil {
		return core.Decision{}, err
	}
	// Bad input is rejected before any limit is consulted, so it never changes state (the
	// sliding log prunes while it checks).
	for _, l := range m.limits {
		if n > l.p.Max() {
			return core.Decision{}, fmt.Errorf("%w: n = %d, limit = %d", core.ErrCostTooLarge, n, l.p.Max())
		}
		if err := coreops.CheckTime(now.UnixMicro()); err != nil {
			return core.Decision{}, err
		}
	}
	ds := make([]core.Decision, len(m.limits))
	all := true
	for i, l := range m.limits {
		d, err := l.decide(key, now, n, false)
		if err != nil {
			return core.Decision{}, err
		}
		ds[i] = d
		all = all && d.Allowed
	}
	if all {
		for _, l := range m.limits {
			if _, err := l.decide(key, now, n, true); err != nil {
				return core.Decision{}, err
			}
		}
	}
	return core.Combine(ds), nil
}

// bloomModel is a Bloom filter over core's positions, shard by shard.
type bloomModel struct {
	b      core.Bloom
	bits   map[int]map[uint64]bool
	unique int64
}

func (m *bloomModel) contains(e string) bool {
	shard, pos := m.b.Locate([]byte(e), nil)
	for _, p := range pos {
		if !m.bits[shard][p] {
			return false
		}
	}
	return true
}

// add sets the element's bits and reports whether any bit changed.
func (m *bloomModel) add(e string) bool {
	shard, pos := m.b.Locate([]byte(e), nil)
	if m.bits[shard] == nil {
		m.bits[shard] = map[uint64]bool{}
	}
	changed := false
	for _, p := range pos {
		if !m.bits[shard][p] {
			m.bits[shard][p] = true
			changed = true
		}
	}
	if changed {
		m.unique++
	}
	return changed
}

// checkRequest is the reference of the argument checks every limiter makes first: a
// non-empty key, a positive cost and, unless now is zero, a time in [Unix epoch,
// core.MaxTime].
func checkRequest(key string, now time.Time, n int64) error {
	if key == "" {
		return redstream.ErrEmptyKey
	}
	if n <= 0 {
		return core.ErrInvalidCost
	}
	if !now.IsZero() {
		return coreops.CheckTime(now.UnixMicro())
	}
	return nil
}

// decisionOf is the reference conversion of a core decision (µs) to a redstream.Decision.
func decisionOf(d core.Decision) redstream.Decision {
	return redstream.Decision{
		Allowed:    d.Allowed,
		Limit:      d.Limit,
		Remaining:  d.Remaining,
		RetryAfter: time.Duration(d.RetryAfter) * time.Microsecond,
		ResetAfter: time.Duration(d.ResetAfter) * time.Microsecond,
		Delay:      time.Duration(d.Delay) * time.Microsecond,
	}
}
