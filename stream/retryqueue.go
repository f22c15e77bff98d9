package stream

import (
	"container/heap"
	"sync"
	"time"
)

// retryQueue holds a handler's own failed entries until their backoff ends: a map by id and
// a min-heap by due time with lazy deletion, so that finding the due entries costs
// O(log n) however many entries wait (a downstream outage can park every message here).
// retrySet guards it.
type retryQueue struct {
	byID    map[string]retryEntry
	h       retryHeap
	limited int // the entries parked by the consumption limit (retryEntry.limited)
}

type retryItem struct {
	at time.Time
	id string
}

type retryHeap []retryItem

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryItem)) }
func (h *retryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newRetryQueue() retryQueue { return retryQueue{byID: map[string]retryEntry{}} }

// set schedules (or reschedules) id at e.at.
func (q *retryQueue) set(id string, e retryEntry) {
	q.forget(id)
	if e.limited {
		q.limited++
	}
	q.byID[id] = e
	heap.Push(&q.h, retryItem{at: e.at, id: id})
}

// postpone reschedules a known id at at.
func (q *retryQueue) postpone(id string, at time.Time) {
	if e, ok := q.byID[id]; ok {
		e.at = at
		q.set(id, e)
	}
}

func (q *retryQueue) remove(id string) {
	q.forget(id)
	delete(q.byID, id)
}

// forget uncounts id's entry, if any, from limited.
func (q *retryQueue) forget(id string) {
	if e, ok := q.byID[id]; ok && e.limited {
		q.limited--
	}
}

func (q *retryQueue) len() int { return len(q.byID) }

func (q *retryQueue) get(id string) (retryEntry, bool) {
	e, ok := q.byID[id]
	return e, ok
}

// clean drops heap items that no longer match their entry (removed, rescheduled or taken).
func (q *retryQueue) clean() {
	for len(q.h) > 0 {
		top := q.h[0]
		if e, ok := q.byID[top.id]; ok && e.at.Equal(top.at) {
			return
		}
		heap.Pop(&q.h)
	}
}

// next returns the earliest due time.
func (q *retryQueue) next() (time.Time, bool) {
	q.clean()
	if len(q.h) == 0 {
		return time.Time{}, false
	}
	return q.h[0].at, true
}

// popDue takes up to limit entries due by now (1 ms early is fine), earliest first. They stay
// known (get) but are out of the heap until postponed or removed.
func (q *retryQueue) popDue(now time.Time, limit int) []string {
	var out []string
	for len(out) < limit {
		q.clean()
		if len(q.h) == 0 || q.h[0].at.After(now.Add(time.Millisecond)) {
			break
		}
		it := heap.Pop(&q.h).(retryItem)
		e := q.byID[it.id]
		e.at = time.Time{} // taken: no heap item matches it
		q.byID[it.id] = e
		out = append(out, it.id)
	}
	return out
}

// retrySet is a handler's retry queue, safe for concurrent use. The retrier owns it: it
// takes the due entries and postpones them; the dispatcher consults it and records and
// settles entries as they leave and come back into its hands, under its own lock, which it
// takes first.
type retrySet struct {
	mu sync.Mutex
	q  retryQueue
}

func newRetrySet() *retrySet { return &retrySet{q: newRetryQueue()} }

// set schedules (or reschedules) id at e.at.
func (s *retrySet) set(id string, e retryEntry) {
	s.mu.Lock()
	s.q.set(id, e)
	s.mu.Unlock()
}

// has reports whether id waits for its retry (or is being redelivered).
func (s *retrySet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.q.get(id)
	return ok
}

func (s *retrySet) remove(id string) {
	s.mu.Lock()
	s.q.remove(id)
	s.mu.Unlock()
}

func (s *retrySet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.len()
}

// limitedLen returns how many of the entries were parked by the consumption limit.
func (s *retrySet) limitedLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.limited
}

// next returns when the earliest retry is due.
func (s *retrySet) next() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.next()
}

// takeDue takes up to limit entries due by now (popDue), with the backoff drawn at each
// one's failure.
func (s *retrySet) takeDue(now time.Time, limit int) ([]string, []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.q.popDue(now, limit)
	backoffs := make([]time.Duration, len(ids))
	for i, id := range ids {
		r, _ := s.q.get(id)
		backoffs[i] = r.backoff
	}
	return ids, backoffs
}

// wake makes id, an entry parked by the consumption limit and not yet taken for its
// redelivery, due at now, its backoff shortened to the time it has waited (redeliver.lua
// claims an entry idle for its backoff). It reports whether id was such an entry.
func (s *retrySet) wake(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.q.get(id)
	if !ok || !e.limited || e.at.IsZero() || !e.at.After(now) {
		return false
	}
	parked := e.at.Add(-e.backoff)
	e.backoff, e.at = max(now.Sub(parked), time.Millisecond), now
	s.q.set(id, e)
	return true
}

// postpone reschedules the known ids at at.
func (s *retrySet) postpone(ids []string, at time.Time) {
	s.mu.Lock()
	for _, id := range ids {
		s.q.postpone(id, at)
	}
	s.mu.Unlock()
}
