package proptest

import (
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// limitModel is the reference model of one limiter: core's step functions over a map of
// per-key states. It is what every engine must agree with.
type limitModel struct {
	p    redstream.Params
	tat  map[string]int64
	logs map[string]*core.Log
	ws   map[string]core.WindowState
}

func newLimitModel(p redstream.Params) *limitModel {
	return &limitModel{p: p, tat: map[string]int64{}, logs: map[string]*core.Log{}, ws: map[string]core.WindowState{}}
}

// decide runs one request through the model. commit=false computes the decision without
// recording anything (used by the multi-limit model).
func (m *limitModel) decide(key string, now time.Time, n int64, commit bool) (core.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return core.Decision{}, err
	}
	t := now.UnixMicro()
	switch m.p.Algorithm {
	case redstream.AlgorithmTokenBucket:
		next, d, err := m.p.TokenBucket.Step(m.tat[key], t, n)
		if err == nil && commit {
			m.tat[key] = next
		}
		return d, err
	case redstream.AlgorithmLeakyBucket:
		next, d, err := m.p.LeakyBucket.Step(m.tat[key], t, n)
		if err == nil && commit {
			m.tat[key] = next
		}
		return d, err
	case redstream.AlgorithmSlidingWindow:
		l := m.logs[key]
		if l == nil {
			l = &core.Log{}
			m.logs[key] = l
		}
		d, err := m.p.SlidingLog.Check(l, t, n)
		if err == nil && d.Allowed && commit {
			m.p.SlidingLog.Record(l, t, n)
		}
		return d, err
	case redstream.AlgorithmSlidingCounter:
		next, d, err := m.p.SlidingCounter.Step(m.ws[key], t, n)
		if err == nil && commit {
			m.ws[key] = next
		}
		return d, err
	case redstream.AlgorithmFixedWindow:
		next, d, err := m.p.FixedWindow.Step(m.ws[key], t, n)
		if err == nil && commit {
			m.ws[key] = next
		}
		return d, err
	}
	panic("proptest: unknown algorithm " + string(m.p.Algorithm))
}

// multiModel is the all-or-nothing combination of several limits on one key.
type multiModel struct{ limits []*limitModel }

func (m *multiModel) decide(key string, now time.Time, n int64) (core.Decision, error) {
	if err := redstream.CheckRequest(key, now, n); err != nil {
		return core.Decision{}, err
	}
	// Bad input is rejected before any limit is consulted, so it never changes state (the
	// sliding log prunes while it checks).
	for _, l := range m.limits {
		if n > l.p.Limit() {
			return core.Decision{}, fmt.Errorf("%w: n = %d, limit = %d", core.ErrCostTooLarge, n, l.p.Limit())
		}
		if err := core.CheckTime(now.UnixMicro()); err != nil {
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
