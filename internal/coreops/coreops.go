// Package coreops is the engine-facing half of core.Limit: what the in-process, Redis and
// WebAssembly engines, the property-test models and the generators call on a limit besides
// core's public StepState and IdleState. A decision is two halves, so that several limits
// can be applied all-or-nothing: CheckState decides a request without changing the key's
// state and returns what to store; CommitState stores it once every limit of the request
// admitted it. Settling a reservation (ChargeOf, SettleState), carrying a key's state
// across a limit change (CheckCarry, SeedState) and the concurrency limit's leases
// (ReleaseLease, ExtendLease) are here too. All are pure functions of their arguments,
// implemented in core (which records them at init through internal/corekit).
package coreops

import (
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
)

// Next is what CommitState stores (corekit.Next): the state words of the buckets and
// windows, and for the sliding log how the log changes (drop the oldest Next[0] entries,
// then append Next[1] entries at time Next[2]). These are the WebAssembly ABI's three state
// result slots.
type Next = corekit.Next

// Charge is what an admitted request took from one limit (corekit.Charge): N units at At,
// the algorithm's charge point. Every runtime derives it from the admitted decision
// (ChargeOf), so a Charge made by one runtime settles in another.
type Charge = corekit.Charge

var ops = corekit.GetOps[core.Limit, core.State, core.Decision, core.Carry, core.Algorithm]()

// CheckState decides a request of cost n at now for a key in state s under l, without
// changing s, writing the decision into *d and, when it admits, what CommitState must store
// into *next (all of both).
func CheckState(l core.Limit, s *core.State, now, n int64, d *core.Decision, next *Next) error {
	return ops.Check(l, s, now, n, d, next)
}

// CommitState records an admitted request in s: next is what CheckState wrote.
func CommitState(l core.Limit, s *core.State, next Next) { ops.Commit(l, s, next) }

// Ints returns l's integer parameters, in a new slice, in the order the Lua scripts take
// them after now and n: interval, tolerance and burst for the bucket shape, window and
// limit for the window shape.
func Ints(l core.Limit) []int64 { return ops.Ints(l) }

// Same reports whether l and o are the same limit: the same algorithm and Ints, so the same
// state and the same decisions (the Redis engines' keys carry exactly these).
func Same(l, o core.Limit) bool { return ops.Same(l, o) }

// Settles reports whether l's algorithm can settle a reservation (core.Algorithm.Settles).
func Settles(l core.Limit) bool { return ops.Settles(l) }

// ChargeOf returns the Charge of a request of cost n admitted at now under l with the
// decision d (what CheckState or StepState wrote). It is meaningful only for an admitted
// decision of a limit that Settles; otherwise it is the zero Charge.
func ChargeOf(l core.Limit, now, n int64, d *core.Decision) Charge { return ops.ChargeOf(l, now, n, d) }

// SettleState applies a settlement to a key in state s under l at now: the reservation
// took c, and its actual cost is actual. It returns the change applied (negative for a
// refund, positive for a charge), or the error of a bad time or cost, or of a limit that
// does not Settle.
func SettleState(l core.Limit, s *core.State, c Charge, now, actual int64) (int64, error) {
	return ops.Settle(l, s, c, now, actual)
}

// CheckCarry reports whether a key's state under from can be carried into l by c: nil, or
// an error wrapping core.ErrInvalidConfig that says why.
func CheckCarry(l, from core.Limit, c core.Carry) error { return ops.CheckCarry(l, from, c) }

// SeedState returns the state under l of a key whose state under from was old at now,
// carried by c (a CarryReset, or a carry CheckCarry refuses, gives the new key's state).
func SeedState(l, from core.Limit, old core.State, now int64, c core.Carry) core.State {
	return ops.Seed(l, from, old, now, c)
}

// SeedWords returns how a limit change carries a's state words, one letter per word of
// State.Words: "d" (a TAT, a debt in time), "s" (a window's start), "c" (a count), or ""
// for an algorithm whose state is not words, which carries nothing. internal/luagen
// generates the same table into the Lua scripts.
func SeedWords(a core.Algorithm) string { return ops.SeedWords(a) }

// ReleaseLease frees a lease of n units of concurrency limit l taken (or last extended) at
// at, in state s at now: it removes the lease's n entries if they still count, and reports
// whether it did. An expired lease, one already released, or a limit of another algorithm
// leave s unchanged and give false. Engines check the lease's token before calling it.
func ReleaseLease(l core.Limit, s *core.State, at, now, n int64) bool {
	return ops.Release(l, s, at, now, n)
}

// ExtendLease renews a live lease of n units of concurrency limit l taken (or last
// extended) at at, in state s at now: its entries move to eff = max(now, the newest entry)
// and it expires the limit's window after eff. It returns eff and true, or false, leaving s
// unchanged, for a lease that no longer counts (or a limit of another algorithm).
func ExtendLease(l core.Limit, s *core.State, at, now, n int64) (int64, bool) {
	return ops.Extend(l, s, at, now, n)
}

// CheckTime returns an error wrapping core.ErrInvalidTime when now is outside
// [0, core.MaxTime].
func CheckTime(now int64) error { return ops.CheckTime(now) }
