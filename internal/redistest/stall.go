package redistest

import (
	"sync/atomic"
	"testing"
	"time"
)

// probeTick is how often a StallMeter's probe wakes up.
const probeTick = time.Millisecond

// StallMeter measures how late this process gets to run: a probe goroutine sleeps one
// millisecond at a time and records by how much each sleep overran. Tests that bound how long
// a call takes (a decision on a hung server within its timeout, say) allow the bound plus
// the stall measured during the call: on a machine that ran every goroutine on time the
// bound holds exactly, and a machine that stopped the whole process for 200 ms (other
// packages' tests, the race detector, a noisy neighbour) does not fail a correct library.
// A call that is slow on its own (waiting for a timer that is not armed, a 10 s write
// timeout) is still caught: the process keeps running meanwhile, so the stall stays small.
type StallMeter struct {
	max  atomic.Int64 // the largest overrun since the last reset, in ns
	seq  atomic.Int64 // probe wake-ups so far
	stop chan struct{}
}

// NewStallMeter starts a StallMeter, stopped when the test ends.
func NewStallMeter(t testing.TB) *StallMeter {
	m := &StallMeter{stop: make(chan struct{})}
	go m.probe()
	t.Cleanup(func() { close(m.stop) })
	return m
}

func (m *StallMeter) probe() {
	tick := time.NewTimer(probeTick)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-m.stop:
			return
		case now := <-tick.C:
			now = time.Now() // when this goroutine runs, not when the timer fired
			if over := now.Sub(last) - probeTick; over > 0 {
				for {
					cur := m.max.Load()
					if int64(over) <= cur || m.max.CompareAndSwap(cur, int64(over)) {
						break
					}
				}
			}
			m.seq.Add(1)
			last = time.Now()
			tick.Reset(probeTick)
		}
	}
}

// Time runs f and returns how long it took and the largest stall of the process seen while
// it ran (waiting, after f returns, for the probe to wake up twice, at most one second, so
// that a stall that ended with f is counted).
func (m *StallMeter) Time(f func()) (took, stall time.Duration) {
	m.max.Store(0)
	start := time.Now()
	f()
	took = time.Since(start)
	seq := m.seq.Load()
	for deadline := time.Now().Add(time.Second); m.seq.Load() < seq+2 && time.Now().Before(deadline); {
		time.Sleep(probeTick / 2)
	}
	return took, time.Duration(m.max.Load())
}
