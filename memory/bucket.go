package memory

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// bucketTable maps keys to the TAT of a token or leaky bucket, the one int64 of GCRA state.
// It is laid out like table (power-of-two shards of open-addressing slots, one maphash hash
// giving shard and tag), but a decision on a key it holds takes no lock: it reads the TAT
// atomically, runs the core step and publishes the new TAT with a compare-and-swap, retrying
// if another goroutine got there first. A denial (the step returns the TAT unchanged)
// writes nothing. The shard mutex is taken only to add a key, and by sweeps and growth,
// which build new slots and publish them atomically.
//
// Lock-free readers stay correct across a rebuild because the rebuild freezes every old
// slot (swaps its TAT for the frozen sentinel, collecting the latest value) before copying
// it: a compare-and-swap on an old slot either lands before the freeze, and is copied, or
// fails, and a reader that sees the sentinel takes the locked path, which waits for the new
// slots. A key is written once into a slot, before the slot's tag is published, so a reader
// that matches a tag always sees its key.
type bucketTable struct {
	shards    []bucketShard
	seed      maphash.Seed
	shardMask uint64
	threshold int
}

// frozen marks a slot of slots being replaced. A TAT is never negative.
const frozen = math.MinInt64

type bucketShard struct {
	slots atomic.Pointer[bucketSlots] // nil until the first key
	mu    sync.Mutex                  // serializes insert and rebuild
	count int                         // keys held (under mu)
	mark  int                         // a new key arriving when count >= mark sweeps first
	_     [cacheLine - 8 - 8 - 8 - 8]byte
}

// bucketSlots is one generation of a shard's open-addressing table. tags and tat are
// accessed atomically; key is written once, before its tag.
type bucketSlots struct {
	tags []uint32
	ents []bucketEntry
}

type bucketEntry struct {
	key string
	tat int64
}

func newBucketTable(r resolved) bucketTable {
	t := bucketTable{
		shards:    make([]bucketShard, r.shards),
		seed:      maphash.MakeSeed(),
		shardMask: uint64(r.shards - 1),
		threshold: r.threshold,
	}
	for i := range t.shards {
		t.shards[i].mark = r.threshold
	}
	return t
}

// locate hashes key once and returns its shard and tag (never 0).
func (t *bucketTable) locate(key string) (*bucketShard, uint32) {
	h := maphash.String(t.seed, key)
	tag := uint32(h >> 32)
	if tag == 0 {
		tag = 1
	}
	return &t.shards[h&t.shardMask], tag
}

// find returns the slot of key and true, or the empty slot where key would be inserted and
// false. It may run without the shard lock.
func (s *bucketSlots) find(key string, tag uint32) (int, bool) {
	mask := len(s.tags) - 1
	i := int(tag) & mask
	for {
		switch atomic.LoadUint32(&s.tags[i]) {
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

// get returns the TAT of key, for tests.
func (t *bucketTable) get(key string) (int64, bool) {
	s, tag := t.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl := s.slots.Load(); sl != nil {
		if i, ok := sl.find(key, tag); ok {
			return atomic.LoadInt64(&sl.ents[i].tat), true
		}
	}
	return 0, false
}

// insert adds a key that s (locked by the caller) does not hold; i is the slot find
// returned in the current slots (-1 when there were none). It sweeps first when the shard
// holds its mark of keys (dropping those for which gone(tat) is true; the mark becomes
// max(threshold, 2 × keys left)) and grows the slots to stay at most 7/8 full.
func (t *bucketTable) insert(s *bucketShard, i int, key string, tag uint32, tat int64, gone func(int64) bool) {
	if s.count >= s.mark {
		s.rebuild(0, gone)
		s.mark = max(t.threshold, 2*s.count)
		i = -1
	}
	sl := s.slots.Load()
	if sl == nil || 8*(s.count+1) > 7*len(sl.tags) {
		size := minSlots
		if sl != nil {
			size = 2 * len(sl.tags)
		}
		s.rebuild(size, nil)
		sl, i = s.slots.Load(), -1
	}
	if i < 0 {
		i, _ = sl.find(key, tag)
	}
	e := &sl.ents[i]
	e.key = key
	atomic.StoreInt64(&e.tat, tat)
	atomic.StoreUint32(&sl.tags[i], tag)
	s.count++
}

// rebuild replaces the slots of s (locked) by new ones holding the keys for which gone is
// false (all when gone is nil), frozen out of the old slots. size is the new number of
// slots; 0 means the smallest that holds the keys kept.
func (s *bucketShard) rebuild(size int, gone func(int64) bool) {
	old := s.slots.Load()
	var (
		keys []string
		tats []int64
		tags []uint32
	)
	if old != nil {
		for j := range old.tags {
			tg := atomic.LoadUint32(&old.tags[j])
			if tg == 0 {
				continue
			}
			v := atomic.SwapInt64(&old.ents[j].tat, frozen)
			if gone != nil && gone(v) {
				continue
			}
			keys, tats, tags = append(keys, old.ents[j].key), append(tats, v), append(tags, tg)
		}
	}
	if size == 0 {
		size = minSlots
		for 8*len(keys) > 7*size {
			size *= 2
		}
	}
	nw := &bucketSlots{tags: make([]uint32, size), ents: make([]bucketEntry, size)}
	mask := size - 1
	for j, tg := range tags {
		i := int(tg) & mask
		for nw.tags[i] != 0 {
			i = (i + 1) & mask
		}
		nw.tags[i], nw.ents[i] = tg, bucketEntry{key: keys[j], tat: tats[j]}
	}
	s.slots.Store(nw)
	s.count = len(keys)
}

// len returns the number of keys held by every shard.
func (t *bucketTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.count
		s.mu.Unlock()
	}
	return n
}
