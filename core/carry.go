package core

import "fmt"

// Carry is how a key's state carries over when its limit changes (a policy raised from 10
// to 20 per minute, a bucket's rate lowered): the first decision on a key under the new
// limit seeds its state from the state the key had under the previous limit, once
// (internal/coreops.SeedState). The zero value is CarryReset.
//
// What each strategy keeps, per parameter shape (Algorithm.seed):
//
//   - buckets (token and leaky: the state is a TAT): the cost still to be earned back at
//     the change, u = TAT - now, counted in whole units of the old interval rounded up
//     (units = ceil(u / T)); as-is keeps units, proportional scales them to
//     ceil(units × burst' / burst); the new TAT is now + min(units', burst') × T'.
//   - windows (fixed window, sliding counter: the state is the window's start and its
//     counts): the window must keep its length; the start is kept, and each count c (the
//     current window's, and the sliding counter's previous window's) becomes min(c, L')
//     under as-is and min(ceil(c × L' / L), L') under proportional.
//   - the sliding log keeps one entry per admitted unit: it carries nothing, a change
//     resets it.
//
// Rounding is always up: a carried key is never left with more allowance than its
// strategy promises.
type Carry int

// The strategies of a limit change.
const (
	// CarryReset starts every key afresh under the new limit (a full bucket, an empty
	// window): the behaviour of a limit without a previous one.
	CarryReset Carry = iota
	// CarryAsIs keeps what was consumed: raising 10/min to 20/min after 10 admitted in the
	// current window leaves 10 to admit; lowering 20 to 10 after 10 leaves none.
	CarryAsIs
	// CarryProportional keeps the fraction consumed: 10 of 20 consumed becomes 5 of 10.
	CarryProportional
)

var carryNames = [...]string{CarryReset: "reset", CarryAsIs: "as-is", CarryProportional: "proportional"}

// String returns the strategy's name as configuration files write it: "reset", "as-is" or
// "proportional".
func (c Carry) String() string {
	if c < 0 || int(c) >= len(carryNames) {
		return fmt.Sprintf("Carry(%d)", int(c))
	}
	return carryNames[c]
}

// ParseCarry returns the strategy named s (Carry.String's names), or an error wrapping
// ErrInvalidConfig.
func ParseCarry(s string) (Carry, error) {
	for i, n := range carryNames {
		if n == s {
			return Carry(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown carry strategy %q, want reset, as-is or proportional", ErrInvalidConfig, s)
}

// seed returns how a limit change carries the algorithm's state words, one letter per word
// of State.Words, derived from its shape: "d" for the bucket shape (Words[0] is a TAT, a
// debt in time), "s" then a "c" per further word for the window shape (the window's start,
// then counts), and "" for an algorithm whose state is not words (the sliding log) or of
// another shape, which carries nothing (a change resets it). internal/luagen generates the
// same table into the Lua scripts.
func (a Algorithm) seed() string {
	switch {
	case a.Shape == Bucket && a.Words == 1:
		return "d"
	case a.Shape == Window && a.Words == 2:
		return "sc"
	case a.Shape == Window && a.Words == 3:
		return "scc"
	}
	return ""
}

// checkCarry reports whether a key's state under from can be carried into l by c: nil, or
// an error wrapping ErrInvalidConfig that says why (an unknown c is always an error).
// CarryReset always can, and so does a limit that did not change (same), whatever
// its algorithm: its state goes on as it is (seedState keeps it), so an unchanged sliding
// log or concurrency limit beside a changed limit is no reason to refuse. Otherwise
// CarryAsIs and CarryProportional need the same algorithm, one that carries its state
// (Algorithm.seed), the same window for the window shape, and for CarryProportional
// products below 2^53 (burst × burst', L × L').
func (l Limit) checkCarry(from Limit, c Carry) error {
	switch c {
	case CarryReset:
		return nil
	case CarryAsIs, CarryProportional:
	default:
		return fmt.Errorf("%w: unknown carry strategy %d", ErrInvalidConfig, int(c))
	}
	if l.alg != nil && l.same(from) {
		return nil
	}
	if from.alg == nil || l.alg == nil {
		return fmt.Errorf("%w: carry between unbuilt limits", ErrInvalidConfig)
	}
	if from.alg.Name != l.alg.Name {
		return fmt.Errorf("%w: carry %s: the previous limit is %s, the new one %s; a change of algorithm can only reset", ErrInvalidConfig, c, from.alg.Name, l.alg.Name)
	}
	roles := l.alg.seed()
	if roles == "" {
		return fmt.Errorf("%w: carry %s: the %s algorithm carries no state; a change can only reset", ErrInvalidConfig, c, l.alg.Name)
	}
	fi, ni := from.ints(), l.ints()
	if roles[0] == 's' && fi[0] != ni[0] {
		return fmt.Errorf("%w: carry %s: the window changes from %dµs to %dµs; a change of window can only reset", ErrInvalidConfig, c, fi[0], ni[0])
	}
	if c == CarryProportional && (from.Max()+1) > maxExact/l.Max() {
		return fmt.Errorf("%w: carry proportional: limits %d and %d are too large to scale exactly", ErrInvalidConfig, from.Max(), l.Max())
	}
	return nil
}

// seedState returns the state of a key under l seeded at now from its state old under the
// previous limit from, by c (see [Carry]). A limit that did not change (same)
// keeps old as it is, whatever c; otherwise a pair checkCarry refuses, and CarryReset,
// give the zero State (a new key). It is a pure function: an engine calls it once per key,
// on the first decision under l, for a key it holds no state of under l.
func (l Limit) seedState(from Limit, old State, now int64, c Carry) State {
	if l.same(from) {
		return old
	}
	if c == CarryReset || l.checkCarry(from, c) != nil {
		return State{}
	}
	roles := l.alg.seed()
	fi, ni := from.ints(), l.ints()
	var s State
	for i := 0; i < len(roles); i++ {
		w := old.Words[i]
		switch roles[i] {
		case 'd':
			s.Words[i] = seedDebt(w, now, fi[0], fi[2], ni[0], ni[2], c)
		case 's':
			s.Words[i] = w
		case 'c':
			s.Words[i] = seedCount(w, fi[1], ni[1], c)
		}
	}
	return s
}

// seedDebt carries a TAT tat at now from interval t and burst b to interval t2 and burst
// b2: the new TAT, or 0 when nothing is left to earn back.
func seedDebt(tat, now, t, b, t2, b2 int64, c Carry) int64 {
	if tat <= now {
		return 0
	}
	units := min64(ceilDiv(tat-now, t), b+1) // at most burst+1 for a TAT within tolerance
	if c == CarryProportional {
		units = ceilDiv(units*b2, b)
	}
	units = min64(units, b2)
	return now + units*t2
}

// seedCount carries a count from limit l to limit l2.
func seedCount(count, l, l2 int64, c Carry) int64 {
	if count <= 0 {
		return 0
	}
	count = min64(count, l)
	if c == CarryProportional {
		count = ceilDiv(count*l2, l)
	}
	return min64(count, l2)
}

// same reports whether l and o are the same limit: the same algorithm and Ints, so the
// same state and the same decisions (the Redis engines' keys carry exactly these).
func (l Limit) same(o Limit) bool {
	if l.alg == nil || o.alg == nil || l.alg.Name != o.alg.Name {
		return l.alg == o.alg
	}
	a, b := l.ints(), o.ints()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
