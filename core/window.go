package core

import (
	"fmt"

	"github.com/redstream-go/redstream/internal/corekit"
)

// fixedWindow counts admitted cost per window aligned to multiples of Window since the epoch:
// a request of cost n is admitted iff the current window's count plus n is at most Limit.
// A request from before the stored window (time going backwards) counts against the stored
// window. State: Words holds the window's start and count.
type fixedWindow struct {
	Window int64 // µs
	Limit  int64
}

// windowState is the state of one key of a fixedWindow or slidingCounter, as State.Words
// holds it. Start is the start of the current window (µs), Count the cost admitted in it,
// and Prev the cost admitted in the window before it (slidingCounter only). The zero value
// is a new key.
type windowState struct {
	Start int64
	Count int64
	Prev  int64
}

// newFixedWindow validates window (µs, in (0, MaxDuration]) and limit (in [1, MaxCount]).
func newFixedWindow(p Params) (limiter, error) {
	if err := checkDuration("window", p.Window); err != nil {
		return nil, err
	}
	if err := checkLimit("limit", p.Limit); err != nil {
		return nil, err
	}
	return fixedWindow{Window: p.Window, Limit: p.Limit}, nil
}

// step decides a request on the state words (start, count, prev), changed in place only
// when admitted, writing the decision into *d (all of it).
func (p fixedWindow) step(s *State, now, n int64, d *Decision) error {
	*d = Decision{}
	if err := checkTime(now); err != nil {
		return err
	}
	if err := checkCost(n, p.Limit); err != nil {
		return err
	}
	w := &s.Words
	st := windowState{Start: w[0], Count: w[1], Prev: w[2]}
	eff := max64(now, st.Start)
	start := eff - eff%p.Window
	if start != st.Start {
		st = windowState{Start: start}
	}
	d.Limit = p.Limit
	if st.Count+n <= p.Limit {
		st.Count += n
		*w = [3]int64{st.Start, st.Count, st.Prev}
		d.Allowed = true
		d.Remaining = p.Limit - st.Count
		d.ResetAfter = start + p.Window - now
		return nil
	}
	d.Remaining = p.Limit - st.Count
	d.RetryAfter = start + p.Window - now
	d.ResetAfter = d.RetryAfter
	return nil
}

// idle: the key holds no count that still matters at now.
func (p fixedWindow) idle(s *State, now int64) bool {
	return s.Words[1] == 0 || s.Words[0]+p.Window <= now
}

func (p fixedWindow) max() int64    { return p.Limit }
func (p fixedWindow) period() int64 { return p.Window }
func (p fixedWindow) ints() []int64 { return []int64{p.Window, p.Limit} }

func (p fixedWindow) check(s *State, now, n int64, d *Decision, next *corekit.Next) error {
	c := *s
	err := p.step(&c, now, n, d)
	*next = c.Words
	return err
}

func (p fixedWindow) commit(s *State, next corekit.Next) { s.Words = next }

// slidingCounter approximates a sliding window with two aligned fixed windows: the estimate
// at now is
//
//	Prev*(Window-elapsed)/Window + Count
//
// where elapsed = now - Start. A request of cost n is admitted iff Count+n <= Limit and
// Prev*(Window-elapsed) <= (Limit-Count-n)*Window. State is O(1) per key: Words holds the
// window's start, count and the previous window's count. This is the estimate Cloudflare
// published; its error against the exact sliding log is measured in the tests and
// documented in RATIONALE.md.
type slidingCounter struct {
	Window int64 // µs
	Limit  int64
}

// newSlidingCounter validates window and limit as newFixedWindow does, and also requires
// Limit*Window <= 2^53 so every product stays exact in Lua.
func newSlidingCounter(p Params) (limiter, error) {
	if err := checkDuration("window", p.Window); err != nil {
		return nil, err
	}
	if err := checkLimit("limit", p.Limit); err != nil {
		return nil, err
	}
	if p.Limit > maxExact/p.Window {
		return nil, fmt.Errorf("%w: limit × window = %d × %dµs exceeds 2^53", ErrInvalidConfig, p.Limit, p.Window)
	}
	return slidingCounter{Window: p.Window, Limit: p.Limit}, nil
}

// step decides a request on the state words (start, count, prev), changed in place only
// when admitted, writing the decision into *d (all of it).
func (p slidingCounter) step(s *State, now, n int64, d *Decision) error {
	*d = Decision{}
	if err := checkTime(now); err != nil {
		return err
	}
	if err := checkCost(n, p.Limit); err != nil {
		return err
	}
	w := p.Window
	ws := &s.Words
	st := windowState{Start: ws[0], Count: ws[1], Prev: ws[2]}
	eff := max64(now, st.Start)
	start := eff - eff%w
	switch {
	case start == st.Start:
	case start == st.Start+w:
		st = windowState{Start: start, Prev: st.Count}
	default:
		st = windowState{Start: start}
	}
	weighted := st.Prev * (w - (eff - start))
	d.Limit = p.Limit
	if st.Count+n <= p.Limit && weighted <= (p.Limit-st.Count-n)*w {
		st.Count += n
		*ws = [3]int64{st.Start, st.Count, st.Prev}
		d.Allowed = true
		d.Remaining = p.Limit - st.Count - ceilDiv(weighted, w)
		d.ResetAfter = p.resetAt(st) - now
		return nil
	}
	d.Remaining = max64(0, p.Limit-st.Count-ceilDiv(weighted, w))
	var at int64
	if st.Count+n <= p.Limit {
		// Prev > 0 here: wait inside this window until Prev's weight has shrunk enough.
		at = start + w - (p.Limit-st.Count-n)*w/st.Prev
	} else {
		// Wait for the next window, where Count becomes its Prev.
		at = start + 2*w - min64(w, (p.Limit-n)*w/st.Count)
	}
	d.RetryAfter = at - now
	d.ResetAfter = p.resetAt(st) - now
	return nil
}

func (p slidingCounter) resetAt(s windowState) int64 {
	switch {
	case s.Count > 0:
		return s.Start + 2*p.Window
	case s.Prev > 0:
		return s.Start + p.Window
	}
	return s.Start
}

// idle: the estimate for the key is zero at now and stays zero.
func (p slidingCounter) idle(s *State, now int64) bool {
	return p.resetAt(windowState{Start: s.Words[0], Count: s.Words[1], Prev: s.Words[2]}) <= now
}

func (p slidingCounter) max() int64    { return p.Limit }
func (p slidingCounter) period() int64 { return p.Window }
func (p slidingCounter) ints() []int64 { return []int64{p.Window, p.Limit} }

func (p slidingCounter) check(s *State, now, n int64, d *Decision, next *corekit.Next) error {
	c := *s
	err := p.step(&c, now, n, d)
	*next = c.Words
	return err
}

func (p slidingCounter) commit(s *State, next corekit.Next) { s.Words = next }
