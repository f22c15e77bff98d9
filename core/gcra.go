package core

import (
	"fmt"
	"math"

	"github.com/redstream-go/redstream/internal/corekit"
)

// gcra holds the integer parameters of the generic cell rate algorithm shared by the token
// bucket and the leaky bucket, its Ints.
//
// Interval (T) is the emission interval in µs: one unit of cost is earned back every T.
// Tolerance (tau) is how far the theoretical arrival time (TAT) may run ahead of now:
// tau = round(capacity * T). Burst = floor(tau / T) is the most one key can admit at once.
//
// The state of one key is a single int64, its TAT (State.Words[0]); 0 is a new key.
type gcra struct {
	Interval  int64
	Tolerance int64
	Burst     int64
	// shaping makes an admitted decision carry the leaky bucket's Delay.
	shaping bool
}

// newGCRA converts a user-facing capacity and rate (per second) into GCRA integers; errors
// name the rate rateName.
// T = round(1e6 / rate) µs, so the effective rate is 1e6/T per second: rounding T moves
// each event by at most 0.5 µs.
func newGCRA(capacity, rate float64, rateName string, shaping bool) (gcra, error) {
	if !positiveFinite(capacity) || capacity < 1 || capacity > float64(MaxCount) {
		return gcra{}, badConfig("capacity", capacity, fmt.Sprintf("a finite number in [1, %d]", MaxCount))
	}
	if !positiveFinite(rate) || rate > 1e6 {
		return gcra{}, badConfig(rateName, rate, "a finite number in (0, 1e6] per second")
	}
	t := math.Round(1e6 / rate)
	if t < 1 || t > float64(MaxDuration) {
		return gcra{}, badConfig(rateName, rate, "an emission interval in [1µs, MaxDuration]")
	}
	tau := math.Round(capacity * t)
	if tau > float64(MaxDuration) {
		return gcra{}, badConfig("capacity", capacity, fmt.Sprintf("capacity/%s at most %dµs", rateName, MaxDuration))
	}
	g := gcra{Interval: int64(t), Tolerance: int64(tau), shaping: shaping}
	g.Burst = g.Tolerance / g.Interval
	return g, nil
}

// newTokenBucket is the token bucket, GCRA with a new key starting full: it admits a burst
// of Burst at once and earns one token back every Interval. A denied request consumes
// nothing. Time going backwards is defined: the TAT never moves back, so a request that
// appears to come from the past sees a fuller bucket.
func newTokenBucket(p Params) (limiter, error) {
	return newGCRA(p.Capacity, p.Rate, "ratePerSecond", false)
}

// newLeakyBucket is the leaky bucket as a meter: a new key starts empty, water drains at
// the leak rate, and a request of cost n is admitted iff water + n <= capacity. It admits
// exactly what a token bucket of the same capacity and rate admits (both are GCRA); in
// addition each admitted decision carries Delay, the time the request should wait so that
// admitted requests leave one Interval apart, which turns the meter into a shaping queue.
func newLeakyBucket(p Params) (limiter, error) {
	return newGCRA(p.Capacity, p.Rate, "leakRatePerSecond", true)
}

// decide writes the decision for a key whose TAT is tat into *d and returns the TAT to
// store (tat itself when denied).
func (g gcra) decide(d *Decision, tat, now, n int64) (int64, error) {
	next, ok := corekit.GCRA((*corekit.Decision)(d), g.Interval, g.Tolerance, g.Burst, tat, now, n, g.shaping)
	if !ok {
		return tat, badRequest(now, n, g.Burst)
	}
	return next, nil
}

func (g gcra) max() int64    { return g.Burst }
func (g gcra) period() int64 { return g.Burst * g.Interval }
func (g gcra) ints() []int64 { return []int64{g.Interval, g.Tolerance, g.Burst} }

func (g gcra) check(s *State, now, n int64, d *Decision, next *corekit.Next) error {
	tat, err := g.decide(d, s.Words[0], now, n)
	*next = corekit.Next{tat}
	return err
}

func (g gcra) commit(s *State, next corekit.Next) { s.Words[0] = next[0] }

func (g gcra) step(s *State, now, n int64, d *Decision) error {
	tat, err := g.decide(d, s.Words[0], now, n)
	s.Words[0] = tat
	return err
}

// idle: a key whose TAT is not after now is back to its initial state.
func (g gcra) idle(s *State, now int64) bool { return corekit.GCRAIdle(s.Words[0], now) }
