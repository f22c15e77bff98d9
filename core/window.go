package core

import "fmt"

// FixedWindow counts admitted cost per window aligned to multiples of Window since the epoch:
// a request of cost n is admitted iff the current window's count plus n is at most Limit.
// A request from before the stored window (time going backwards) counts against the stored
// window.
type FixedWindow struct {
	Window int64 // µs
	Limit  int64
}

// WindowState is the state of one key of a FixedWindow or SlidingCounter. Start is the
// start of the current window (µs), Count the cost admitted in it, and Prev the cost admitted
// in the window before it (SlidingCounter only). The zero value is a new key.
type WindowState struct {
	Start int64
	Count int64
	Prev  int64
}

// NewFixedWindow validates window (µs, in (0, MaxDuration]) and limit (in [1, MaxCount]).
func NewFixedWindow(window, limit int64) (FixedWindow, error) {
	if err := checkDuration("window", window); err != nil {
		return FixedWindow{}, err
	}
	if err := checkLimit("limit", limit); err != nil {
		return FixedWindow{}, err
	}
	return FixedWindow{Window: window, Limit: limit}, nil
}

// Step decides a request of cost n at now and returns the state to store: the updated state
// when admitted, s unchanged when denied (a denial changes nothing).
func (p FixedWindow) Step(s WindowState, now, n int64) (WindowState, Decision, error) {
	w := [3]int64{s.Start, s.Count, s.Prev}
	var d Decision
	err := p.step(&w, now, n, &d)
	return WindowState{Start: w[0], Count: w[1], Prev: w[2]}, d, err
}

// step is Step on the state words (start, count, prev), changed in place only when
// admitted, writing the decision into *d (all of it).
func (p FixedWindow) step(w *[3]int64, now, n int64, d *Decision) error {
	*d = Decision{}
	if err := CheckTime(now); err != nil {
		return err
	}
	if err := checkCost(n, p.Limit); err != nil {
		return err
	}
	s := WindowState{Start: w[0], Count: w[1], Prev: w[2]}
	eff := max64(now, s.Start)
	start := eff - eff%p.Window
	if start != s.Start {
		s = WindowState{Start: start}
	}
	d.Limit = p.Limit
	if s.Count+n <= p.Limit {
		s.Count += n
		*w = [3]int64{s.Start, s.Count, s.Prev}
		d.Allowed = true
		d.Remaining = p.Limit - s.Count
		d.ResetAfter = start + p.Window - now
		return nil
	}
	d.Remaining = p.Limit - s.Count
	d.RetryAfter = start + p.Window - now
	d.ResetAfter = d.RetryAfter
	return nil
}

// Idle reports whether the key holds no count that still matters at now.
func (p FixedWindow) Idle(s WindowState, now int64) bool {
	return s.Count == 0 || s.Start+p.Window <= now
}

// SlidingCounter approximates a sliding window with two aligned fixed windows: the estimate
// at now is
//
//	Prev*(Window-elapsed)/Window + Count
//
// where elapsed = now - Start. A request of cost n is admitted iff Count+n <= Limit and
// Prev*(Window-elapsed) <= (Limit-Count-n)*Window. State is O(1) per key. This is the
// estimate Cloudflare published; its error against the exact SlidingLog is measured in the
// tests and documented in RATIONALE.md.
type SlidingCounter struct {
	Window int64 // µs
	Limit  int64
}

// NewSlidingCounter validates window and limit as NewFixedWindow does, and also requires
// Limit*Window <= 2^53 so every product stays exact in Lua.
func NewSlidingCounter(window, limit int64) (SlidingCounter, error) {
	if err := checkDuration("window", window); err != nil {
		return SlidingCounter{}, err
	}
	if err := checkLimit("limit", limit); err != nil {
		return SlidingCounter{}, err
	}
	if limit > MaxExact/window {
		return SlidingCounter{}, fmt.Errorf("%w: limit × window = %d × %dµs exceeds 2^53", ErrInvalidConfig, limit, window)
	}
	return SlidingCounter{Window: window, Limit: limit}, nil
}

// Step decides a request of cost n at now and returns the state to store: the updated state
// when admitted, s unchanged when denied (a denial changes nothing).
func (p SlidingCounter) Step(s WindowState, now, n int64) (WindowState, Decision, error) {
	w := [3]int64{s.Start, s.Count, s.Prev}
	var d Decision
	err := p.step(&w, now, n, &d)
	return WindowState{Start: w[0], Count: w[1], Prev: w[2]}, d, err
}

// step is Step on the state words (start, count, prev), changed in place only when
// admitted, writing the decision into *d (all of it).
func (p SlidingCounter) step(ws *[3]int64, now, n int64, d *Decision) error {
	*d = Decision{}
	if err := CheckTime(now); err != nil {
		return err
	}
	if err := checkCost(n, p.Limit); err != nil {
		return err
	}
	w := p.Window
	s := WindowState{Start: ws[0], Count: ws[1], Prev: ws[2]}
	eff := max64(now, s.Start)
	start := eff - eff%w
	switch {
	case start == s.Start:
	case start == s.Start+w:
		s = WindowState{Start: start, Prev: s.Count}
	default:
		s = WindowState{Start: start}
	}
	weighted := s.Prev * (w - (eff - start))
	d.Limit = p.Limit
	if s.Count+n <= p.Limit && weighted <= (p.Limit-s.Count-n)*w {
		s.Count += n
		*ws = [3]int64{s.Start, s.Count, s.Prev}
		d.Allowed = true
		d.Remaining = p.Limit - s.Count - ceilDiv(weighted, w)
		d.ResetAfter = p.resetAt(s) - now
		return nil
	}
	d.Remaining = max64(0, p.Limit-s.Count-ceilDiv(weighted, w))
	var at int64
	if s.Count+n <= p.Limit {
		// Prev > 0 here: wait inside this window until Prev's weight has shrunk enough.
		at = start + w - (p.Limit-s.Count-n)*w/s.Prev
	} else {
		// Wait for the next window, where Count becomes its Prev.
		at = start + 2*w - min64(w, (p.Limit-n)*w/s.Count)
	}
	d.RetryAfter = at - now
	d.ResetAfter = p.resetAt(s) - now
	return nil
}

func (p SlidingCounter) resetAt(s WindowState) int64 {
	switch {
	case s.Count > 0:
		return s.Start + 2*p.Window
	case s.Prev > 0:
		return s.Start + p.Window
	}
	return s.Start
}

// Idle reports whether the estimate for the key is zero at now and stays zero.
func (p SlidingCounter) Idle(s WindowState, now int64) bool {
	return p.resetAt(s) <= now
}

// StepWords is Step on the state words (Start, Count, Prev) as core.State.Words holds them,
// changed in place and only when the request is admitted, writing the decision into *d (all
// of it). It is the call an in-process engine makes on a key it holds: a Decision is too
// large to be returned in registers, and Go copies a returned one through memory.
func (p FixedWindow) StepWords(w *[3]int64, now, n int64, d *Decision) error {
	return p.step(w, now, n, d)
}

// StepWords is Step on the state words (Start, Count, Prev) as core.State.Words holds them,
// changed in place and only when the request is admitted, writing the decision into *d (all
// of it). It is the call an in-process engine makes on a key it holds: a Decision is too
// large to be returned in registers, and Go copies a returned one through memory.
func (p SlidingCounter) StepWords(w *[3]int64, now, n int64, d *Decision) error {
	return p.step(w, now, n, d)
}
