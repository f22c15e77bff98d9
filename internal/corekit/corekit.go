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
