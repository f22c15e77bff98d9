package stream

import (
	"strconv"
	"testing"
	"time"
)

// TestDLWaitSet: the set keeps the earliest next attempt, refuses entries past
// maxDLWaiting (they stay pending, to be delivered again after MinIdle) and recomputes the
// earliest attempt after moves and postponements.
func TestDLWaitSet(t *testing.T) {
	var s dlWaitSet
	base := time.Unix(1000, 0)
	for i := range maxDLWaiting {
		if !s.add(strconv.Itoa(i), &waitingDL{at: base.Add(time.Duration(maxDLWaiting-i) * time.Millisecond)}) {
			t.Fatalf("add %d refused below the bound", i)
		}
	}
	if want := base.Add(time.Millisecond); !s.next.Equal(want) {
		t.Errorf("next = %v, want the earliest attempt %v", s.next, want)
	}
	if s.add("one more", &waitingDL{at: base}) {
		t.Errorf("add past maxDLWaiting (%d) accepted", maxDLWaiting)
	}
	if s.has("one more") || !s.has("0") {
		t.Error("has does not match the entries kept")
	}
	delete(s.m, strconv.Itoa(maxDLWaiting-1)) // the earliest moved
	s.resetNext()
	if want := base.Add(2 * time.Millisecond); !s.next.Equal(want) {
		t.Errorf("next after a move = %v, want %v", s.next, want)
	}
	s.m = map[string]*waitingDL{}
	s.resetNext()
	if !s.next.IsZero() {
		t.Errorf("next of an empty set = %v, want zero", s.next)
	}
}
