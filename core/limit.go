package core

import "github.com/redstream-go/redstream/internal/corekit"

// Limit is one validated rate limit, whatever its algorithm: an [Algorithm]'s New returns
// it, and an engine holds a []Limit and needs no switch over the algorithm set. A Limit is
// a small value, safe to copy and for concurrent use; its zero value is not usable.
//
// StepState decides a request for a key and records it when admitted; IdleState says when
// the key is back to its initial state. Both are pure functions of their arguments. (The
// engines also decide in two halves, so that several limits apply all-or-nothing, settle
// reservations and carry state across a limit change: that half is internal/coreops.)
//
// The state of one key is a [State], the shape the WebAssembly ABI passes: up to three
// words and, for the sliding log, the log. The zero State is a new key.
type Limit struct {
	alg *Algorithm
	l   limiter
}

// limiter is what an algorithm implements (core/<algorithm>.go); Limit forwards to it.
// check and step write the decision into *d, all of it; check leaves s unchanged, step
// changes it only when the request is admitted.
type limiter interface {
	max() int64
	period() int64
	ints() []int64
	check(s *State, now, n int64, d *Decision, next *corekit.Next) error
	commit(s *State, next corekit.Next)
	step(s *State, now, n int64, d *Decision) error
	idle(s *State, now int64) bool
}

// State is the state of one key under one Limit. Words holds the TAT of a bucket (Words[0])
// or the start, count and previous count of a window; Log is the sliding log's (nil until
// the first admitted request). The zero value is a new key.
type State struct {
	Words [3]int64
	Log   *Log
}

// Name returns the algorithm's name, as in configuration files (Algorithm.Name).
func (l Limit) Name() string { return l.alg.Name }

// Max returns the most cost one key can admit at once, the Limit of every decision: the
// bucket's burst or the window's limit. A cost above it is ErrCostTooLarge.
func (l Limit) Max() int64 { return l.l.max() }

// Period returns the time (µs) over which Max is granted: the window of the window
// algorithms, and for the buckets the time to earn a full burst back.
func (l Limit) Period() int64 { return l.l.period() }

// ints returns the integer parameters, in a new slice, in the order the Lua scripts take
// them after now and n: interval, tolerance and burst for the bucket shape, window and
// limit for the window shape.
func (l Limit) ints() []int64 { return l.l.ints() }

// checkState decides a request of cost n at now for a key in state s, without changing s,
// writing the decision into *d and, when it admits, what commitState must store into
// *next (all of both). The results are written through pointers for the reason StepState
// gives.
func (l Limit) checkState(s *State, now, n int64, d *Decision, next *corekit.Next) error {
	return l.l.check(s, now, n, d, next)
}

// commitState records an admitted request in s: next is what checkState wrote.
func (l Limit) commitState(s *State, next corekit.Next) { l.l.commit(s, next) }

// StepState decides a request of cost n at now for a key in state s, writing the decision
// into *d (all of it), and records the request in s when the decision admits (a denied
// request changes nothing). It is the call an in-process engine makes
// on a key it holds: a Decision is too large to be returned in registers, and Go copies a
// returned one through memory.
func (l Limit) StepState(s *State, now, n int64, d *Decision) error { return l.l.step(s, now, n, d) }

// IdleState reports whether a key in state s is back to its initial state at now, so that
// an engine may forget it (the algorithm's idle rule).
func (l Limit) IdleState(s *State, now int64) bool { return l.l.idle(s, now) }
