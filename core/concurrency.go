package core

import "fmt"

// concurrency is the concurrency limit: at most Limit units held at once per key, each held
// by a lease that frees itself Window (the lease TTL, µs) after it was taken or last
// extended. Its admission is the sliding log's with the lease TTL as the window: the log
// holds one entry per held unit, at the time its lease was taken (or last extended); a
// request of cost n is admitted at now iff the units whose entries are newer than
// eff - Window (eff = max(now, newest entry)) plus n are at most Limit, and it is recorded
// as n entries at eff. RetryAfter is the time until enough of the oldest leases expire,
// ResetAfter until the newest one does. A request admitted through the registry alone
// (AllowN) is a lease nobody releases: its units count until it expires.
//
// On top of the admission, releaseLease and extendLease (internal/coreops) free or renew a live lease's
// entries; a lease that no longer counts (expired, already released) is left alone, so a
// late or repeated release changes nothing.
type concurrency struct{ slidingLog }

// settle is not the sliding log's: a concurrency limit does not settle reservations (its
// units come back by releasing their lease, releaseLease), so it does not implement
// settler, and settles reports false for it. (This method shadows the embedded
// slidingLog.settle; it is never called.)
func (concurrency) settle() {}

// maxConcurrency bounds a concurrency limit: Redis keeps one sorted-set member per held
// unit, and a lease's units are written and removed one member each.
const maxConcurrency int64 = 1 << 16

// newConcurrency validates the lease TTL (Params.Window, µs, in (0, MaxDuration]) and the
// limit (in [1, 65536]).
func newConcurrency(p Params) (limiter, error) {
	if err := checkDuration("window", p.Window); err != nil {
		return nil, err
	}
	if err := checkLimit("limit", p.Limit); err != nil {
		return nil, err
	}
	if p.Limit > maxConcurrency {
		return nil, badConfig("limit", p.Limit, fmt.Sprintf("at most %d units held at once", maxConcurrency))
	}
	return concurrency{slidingLog{Window: p.Window, Limit: p.Limit}}, nil
}

// leaseOf returns l's concurrency limit, or false for a limit of another algorithm.
func leaseOf(l Limit) (concurrency, bool) {
	c, ok := l.l.(concurrency)
	return c, ok
}

// live reports whether the n entries recorded at at still count at now (the log holds at
// least n entries at at, newer than eff - Window), and returns eff and the index of the
// first of them.
func (c concurrency) live(lg *Log, at, now, n int64) (eff int64, i int, ok bool) {
	if lg == nil || lg.n == 0 || n <= 0 {
		return 0, 0, false
	}
	eff = c.effective(lg, now)
	if at <= eff-c.Window {
		return eff, 0, false
	}
	i = lg.firstLive(at - 1)
	if i+int(n) > lg.n || lg.At(i+int(n)-1) != at {
		return eff, 0, false
	}
	return eff, i, true
}

// remove drops the n entries from index i on, keeping the order of the others.
func (l *Log) remove(i, n int) {
	for j := i; j+n < l.n; j++ {
		l.buf[(l.head+j)%len(l.buf)] = l.At(j + n)
	}
	l.n -= n
	if l.n == 0 {
		l.head = 0
	}
}

// releaseLease frees a lease of n units of concurrency limit l taken (or last extended) at
// at, in state s at now: it removes the lease's n entries if they still count, and reports
// whether it did. An expired lease, one already released, or a limit of another algorithm
// leave s unchanged and give false. Engines check the lease's token before calling it.
func releaseLease(l Limit, s *State, at, now, n int64) bool {
	c, ok := leaseOf(l)
	if !ok {
		return false
	}
	_, i, ok := c.live(s.Log, at, now, n)
	if ok {
		s.Log.remove(i, int(n))
	}
	return ok
}

// extendLease renews a live lease of n units of concurrency limit l taken (or last
// extended) at at, in state s at now: its entries move to eff = max(now, the newest entry)
// and it expires Window after eff. It returns eff and true, or false, leaving s unchanged,
// for a lease that no longer counts (or a limit of another algorithm).
func extendLease(l Limit, s *State, at, now, n int64) (int64, bool) {
	c, ok := leaseOf(l)
	if !ok {
		return 0, false
	}
	eff, i, ok := c.live(s.Log, at, now, n)
	if !ok {
		return 0, false
	}
	s.Log.remove(i, int(n))
	for j := int64(0); j < n; j++ {
		s.Log.push(eff, c.Limit)
	}
	return eff, true
}
