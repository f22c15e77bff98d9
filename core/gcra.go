package core

import (
	"fmt"
	"math"
)

// GCRA holds the integer parameters of the generic cell rate algorithm shared by the token
// bucket and the leaky bucket.
//
// Interval (T) is the emission interval in µs: one unit of cost is earned back every T.
// Tolerance (tau) is how far the theoretical arrival time (TAT) may run ahead of now:
// tau = round(capacity * T). Burst = floor(tau / T) is the most one key can admit at once.
//
// The state of one key is a single int64, its TAT; the zero value means a new key.
type GCRA struct {
	Interval  int64
	Tolerance int64
	Burst     int64
}

// newGCRA converts a user-facing capacity and rate (per second) into GCRA integers.
// T = round(1e6 / rate) µs, so the effective rate is 1e6/T per second: rounding T moves
// each event by at most 0.5 µs.
func newGCRA(capName string, capacity float64, rateName string, rate float64) (GCRA, error) {
	if !positiveFinite(capacity) || capacity < 1 || capacity > float64(MaxCount) {
		return GCRA{}, badConfig(capName, capacity, fmt.Sprintf("a finite number in [1, %d]", MaxCount))
	}
	if !positiveFinite(rate) || rate > 1e6 {
		return GCRA{}, badConfig(rateName, rate, "a finite number in (0, 1e6] per second")
	}
	t := math.Round(1e6 / rate)
	if t < 1 || t > float64(MaxDuration) {
		return GCRA{}, badConfig(rateName, rate, "an emission interval in [1µs, MaxDuration]")
	}
	tau := math.Round(capacity * t)
	if tau > float64(MaxDuration) {
		return GCRA{}, badConfig(capName, capacity, fmt.Sprintf("capacity/%s at most %dµs", rateName, MaxDuration))
	}
	g := GCRA{Interval: int64(t), Tolerance: int64(tau)}
	g.Burst = g.Tolerance / g.Interval
	return g, nil
}

// Decide is the GCRA decision shared by both buckets: TokenBucket.Step is Decide with
// shaping false, LeakyBucket.Step with shaping true (an admitted decision then carries the
// shaping Delay). It returns the TAT to store (tat itself when denied) and the decision.
func (g GCRA) Decide(tat, now, n int64, shaping bool) (int64, Decision, error) {
	var d Decision
	tat, err := g.DecideInto(&d, tat, now, n, shaping)
	return tat, d, err
}

// DecideInto is Decide writing the decision into *d (all of it: d need not be zeroed). An
// engine that converts the decision right away calls it: a Decision is too large to be
// returned in registers, and Go copies a returned one through memory.
func (g GCRA) DecideInto(d *Decision, tat, now, n int64, shaping bool) (int64, error) {
	if uint64(now) > uint64(MaxTime) || n <= 0 || n > g.Burst {
		*d = Decision{}
		return tat, badRequest(now, n, g.Burst)
	}
	t := max64(tat, now)
	next := t + n*g.Interval
	d.Limit = g.Burst
	if next-now <= g.Tolerance {
		d.Allowed = true
		d.Remaining = (g.Tolerance - (next - now)) / g.Interval
		d.RetryAfter = 0
		d.ResetAfter = next - now
		d.Delay = 0
		if shaping {
			d.Delay = t - now
		}
		return next, nil
	}
	d.Allowed = false
	d.Remaining = max64(0, (g.Tolerance-(t-now))/g.Interval)
	d.RetryAfter = next - now - g.Tolerance
	d.ResetAfter = t - now
	d.Delay = 0
	return tat, nil
}

// TokenBucket is a token bucket implemented as GCRA: a new key starts full (it admits a burst
// of Burst at once) and earns one token back every Interval. A denied request consumes
// nothing.
type TokenBucket struct{ GCRA }

// NewTokenBucket returns a token bucket holding capacity tokens and refilling ratePerSecond
// tokens per second. capacity must be in [1, MaxCount] and ratePerSecond in (0, 1e6]; NaN
// and infinities are rejected with ErrInvalidConfig.
func NewTokenBucket(capacity, ratePerSecond float64) (TokenBucket, error) {
	g, err := newGCRA("capacity", capacity, "ratePerSecond", ratePerSecond)
	return TokenBucket{g}, err
}

// Step decides a request of cost n at time now (µs) for a key whose stored TAT is tat
// (0 for a new key). It returns the TAT to store (tat itself when denied: a denial changes
// nothing). Time going backwards is defined: the TAT
// never moves back, so a request that appears to come from the past sees a fuller bucket.
func (b TokenBucket) Step(tat, now, n int64) (int64, Decision, error) {
	return b.Decide(tat, now, n, false)
}

// Idle reports whether a key with this TAT is back to its initial state at now, so an
// engine may forget it.
func (g GCRA) Idle(tat, now int64) bool { return tat <= now }

// LeakyBucket is the leaky bucket as a meter: a new key starts empty, water drains at the
// leak rate, and a request of cost n is admitted iff water + n <= capacity. It admits exactly
// what a TokenBucket of the same capacity and rate admits (both are GCRA); in addition each
// admitted decision carries Delay, the time the request should wait so that admitted requests
// leave one Interval apart, which turns the meter into a shaping queue.
type LeakyBucket struct{ GCRA }

// NewLeakyBucket returns a leaky bucket of the given capacity draining leakRatePerSecond
// units per second. The bounds are those of NewTokenBucket.
func NewLeakyBucket(capacity, leakRatePerSecond float64) (LeakyBucket, error) {
	g, err := newGCRA("capacity", capacity, "leakRatePerSecond", leakRatePerSecond)
	return LeakyBucket{g}, err
}

// Step decides a request of cost n at now for a key whose stored TAT is tat (0 when new).
func (b LeakyBucket) Step(tat, now, n int64) (int64, Decision, error) {
	return b.Decide(tat, now, n, true)
}
