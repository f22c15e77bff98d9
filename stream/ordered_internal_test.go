package stream

import (
	"io"
	"log/slog"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redstream-go/redstream/internal/streamwire"
)

func newOrderedRT(capacity int) *dispatcher {
	s := &scope{log: slog.New(slog.NewTextHandler(io.Discard, nil)), m: newHandlerMetrics(vm.NewSet(), "t", -1, -1, "g", 1)}
	return newDispatcher(s, 1, capacity, true, newRetrySet(), newDeadLetterer(s, make(chan struct{}, 1)),
		newOwnWorkers(1, capacity), make(chan struct{}, 1), make(chan struct{}, 1), nil)
}

func keyed(id, key string) job {
	return job{e: entry{id: id, fields: []string{fieldKey, key}}, deliveries: 1}
}

// take returns the next queued job's id, or "" when none is queued.
func take(h *dispatcher) string {
	select {
	case j := <-h.q.(*ownWorkers).ch:
		return j.e.id
	default:
		return ""
	}
}

// TestOrderedLines drives the per-key lines directly: parking behind a head, the head's
// retry coming back to it, release moving the line on in id order, and a line that moves on
// while work is full (its head's retry gone to another consumer) waiting without blocking.
func TestOrderedLines(t *testing.T) {
	h := newOrderedRT(1)
	dispatch := func(j job) {
		if n := h.reserveRetry(1); n != 1 {
			t.Fatalf("no slot for %s", j.e.id)
		}
		h.dispatch(j)
	}
	dispatch(keyed("1-0", "a"))
	if got := take(h); got != "1-0" {
		t.Fatalf("first entry of a: queued %q", got)
	}
	h.toRetry("1-0", retryEntry{at: time.Now().Add(time.Hour), deliveries: 1, backoff: time.Hour}) // a's head fails: a is blocked
	dispatch(keyed("3-0", "a"))
	dispatch(keyed("2-0", "a")) // claimed late: parked before 3-0
	if got := take(h); got != "" || h.lines.parked != 2 {
		t.Fatalf("entries behind a failed head: queued %q, %d parked; want none queued, 2 parked", got, h.lines.parked)
	}
	dispatch(keyed("4-0", "b")) // another key runs, and fills work
	if free := h.reserve(1); free != 0 {
		t.Fatalf("reserve with work full = %d", free)
	}
	h.settleRetries([]string{"1-0"}) // a's head went to another consumer: a moves on, work is full
	if len(h.ready) != 1 || h.ready[0].e.id != "2-0" {
		t.Fatalf("ready = %v, want 2-0 waiting", h.ready)
	}
	if got := take(h); got != "4-0" {
		t.Fatalf("queued %q, want b's 4-0", got)
	}
	h.release("4-0")
	if got := take(h); got != "2-0" {
		t.Fatalf("after a release, queued %q, want a's next, 2-0", got)
	}
	h.release("2-0")
	if got := take(h); got != "3-0" {
		t.Fatalf("queued %q, want 3-0", got)
	}
	h.release("3-0")
	if len(h.lines.lines) != 0 || len(h.lines.lineOf) != 0 || h.lines.parked != 0 || len(h.held) != 0 {
		t.Errorf("after the lines drained: %d lines, %d ids, %d parked, %d held; want none", len(h.lines.lines), len(h.lines.lineOf), h.lines.parked, len(h.held))
	}
}

func TestCompareIDs(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"1-0", "2-0", -1}, {"10-0", "9-0", 1}, {"5-10", "5-9", 1}, {"5-1", "5-1", 0}, {"1700000000000-0", "999999999999-5", 1}} {
		if got := streamwire.CompareIDs(c.a, c.b); got != c.want {
			t.Errorf("streamwire.CompareIDs(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
