package stream

import (
	"container/heap"
	"time"
)

// retryQueue holds a handler's own failed entries until their backoff ends: a map by id and
// a min-heap by due time with lazy deletion, so that finding the due entries costs
// O(log n) however many entries wait (a downstream outage can park every message here).
// It is guarded by handlerRT.mu.
type retryQueue struct {
	byID map[string]retryEntry
	h    retryHeap
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

func (q *retryQueue) remove(id string) { delete(q.byID, id) }

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
