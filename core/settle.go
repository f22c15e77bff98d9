package core

import (
	"fmt"

	"github.com/redstream-go/redstream/internal/corekit"
)

// Settling a reservation: a request admitted at its estimated cost, whose actual cost is
// known later. chargeOf names what the admission took from a limit (a corekit.Charge);
// settleState gives back the difference (actual below the estimate) or takes it
// (actual above), on the key's state as it is at the time of the settlement. With no other
// traffic on the key, reserving n and settling at actual leaves the key in the state that
// admitting actual at the reservation's time would have left (for actual = 0: as if the
// reservation had never been made); with other traffic the difference is applied to what
// the reservation took, never to what other requests took.
//
// Per algorithm:
//
//   - token and leaky bucket (GCRA): a refund moves the TAT back by the refunded units'
//     emission intervals, never below now (a full bucket); a charge moves it forward, from
//     the TAT, or from the reservation's TAT if the key has been forgotten since.
//   - fixed window: the count of the window the reservation was charged in, while that
//     window is current; afterwards a settlement changes nothing.
//   - sliding counter: the count of that window, or its previous-window count once the
//     key has moved on by one window; after two windows nothing.
//   - sliding log: the entries at the reservation's time, while they are in the window.
//
// A refund never gives back more than the reservation took, nor more than is left of it.
// A charge never takes the key past full (the bucket's tolerance, the window's limit): a
// key never goes into debt, and the part of a charge that does not fit is dropped (the
// returned change says how much was applied).

// settler is what an algorithm that can settle implements (core/settle.go); a Limit whose
// algorithm lacks it answers Settles false.
type settler interface {
	// chargeAt returns corekit.Charge.At of an admitted decision d of a request at now.
	chargeAt(now int64, d *Decision) int64
	// settle applies the difference between actual and c.N to s at now and returns the
	// change applied, in units: negative for a refund, positive for a charge.
	settle(s *State, c corekit.Charge, now, actual int64) int64
}

// settles reports whether the limit's algorithm can settle a reservation. Every rate
// algorithm of the registry can; the concurrency limit cannot (its units come back by
// releasing their lease), nor can an algorithm added without a settlement.
func (l Limit) settles() bool {
	_, ok := l.l.(settler)
	return ok
}

// chargeOf returns the corekit.Charge of a request of cost n admitted at now with the decision d
// (what checkState or StepState wrote). It is meaningful only for an admitted decision of
// a limit that settles; otherwise it is the zero corekit.Charge.
func (l Limit) chargeOf(now, n int64, d *Decision) corekit.Charge {
	st, ok := l.l.(settler)
	if !ok || !d.Allowed {
		return corekit.Charge{}
	}
	return corekit.Charge{At: st.chargeAt(now, d), N: n}
}

// settleState settles the charge c at now with the actual cost actual (0 cancels it): it
// changes s by the difference as the package's settlement rules say and returns the change
// applied, in units (negative for a refund, positive for a charge, 0 when nothing was left
// to adjust). Errors: ErrInvalidCost for actual < 0 or c.N < 1, ErrInvalidTime for now,
// and ErrInvalidConfig for a limit that does not Settle; s is unchanged then.
func (l Limit) settleState(s *State, c corekit.Charge, now, actual int64) (int64, error) {
	st, ok := l.l.(settler)
	if !ok {
		return 0, fmt.Errorf("%w: algorithm %q cannot settle a reservation", ErrInvalidConfig, l.alg.Name)
	}
	if err := checkTime(now); err != nil {
		return 0, err
	}
	if actual < 0 || c.N < 1 {
		return 0, fmt.Errorf("%w: settle %d of a charge of %d", ErrInvalidCost, actual, c.N)
	}
	if actual == c.N {
		return 0, nil
	}
	return st.settle(s, c, now, actual), nil
}

func (g gcra) chargeAt(now int64, d *Decision) int64 { return now + d.ResetAfter }

func (g gcra) settle(s *State, c corekit.Charge, now, actual int64) int64 {
	tat := s.Words[0]
	if actual < c.N {
		if tat <= now {
			return 0 // the bucket is full already
		}
		r := min64(c.N-actual, ceilDiv(tat-now, g.Interval))
		s.Words[0] = max64(tat-(c.N-actual)*g.Interval, now)
		return -r
	}
	// A forgotten key (TAT 0, or reset) starts from the reservation's TAT, or now if that
	// has passed: the units were taken then.
	base := max64(tat, min64(c.At, now))
	room := (now + g.Tolerance - base) / g.Interval
	if now+g.Tolerance < base {
		room = 0
	}
	k := min64(actual-c.N, room)
	if k > 0 {
		s.Words[0] = base + k*g.Interval
	}
	return k
}

func (p fixedWindow) chargeAt(now int64, d *Decision) int64 { return now + d.ResetAfter - p.Window }

func (p fixedWindow) settle(s *State, c corekit.Charge, now, actual int64) int64 {
	w := &s.Words
	if c.At+p.Window <= max64(now, w[0]) || w[0] > c.At {
		return 0 // the window is over
	}
	if w[0] < c.At { // the key was forgotten: its window is the reservation's, empty
		*w = [3]int64{c.At, 0, 0}
	}
	return adjustCount(&w[1], c.N, actual, p.Limit)
}

// adjustCount applies actual - charged to *count, a refund at most *count, a charge at most
// up to limit, and returns the change.
func adjustCount(count *int64, charged, actual, limit int64) int64 {
	var k int64
	if actual < charged {
		k = -min64(charged-actual, *count)
	} else {
		k = max64(0, min64(actual-charged, limit-*count))
	}
	*count += k
	return k
}

func (p slidingCounter) chargeAt(now int64, d *Decision) int64 {
	return now + d.ResetAfter - 2*p.Window
}

func (p slidingCounter) settle(s *State, c corekit.Charge, now, actual int64) int64 {
	w := &s.Words
	switch {
	case c.At+2*p.Window <= max64(now, w[0]):
		return 0 // the charged window no longer weighs
	case w[0] == c.At:
		return adjustCount(&w[1], c.N, actual, p.Limit)
	case w[0] == c.At+p.Window:
		return adjustCount(&w[2], c.N, actual, p.Limit)
	case w[0] < c.At && now < c.At+p.Window: // the key was forgotten in the charged window
		*w = [3]int64{c.At, 0, 0}
		return adjustCount(&w[1], c.N, actual, p.Limit)
	}
	return 0
}

func (p slidingLog) chargeAt(now int64, d *Decision) int64 { return now + d.ResetAfter - p.Window }

func (p slidingLog) settle(s *State, c corekit.Charge, now, actual int64) int64 {
	if s.Log == nil {
		s.Log = new(Log)
	}
	l := s.Log
	eff := p.effective(l, now)
	if c.At <= eff-p.Window {
		return 0 // the entries left the window
	}
	first, end := l.firstLive(c.At-1), l.firstLive(c.At) // the entries at c.At
	if actual < c.N {
		k := min64(c.N-actual, int64(end-first))
		l.splice(first, int(k), 0, 0)
		return -k
	}
	live := l.firstLive(eff - p.Window)
	k := max64(0, min64(actual-c.N, p.Limit-int64(l.n-live)))
	if k > 0 {
		// Drop the expired entries first, so the log stays within Limit entries.
		l.splice(0, live, 0, 0)
		l.splice(end-live, 0, int(k), c.At)
	}
	return k
}

// splice removes del entries at index i and inserts ins entries at ts there (ts fits the
// order: callers insert after the entries equal to ts), rebuilding the ring oldest first.
func (l *Log) splice(i, del, ins int, ts int64) {
	if del == 0 && ins == 0 {
		return
	}
	n := l.n - del + ins
	c := max(len(l.buf), n)
	nb := make([]int64, c)
	j := 0
	for k := 0; k < i; k++ {
		nb[j] = l.At(k)
		j++
	}
	for k := 0; k < ins; k++ {
		nb[j] = ts
		j++
	}
	for k := i + del; k < l.n; k++ {
		nb[j] = l.At(k)
		j++
	}
	l.buf, l.head, l.n = nb, 0, n
}

// Settles reports whether the algorithm's limits can settle a reservation
// (internal/coreops.Settles of its limits); the Lua dispatch of settlements (internal/luagen) and the other
// runtimes read it. An Algorithm that is not a row of the registry does not settle.
func (a Algorithm) Settles() bool {
	for i := range registry {
		row := &registry[i]
		if row.Name != a.Name {
			continue
		}
		p := Params{Window: Second, Limit: 1}
		if row.Shape == Bucket {
			p = Params{Capacity: 1, Rate: 1}
		}
		l, err := row.new(p)
		if err != nil {
			return false
		}
		_, ok := l.(settler)
		return ok
	}
	return false
}
