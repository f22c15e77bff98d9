package core

import (
	"fmt"

	"github.com/redstream-go/redstream/internal/corekit"
)

// slidingLog is the exact sliding window log: a request of cost n is admitted at now iff the
// number of admitted units recorded in (now-Window, now] plus n is at most Limit. An entry
// recorded at ts stops counting once now >= ts + Window (a timestamp exactly Window old no
// longer counts). Memory is O(Limit) per key.
//
// Time going backwards is defined per key: a request older than the newest entry is treated
// as arriving at the newest entry's time, so the log stays ordered; durations in the decision
// are still measured from the caller's now.
type slidingLog struct {
	Window int64 // µs
	Limit  int64
}

// MaxLogLimit bounds a SlidingLog's limit (2^20 = 1,048,576 entries per key): the log keeps
// one entry per admitted unit, so larger limits belong to the sliding counter (O(1) per key).
const MaxLogLimit int64 = 1 << 20

// newSlidingLog validates window (µs, in (0, MaxDuration]) and limit (in [1, MaxLogLimit]).
func newSlidingLog(p Params) (limiter, error) {
	if err := checkDuration("window", p.Window); err != nil {
		return nil, err
	}
	if err := checkLimit("limit", p.Limit); err != nil {
		return nil, err
	}
	if p.Limit > MaxLogLimit {
		return nil, badConfig("limit", p.Limit, fmt.Sprintf("at most %d for the sliding log (use the sliding counter above)", MaxLogLimit))
	}
	return slidingLog{Window: p.Window, Limit: p.Limit}, nil
}

// Log is the state of one key of the sliding log (State.Log): the timestamps of admitted
// units, oldest first, in a ring buffer that grows up to the limit's entries and is then
// reused without allocation. The zero value is an empty log. A Log is not safe for
// concurrent use.
type Log struct {
	buf  []int64
	head int
	n    int
}

// Len returns the number of recorded entries.
func (l *Log) Len() int { return l.n }

// At returns the i-th oldest entry (0 <= i < Len).
func (l *Log) At(i int) int64 { return l.buf[(l.head+i)%len(l.buf)] }

func (l *Log) newest() int64 { return l.At(l.n - 1) }

// Append adds an entry at ts, the newest: an engine that keeps a log in another form (a
// sorted set, a WebAssembly buffer) rebuilds it oldest first. It returns false, changing
// nothing, when ts is before the newest entry or outside [0, MaxTime].
func (l *Log) Append(ts int64) bool {
	if ts < 0 || ts > MaxTime || (l.n > 0 && ts < l.newest()) {
		return false
	}
	l.push(ts, MaxLogLimit)
	return true
}

func (l *Log) popOldest() {
	l.head = (l.head + 1) % len(l.buf)
	l.n--
	if l.n == 0 {
		l.head = 0
	}
}

func (l *Log) push(ts, limit int64) {
	if l.n == len(l.buf) {
		c := 2 * len(l.buf)
		if c < 4 {
			c = 4
		}
		if int64(c) > limit {
			c = int(limit)
		}
		nb := make([]int64, c)
		for i := 0; i < l.n; i++ {
			nb[i] = l.At(i)
		}
		l.buf, l.head = nb, 0
	}
	l.buf[(l.head+l.n)%len(l.buf)] = ts
	l.n++
}

// Reset empties the log, keeping its buffer.
func (l *Log) Reset() { l.head, l.n = 0, 0 }

// checkLog decides a request of cost n at now without changing l, writing the decision
// into *d (all of it). A denied request leaves the log exactly as it was (expired entries
// are pruned only when a request is recorded), so the answer to a later request never
// depends on whether an earlier one was denied.
func (p slidingLog) checkLog(l *Log, now, n int64, d *Decision) error {
	*d = Decision{}
	if err := checkTime(now); err != nil {
		return err
	}
	if err := checkCost(n, p.Limit); err != nil {
		return err
	}
	eff := p.effective(l, now)
	live := l.firstLive(eff - p.Window)
	count := int64(l.n - live)
	d.Limit = p.Limit
	if count+n <= p.Limit {
		d.Allowed = true
		d.Remaining = p.Limit - count - n
		d.ResetAfter = eff + p.Window - now
		return nil
	}
	k := count + n - p.Limit // oldest live entries that must expire first
	d.Remaining = p.Limit - count
	d.RetryAfter = l.At(live+int(k-1)) + p.Window - now
	d.ResetAfter = l.newest() + p.Window - now
	return nil
}

// firstLive returns the index of the oldest entry newer than cutoff (Len if none), by
// binary search over the ordered log.
func (l *Log) firstLive(cutoff int64) int {
	lo, hi := 0, l.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.At(mid) <= cutoff {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// record prunes the entries that expired at now and appends n entries at now (or at the
// newest entry's time, if later). Call it only after checkLog admitted the same request.
func (p slidingLog) record(l *Log, now, n int64) {
	eff := p.effective(l, now)
	for l.n > 0 && l.At(0) <= eff-p.Window {
		l.popOldest()
	}
	for i := int64(0); i < n; i++ {
		l.push(eff, p.Limit)
	}
}

func (p slidingLog) effective(l *Log, now int64) int64 {
	if l.n > 0 && l.newest() > now {
		return l.newest()
	}
	return now
}

var emptyLog Log

func (p slidingLog) max() int64    { return p.Limit }
func (p slidingLog) period() int64 { return p.Window }
func (p slidingLog) ints() []int64 { return []int64{p.Window, p.Limit} }

// check decides on s.Log. When it admits, next says what record would do: drop the next[0]
// oldest entries (those expired at the effective time), then append next[1] entries at
// next[2] (now, or the newest entry's time if later).
func (p slidingLog) check(s *State, now, n int64, d *Decision, next *corekit.Next) error {
	l := s.Log
	if l == nil {
		l = &emptyLog
	}
	*next = corekit.Next{}
	if err := p.checkLog(l, now, n, d); err != nil || !d.Allowed {
		return err
	}
	eff := p.effective(l, now)
	*next = corekit.Next{int64(l.firstLive(eff - p.Window)), n, eff}
	return nil
}

// commit applies next to s.Log, creating it for a new key.
func (p slidingLog) commit(s *State, next corekit.Next) {
	if s.Log == nil {
		s.Log = new(Log)
	}
	l := s.Log
	for i := int64(0); i < next[0] && l.n > 0; i++ {
		l.popOldest()
	}
	for i := int64(0); i < next[1]; i++ {
		l.push(next[2], p.Limit)
	}
}

// step decides on s.Log in place, creating it for a new key's first admitted request.
func (p slidingLog) step(s *State, now, n int64, d *Decision) error {
	if s.Log == nil {
		var next corekit.Next
		err := p.check(s, now, n, d, &next)
		if err == nil && d.Allowed {
			p.commit(s, next)
		}
		return err
	}
	err := p.checkLog(s.Log, now, n, d)
	if err == nil && d.Allowed {
		p.record(s.Log, now, n)
	}
	return err
}

// idle: the log holds no entry that still counts at now.
func (p slidingLog) idle(s *State, now int64) bool {
	l := s.Log
	return l == nil || l.n == 0 || l.newest() <= now-p.Window
}
