// Package corekit holds what package core shares with redstream's engines but not with
// users: the GCRA arithmetic the in-process engine's lock-free bucket path calls directly,
// and constants of the engines' storage contracts. It uses only the standard library, so
// core (which imports it) stays portable.
package corekit

// MaxTime is core.MaxTime: 2^52 µs after the Unix epoch.
const MaxTime int64 = 1 << 52

// KeyTTLMargin is added to a windowed deduplicator's Window for the expiry of its whole key
// (60 s, in µs), so that a key is reclaimed once traffic stops. The Redis scripts and the
// TypeScript engine use the same margin.
const KeyTTLMargin int64 = 60 * 1000000

// Decision has the layout of core.Decision, so that (*Decision)(d) converts a
// *core.Decision and the arithmetic below writes core's decision in place.
type Decision struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	RetryAfter int64
	ResetAfter int64
	Delay      int64
}

// GCRA is the decision of core's token bucket (shaping false) and leaky bucket (shaping
// true) for a key whose stored TAT is tat, written into *d (all of it: d need not be
// zeroed). interval, tolerance and burst are the bucket's Ints. It returns the TAT to
// store (tat itself when denied) and true, or tat and false when now is outside
// [0, MaxTime] or n outside [1, burst]: core then returns the error. A Decision is too
// large to be returned in registers, and Go copies a returned one through memory, so the
// hot path writes it through a pointer.
func GCRA(d *Decision, interval, tolerance, burst, tat, now, n int64, shaping bool) (int64, bool) {
	if uint64(now) > uint64(MaxTime) || n <= 0 || n > burst {
		*d = Decision{}
		return tat, false
	}
	t := max(tat, now)
	next := t + n*interval
	d.Limit = burst
	if next-now <= tolerance {
		d.Allowed = true
		d.Remaining = (tolerance - (next - now)) / interval
		d.RetryAfter = 0
		d.ResetAfter = next - now
		d.Delay = 0
		if shaping {
			d.Delay = t - now
		}
		return next, true
	}
	d.Allowed = false
	d.Remaining = max(0, (tolerance-(t-now))/interval)
	d.RetryAfter = next - now - tolerance
	d.ResetAfter = t - now
	d.Delay = 0
	return tat, true
}

// GCRAIdle is the idle rule of the GCRA algorithms: a key whose TAT is not after now is
// back to its initial state.
func GCRAIdle(tat, now int64) bool { return tat <= now }

// Next is what core's commit step stores for a key after its check step admitted a
// request: the state words of the buckets and windows, and for the sliding log how the log
// changes (drop the oldest Next[0] entries, then append Next[1] entries at time Next[2]).
// These are the WebAssembly ABI's three state result slots.
type Next [3]int64

// Charge is what an admitted request took from one limit, as a settlement needs it: N
// units at At, the algorithm's charge point (the TAT the request left for a bucket, the
// start of the window it was counted in, the time of the sliding log's entries). Every
// runtime derives it from the admitted decision, so a Charge made by one runtime settles in
// another.
type Charge struct {
	At, N int64
}

// Ops is the half of core.Limit that only engines use: deciding in two steps, settling,
// carrying state across a limit change, leases. Package core fills it at init with its
// own types (L core.Limit, S core.State, D core.Decision, C core.Carry, A core.Algorithm)
// and package internal/coreops reads it and exports it to the engines, so that core's
// public API keeps what users call. Each field is the core method or function of the same
// meaning (see internal/coreops).
type Ops[L, S, D, C, A any] struct {
	Check      func(l L, s *S, now, n int64, d *D, next *Next) error
	Commit     func(l L, s *S, next Next)
	Ints       func(l L) []int64
	Same       func(l, o L) bool
	Settles    func(l L) bool
	ChargeOf   func(l L, now, n int64, d *D) Charge
	Settle     func(l L, s *S, c Charge, now, actual int64) (int64, error)
	CheckCarry func(l, from L, c C) error
	Seed       func(l, from L, old S, now int64, c C) S
	SeedWords  func(a A) string
	Release    func(l L, s *S, at, now, n int64) bool
	Extend     func(l L, s *S, at, now, n int64) (int64, bool)
	CheckTime  func(now int64) error
}

var ops any

// SetOps records core's Ops; core calls it once, at init.
func SetOps[L, S, D, C, A any](o *Ops[L, S, D, C, A]) { ops = o }

// GetOps returns the Ops core recorded, with core's types (a package that imports core is
// initialised after it, so core's Ops are recorded by then).
func GetOps[L, S, D, C, A any]() *Ops[L, S, D, C, A] { return ops.(*Ops[L, S, D, C, A]) }
