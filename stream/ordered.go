package stream

import (
	"slices"

	"github.com/redstream-go/redstream/internal/streamwire"
)

// Per-key order (Handler.OrderedByKey).
//
// Each key with entries in hand has a line: its head is the one entry of that key being
// handled or waiting for its retry, and the others wait behind it in stream (id) order,
// held and leased like every entry in hand but not taking a handler slot. When the head is
// acknowledged, dead-lettered or left pending by a shutdown, the next entry of the line
// goes to the workers; when it fails with a retry it stays the head until its redelivery
// succeeds or it is dead-lettered. Everything here is guarded by dispatcher.mu.

// keyLine is the line of one key.
type keyLine struct {
	head    string // id of the entry being handled or waiting for its retry
	waiting []job  // the key's other entries in hand, in id order
}

// keyLines is the lines of the keys in hand of one ordered handler.
type keyLines struct {
	lines  map[string]*keyLine // the lines of the keys in hand
	lineOf map[string]string   // entry id -> key, for the entries in a line
	parked int                 // entries waiting behind their key's head
}

func newKeyLines() keyLines {
	return keyLines{lines: map[string]*keyLine{}, lineOf: map[string]string{}}
}

// waiting returns the number of entries parked behind their key's head.
func (h *keyLines) waiting() int { return h.parked }

// admit decides whether j may run now (its key has no head, or j is the head coming back
// for its retry); otherwise it parks j behind its key's head.
func (h *keyLines) admit(j job) bool {
	k, _ := j.e.get(fieldKey)
	l := h.lines[k]
	if l == nil {
		h.lines[k] = &keyLine{head: j.e.id}
		h.lineOf[j.e.id] = k
		return true
	}
	if l.head == j.e.id {
		return true
	}
	i, _ := slices.BinarySearchFunc(l.waiting, j.e.id, func(w job, id string) int { return streamwire.CompareIDs(w.e.id, id) })
	l.waiting = slices.Insert(l.waiting, i, j)
	h.lineOf[j.e.id] = k
	h.parked++
	return false
}

// advance is called when entry id leaves the handler's hands for good (acknowledged,
// dead-lettered, given up, left pending by a shutdown): if it headed its key's line, the
// next entry of the line becomes the head and is returned to be queued for a worker. A
// parked entry leaving (which only a lost lease can cause) just leaves its line.
func (h *keyLines) advance(id string) (job, bool) {
	k, ok := h.lineOf[id]
	if !ok {
		return job{}, false
	}
	delete(h.lineOf, id)
	l := h.lines[k]
	if l == nil {
		return job{}, false
	}
	if l.head != id {
		if i := slices.IndexFunc(l.waiting, func(w job) bool { return w.e.id == id }); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
			h.parked--
		}
		return job{}, false
	}
	if len(l.waiting) == 0 {
		delete(h.lines, k)
		return job{}, false
	}
	next := l.waiting[0]
	l.waiting = slices.Delete(l.waiting, 0, 1)
	l.head = next.e.id
	h.parked--
	return next, true
}
