package core

import "fmt"

// SlidingLog is the exact sliding window log: a request of cost n is admitted at now iff the
// number of admitted units recorded in (now-Window, now] plus n is at most Limit. An entry
// recorded at ts stops counting once now >= ts + Window (a timestamp exactly Window old no
// longer counts). Memory is O(Limit) per key.
//
// Time going backwards is defined per key: a request older than the newest entry is treated
// as arriving at the newest entry's time, so the log stays ordered; durations in the decision
// are still measured from the caller's now.
type SlidingLog struct {
	Window int64 // µs
	Limit  int64
}

// MaxLogLimit bounds a SlidingLog's limit (2^20 = 1,048,576 entries per key): the log keeps
// one entry per admitted unit, so larger limits belong to SlidingCounter (O(1) per key).
const MaxLogLimit int64 = 1 << 20

// NewSlidingLog validates window (µs, in (0, MaxDuration]) and limit (in [1, MaxLogLimit]).
func NewSlidingLog(window, limit int64) (SlidingLog, error) {
	if err := checkDuration("window", window); err != nil {
		return SlidingLog{}, err
	}
	if err := checkLimit("limit", limit); err != nil {
		return SlidingLog{}, err
	}
	if limit > MaxLogLimit {
		return SlidingLog{}, badConfig("limit", limit, fmt.Sprintf("at most %d for the sliding log (use the sliding counter above)", MaxLogLimit))
	}
	return SlidingLog{Window: window, Limit: limit}, nil
}

// Log is the state of one key of a SlidingLog: the timestamps of admitted units, oldest
// first, in a ring buffer that grows up to Limit entries and is then reused without
// allocation. The zero value is an empty log.
type Log struct {
	buf  []int64
	head int
	n    int
}

// Len returns the number of recorded entries.
func (l *Log) Len() int { return l.n }

// At returns the i-th oldest entry (0 <= i < Len).
func (l *Log) At(i int) int64 { return l.buf[(l.head+i)%len(l.buf)] }

// Newest returns the newest entry; it must not be called on an empty log.
func (l *Log) Newest() int64 { return l.At(l.n - 1) }

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

// Step decides a request of cost n at now, updating l in place only when admitted.
func (p SlidingLog) Step(l *Log, now, n int64) (Decision, error) {
	d, err := p.Check(l, now, n)
	if err == nil && d.Allowed {
		p.Record(l, now, n)
	}
	return d, err
}

// Check decides a request of cost n at now without changing l; Record records an admitted
// request. Step is Check followed by Record when allowed; the two halves let a multi-limit
// commit only when every limit admits. A denied request leaves the log exactly as it was
// (expired entries are pruned only when a request is recorded), so the answer to a later
// request never depends on whether an earlier one was denied.
func (p SlidingLog) Check(l *Log, now, n int64) (Decision, error) {
	var d Decision
	err := p.check(l, now, n, &d)
	return d, err
}

// check is Check writing the decision into *d (all of it).
func (p SlidingLog) check(l *Log, now, n int64, d *Decision) error {
	*d = Decision{}
	if err := CheckTime(now); err != nil {
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
	d.ResetAfter = l.Newest() + p.Window - now
	return nil
}

// StepInto is Step writing the decision into *d (all of it). It is the call an in-process
// engine makes on a key it holds: a Decision is too large to be returned in registers, and
// Go copies a returned one through memory.
func (p SlidingLog) StepInto(l *Log, now, n int64, d *Decision) error {
	err := p.check(l, now, n, d)
	if err == nil && d.Allowed {
		p.Record(l, now, n)
	}
	return err
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

// Record prunes the entries that expired at now and appends n entries at now (or at the
// newest entry's time, if later). Call it only after Check admitted the same request.
func (p SlidingLog) Record(l *Log, now, n int64) {
	eff := p.effective(l, now)
	for l.n > 0 && l.At(0) <= eff-p.Window {
		l.popOldest()
	}
	for i := int64(0); i < n; i++ {
		l.push(eff, p.Limit)
	}
}

func (p SlidingLog) effective(l *Log, now int64) int64 {
	if l.n > 0 && l.Newest() > now {
		return l.Newest()
	}
	return now
}

// Idle reports whether the log holds no entry that still counts at now.
func (p SlidingLog) Idle(l *Log, now int64) bool {
	return l.n == 0 || l.Newest() <= now-p.Window
}
