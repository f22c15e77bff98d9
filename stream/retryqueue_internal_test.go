package stream

import (
	"fmt"
	"testing"
	"time"
)

// TestRetryQueue: due entries come out earliest first, up to a limit; rescheduled and removed
// entries leave no stale item behind; taken entries can be put back.
func TestRetryQueue(t *testing.T) {
	q := newRetryQueue()
	base := time.Unix(1000, 0)
	for i := 0; i < 10; i++ {
		q.set(fmt.Sprint(i), retryEntry{at: base.Add(time.Duration(10-i) * time.Second), deliveries: 1})
	}
	q.remove("9")                        // due at +1 s
	q.postpone("8", base.Add(time.Hour)) // due at +2 s, moved
	q.postpone("missing", base)          // unknown: ignored
	if at, ok := q.next(); !ok || !at.Equal(base.Add(3*time.Second)) {
		t.Fatalf("next = %v %v, want +3s", at, ok)
	}
	got := q.popDue(base.Add(5*time.Second), 2)
	if fmt.Sprint(got) != "[7 6]" {
		t.Fatalf("popDue = %v, want [7 6]", got)
	}
	if _, ok := q.get("7"); !ok {
		t.Error("a taken entry is no longer known")
	}
	if got := q.popDue(base.Add(5*time.Second), 10); fmt.Sprint(got) != "[5]" {
		t.Fatalf("second popDue = %v, want [5]", got)
	}
	q.postpone("7", base) // put back
	if got := q.popDue(base.Add(5*time.Second), 10); fmt.Sprint(got) != "[7]" {
		t.Fatalf("popDue after putting back = %v, want [7]", got)
	}
	if q.len() != 9 {
		t.Errorf("len = %d, want 9", q.len())
	}
	for _, id := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8"} {
		q.remove(id)
	}
	if _, ok := q.next(); ok || len(q.h) != 0 {
		t.Errorf("empty queue: next ok %v, %d heap items left", ok, len(q.h))
	}
}

// TestRetryQueueLimited: the entries parked by the consumption limit are counted apart
// through set, reschedule (postpone, a failed retry set over a parked entry) and remove.
func TestRetryQueueLimited(t *testing.T) {
	s := newRetrySet()
	now := time.Now()
	s.set("a", retryEntry{at: now, limited: true})
	s.set("b", retryEntry{at: now, limited: true})
	s.set("c", retryEntry{at: now})
	if got := s.limitedLen(); got != 2 {
		t.Fatalf("limited %d, want 2", got)
	}
	s.postpone([]string{"a", "c"}, now.Add(time.Second))
	s.set("b", retryEntry{at: now}) // parked, then failed: a retry
	if got, all := s.limitedLen(), s.len(); got != 1 || all != 3 {
		t.Fatalf("limited %d of %d, want 1 of 3", got, all)
	}
	s.remove("a")
	s.remove("a")
	if got := s.limitedLen(); got != 0 {
		t.Fatalf("limited %d after the parked entry left, want 0", got)
	}
}
