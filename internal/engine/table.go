package engine

import (
	"hash/maphash"
	"sync"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// Table maps string keys to states of type S. It is split into power-of-two shards, each
// an open-addressing hash table (linear probing) under its own mutex. One hash of the key
// (hashShort for keys of up to maxShortKey bytes, else hash/maphash) chooses the shard (low
// bits) and the tag (high 32 bits); the tag chooses the home slot and filters the probe,
// so a lookup hashes the key once and compares key bytes only on a tag match, and the
// value is updated in place.
//
// Keys are never deleted one by one: a sweep (or Clear) rebuilds a shard from the entries
// it keeps, which also gives memory back when most keys went away.
type Table[S any] struct {
	shards    []Shard[S]
	seed      maphash.Seed // hashes long keys
	short     shortSeed    // hashes keys of up to maxShortKey bytes (see hashShort)
	shardMask uint64
	threshold int
}

// Shard is one part of a Table; its methods other than Lock and Unlock need the lock held. tags[i] is 0 for an empty slot, else the tag of the key in
// ents[i]. The table is doubled to keep count <= 7/8 of its slots, so it is between 7/16
// and 7/8 full (and a probe always ends at an empty slot). Tags are probed first, 16 to a
// cache line, which keeps the long probe sequences of a full linear-probing table cheap.
type Shard[S any] struct {
	mu    sync.Mutex
	tags  []uint32
	ents  []entry[S]
	count int // keys held
	mark  int // a new key arriving when count >= mark sweeps first
	// scratch and next receive the decision of a step made under the lock and what it
	// commits (see Limiter.DecideNativeInto and Stepper).
	scratch core.Decision
	next    coreops.Next
	_       [3*cacheLine - 8 - 24 - 24 - 8 - 8 - 48 - 24]byte
}

type entry[S any] struct {
	key string
	val S
}

// cacheLine is the assumed size of a CPU cache line; shards and locks are padded to it so
// that two of them never share a line.
const cacheLine = 64

// minSlots is the smallest table a shard allocates.
const minSlots = 8

// NewTable returns an empty table split and swept as c says.
func NewTable[S any](c Config) Table[S] {
	t := Table[S]{
		shards:    make([]Shard[S], c.Shards),
		seed:      maphash.MakeSeed(),
		short:     newShortSeed(),
		shardMask: uint64(c.Shards - 1),
		threshold: c.SweepThreshold,
	}
	for i := range t.shards {
		t.shards[i].reset(t.threshold)
	}
	return t
}

// reset empties s; its table is allocated by the first insert.
func (s *Shard[S]) reset(threshold int) {
	s.tags, s.ents = nil, nil
	s.count = 0
	s.mark = threshold
}

// Locate hashes key once and returns its shard and tag (never 0).
func (t *Table[S]) Locate(key string) (*Shard[S], uint32) {
	var h uint64
	if len(key) <= maxShortKey {
		h = hashShort(&t.short, packShort(key))
	} else {
		h = maphash.String(t.seed, key)
	}
	tag := uint32(h >> 32)
	if tag == 0 {
		tag = 1
	}
	return &t.shards[h&t.shardMask], tag
}

// Find returns the slot of key in s (locked) and true, or the empty slot where key would be
// inserted (-1 when s has no table yet) and false.
func (s *Shard[S]) Find(key string, tag uint32) (int, bool) {
	if len(s.tags) == 0 {
		return -1, false
	}
	mask := len(s.tags) - 1
	i := int(tag) & mask
	for {
		switch s.tags[i] {
		case tag:
			if s.ents[i].key == key {
				return i, true
			}
		case 0:
			return i, false
		}
		i = (i + 1) & mask
	}
}

// Insert stores v for a key that s (locked) does not hold; i is the slot find returned. A
// shard already holding its mark of keys is swept first: the keys for which gone(state) is
// true are dropped, and the mark becomes max(threshold, 2 × keys left).
func (t *Table[S]) Insert(s *Shard[S], i int, key string, tag uint32, v S, gone func(S) bool) {
	if s.count >= s.mark {
		if gone != nil {
			s.Filter(func(v S) bool { return !gone(v) })
		}
		s.mark = max(t.threshold, 2*s.count)
		i = -1
	}
	if 8*(s.count+1) > 7*len(s.tags) {
		s.rehash(max(minSlots, 2*len(s.tags)))
		i = -1
	}
	if i < 0 {
		i, _ = s.Find(key, tag)
	}
	s.tags[i] = tag
	s.ents[i] = entry[S]{key: key, val: v}
	s.count++
}

// Filter drops the entries of s (locked) for which keep is false and rebuilds the shard's
// table at the size its remaining keys need.
func (s *Shard[S]) Filter(keep func(S) bool) {
	dropped := 0
	for i, tg := range s.tags {
		if tg != 0 && !keep(s.ents[i].val) {
			s.tags[i] = 0
			s.ents[i] = entry[S]{}
			dropped++
		}
	}
	if dropped == 0 {
		return
	}
	s.count -= dropped
	// Dropping entries breaks probe sequences: reinsert what is left.
	if s.count == 0 {
		s.tags, s.ents = nil, nil
		return
	}
	size := minSlots
	for 8*s.count > 7*size {
		size *= 2
	}
	s.rehash(size)
}

// rehash moves every entry of s (locked) into new tables of size slots (a power of two).
func (s *Shard[S]) rehash(size int) {
	tags, ents := make([]uint32, size), make([]entry[S], size)
	mask := size - 1
	for j, tg := range s.tags {
		if tg == 0 {
			continue
		}
		i := int(tg) & mask
		for tags[i] != 0 {
			i = (i + 1) & mask
		}
		tags[i], ents[i] = tg, s.ents[j]
	}
	s.tags, s.ents = tags, ents
}

// Len returns the number of keys held by every shard.
func (t *Table[S]) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.count
		s.mu.Unlock()
	}
	return n
}

// Clear forgets every key.
func (t *Table[S]) Clear() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.reset(t.threshold)
		s.mu.Unlock()
	}
}

// Lock locks the shard.
func (s *Shard[S]) Lock() { s.mu.Lock() }

// Unlock unlocks the shard.
func (s *Shard[S]) Unlock() { s.mu.Unlock() }

// Val returns the value in slot i, which Find returned with true.
func (s *Shard[S]) Val(i int) *S { return &s.ents[i].val }

// Each calls f with the value of every key s (locked) holds.
func (s *Shard[S]) Each(f func(v *S)) {
	for i, tg := range s.tags {
		if tg != 0 {
			f(&s.ents[i].val)
		}
	}
}

// Shards returns the number of shards.
func (t *Table[S]) Shards() int { return len(t.shards) }

// Shard returns shard i.
func (t *Table[S]) Shard(i int) *Shard[S] { return &t.shards[i] }
