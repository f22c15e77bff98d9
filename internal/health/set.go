package health

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/keyslot"
)

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = keyslot.Count

// Range is a range of hash slots, Lo to Hi inclusive, and the node serving them.
type Range struct {
	Lo, Hi uint16
	// Node identifies the master serving the slots: its address, host:port.
	Node string
}

// Lookup returns the slot ranges of a cluster's masters, or nil and no error for a server
// that is not a cluster (a single server or a sentinel's master: one node). It is given a
// context with a deadline.
type Lookup func(ctx context.Context) ([]Range, error)

// Intervals of a Set's topology lookups.
const (
	// refreshHealthy is how often a Set whose breakers are all closed looks the topology
	// up again (slots may have moved).
	refreshHealthy = 30 * time.Second
	// refreshFailing is how often it does while a breaker is not closed or the last
	// lookup failed (a failover moves the slots of a failed master to its replica).
	refreshFailing = time.Second
	// lookupTimeout bounds one lookup.
	lookupTimeout = time.Second
)

// Set is a family of Breakers of one component, one per node of a Redis Cluster: [Set.For]
// returns the breaker of the master serving a key's hash slot, so that a failing master
// opens only its own breaker and the keys of the others keep working. The topology comes
// from Lookup, made on first use and again every 30 s (every second while a breaker is not
// closed or a lookup failed, and at once when a breaker opens), on a goroutine of its own
// bounded by a 1 s deadline, one at a time: calls never wait for it. Until the first
// lookup answers, and for a single server, every key has the one default breaker; a slot
// no master serves has it too. A node's breaker lives as long as the node serves slots: when
// a lookup finds a node gone (a failed master whose replica took its slots over), its
// breaker, if not closed, closes with one Info line and a Change, and its slots get their
// new master's breaker.
//
// Node breakers log and report their changes with their node (Change.Node, a "node"
// attribute). A Set is safe for concurrent use; For costs an atomic load, a clock read,
// and on a cluster the CRC16 of the key's hash tag.
type Set struct {
	cfg    Config
	lookup Lookup
	def    *Breaker
	base   time.Time

	topo atomic.Pointer[topology]
	due  atomic.Int64 // ns since base when the next lookup is due; -1: never (no cluster)
	busy atomic.Bool  // a lookup runs

	mu     sync.Mutex // guards byNode and gone
	byNode map[string]*Breaker
	gone   Stats // the counts of the breakers of nodes that left the topology
}

// topology maps every slot to its breaker.
type topology struct {
	owner [NumSlots]uint16 // index into brs
	brs   []*Breaker       // brs[0] is the default breaker
}

// NewSet returns a Set of breakers configured by c (see New for its errors). A nil lookup
// makes a Set of one breaker, as for a single server.
func NewSet(c Config, lookup Lookup) (*Set, error) {
	def, err := New(c)
	if err != nil {
		return nil, err
	}
	s := &Set{cfg: def.cfg, lookup: lookup, def: def, base: def.base, byNode: map[string]*Breaker{}}
	s.cfg.Logger = def.log
	if lookup == nil {
		s.due.Store(-1)
	}
	def.cfg.OnStateChange = s.opened(c.OnStateChange)
	return s, nil
}

func (s *Set) now() int64 { return int64(s.cfg.Clock().Sub(s.base)) }

// opened returns the OnStateChange of a node breaker: it makes a lookup due at once when
// the breaker opens, then calls f (when not nil).
func (s *Set) opened(f func(Change)) func(Change) {
	return func(ch Change) {
		if ch.To == redstream.BreakerOpen {
			if d := s.due.Load(); d >= 0 {
				s.due.CompareAndSwap(d, 0)
			}
		}
		if f != nil {
			f(ch)
		}
	}
}

// For returns the breaker of the node serving key's hash slot (any key of the call: the
// keys of one call share a slot), or the default breaker.
func (s *Set) For(key string) *Breaker {
	s.maybeLookup()
	t := s.topo.Load()
	if t == nil {
		return s.def
	}
	return t.brs[t.owner[keyslot.Of(key)]]
}

// Of is For without starting a due lookup: for the further keys of one call.
func (s *Set) Of(key string) *Breaker {
	t := s.topo.Load()
	if t == nil {
		return s.def
	}
	return t.brs[t.owner[keyslot.Of(key)]]
}

// ForSlot is For of a key in slot (taken modulo NumSlots).
func (s *Set) ForSlot(slot uint16) *Breaker {
	s.maybeLookup()
	t := s.topo.Load()
	if t == nil {
		return s.def
	}
	return t.brs[t.owner[slot%NumSlots]]
}

// ForNode returns the breaker of the node at addr (host:port), or nil when no master of
// the last topology has that address.
func (s *Set) ForNode(addr string) *Breaker {
	if s.topo.Load() == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byNode[addr]
}

// Single reports whether every key has the default breaker: a single server, or a
// cluster whose topology is not known yet.
func (s *Set) Single() bool { return s.topo.Load() == nil }

// Default returns the breaker of the keys of no known node (every key of a single server).
func (s *Set) Default() *Breaker { return s.def }

// maybeLookup starts a lookup when one is due and none runs.
func (s *Set) maybeLookup() {
	d := s.due.Load()
	if d < 0 || s.now() < d || !s.busy.CompareAndSwap(false, true) {
		return
	}
	go s.refresh()
}

// refresh looks the topology up and installs it; s.busy is set. It cannot panic on any
// answer of the lookup: ranges out of bounds are ignored.
func (s *Set) refresh() {
	defer s.busy.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	ranges, err := s.lookup(ctx)
	cancel()
	now := s.now()
	switch {
	case err != nil:
		s.due.Store(now + int64(refreshFailing))
		return
	case ranges == nil:
		s.due.Store(-1) // not a cluster: the default breaker for good
		return
	}
	t := &topology{brs: []*Breaker{s.def}}
	s.mu.Lock()
	index := make(map[string]uint16, len(s.byNode))
	byNode := make(map[string]*Breaker, len(s.byNode))
	for _, r := range ranges {
		if r.Node == "" || r.Lo > r.Hi || r.Hi >= NumSlots {
			continue
		}
		i, ok := index[r.Node]
		if !ok {
			b := s.byNode[r.Node]
			if b == nil {
				if b, err = s.newNode(r.Node); err != nil {
					continue // New accepted the same configuration: cannot happen
				}
			}
			i = uint16(len(t.brs))
			index[r.Node] = i
			byNode[r.Node] = b
			t.brs = append(t.brs, b)
		}
		for slot := int(r.Lo); slot <= int(r.Hi); slot++ {
			t.owner[slot] = i
		}
	}
	var left []*Breaker
	for n, b := range s.byNode {
		if byNode[n] == nil {
			left = append(left, b)
		}
	}
	s.byNode = byNode
	s.topo.Store(t)
	for _, b := range left {
		b.retire()
		x := b.Stats()
		s.gone.Successes += x.Successes
		s.gone.Failures += x.Failures
		s.gone.Collapsed += x.Collapsed
		s.gone.Rejected += x.Rejected
		s.gone.Opens += x.Opens
	}
	s.mu.Unlock()
	next := refreshHealthy
	for _, b := range t.brs {
		if b.State() != redstream.BreakerClosed {
			next = refreshFailing
		}
	}
	s.due.Store(now + int64(next))
}

// newNode returns a closed breaker of node; s.mu is held.
func (s *Set) newNode(node string) (*Breaker, error) {
	c := s.cfg
	c.Attrs = append(append([]slog.Attr(nil), c.Attrs...), slog.String("node", node))
	c.OnStateChange = s.opened(c.OnStateChange)
	b, err := New(c)
	if err != nil {
		return nil, err
	}
	b.node = node
	return b, nil
}

// breakers returns the default breaker and those of the last topology's nodes.
func (s *Set) breakers() []*Breaker {
	if t := s.topo.Load(); t != nil {
		return t.brs
	}
	return []*Breaker{s.def}
}

// State returns the worst state of the Set's breakers: open when any is open, else
// half-open when any is, else closed.
func (s *Set) State() redstream.BreakerState {
	st := redstream.BreakerClosed
	for _, b := range s.breakers() {
		switch b.State() {
		case redstream.BreakerOpen:
			return redstream.BreakerOpen
		case redstream.BreakerHalfOpen:
			st = redstream.BreakerHalfOpen
		}
	}
	return st
}

// Stats returns the sums of the counts of the Set's breakers (those of nodes that left the
// topology included, so that counts only grow), the largest ConsecutiveFailures of the
// current ones, and State.
func (s *Set) Stats() Stats {
	s.mu.Lock()
	st := s.gone
	s.mu.Unlock()
	for _, b := range s.breakers() {
		x := b.Stats()
		st.ConsecutiveFailures = max(st.ConsecutiveFailures, x.ConsecutiveFailures)
		st.Successes += x.Successes
		st.Failures += x.Failures
		st.Collapsed += x.Collapsed
		st.Rejected += x.Rejected
		st.Opens += x.Opens
	}
	st.State = s.State()
	return st
}

// NodeStates returns the state of each node's breaker by node address ("" for the
// default breaker).
func (s *Set) NodeStates() map[string]redstream.BreakerState {
	out := map[string]redstream.BreakerState{}
	for _, b := range s.breakers() {
		out[b.node] = b.State()
	}
	return out
}
