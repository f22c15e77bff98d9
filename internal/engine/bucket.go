package engine

import (
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
	"github.com/redstream-go/redstream/internal/coreops"
)

// bucketTable maps keys to the TAT of a token or leaky bucket, the one int64 of GCRA state.
// Like Table it is split into power-of-two shards of open-addressing slots (linear probing,
// at most 7/8 full), but it is built for the one hot path that matters most:
//
//   - A slot is 24 bytes: the key and one 64-bit word holding the TAT (53 bits: a TAT stays
//     below core.MaxTime + 2·core.MaxDuration = 2^53) and an 11-bit tag from the key's hash
//     (0 marks an empty slot). Probing reads the slots themselves.
//   - K is the key's representation: a Limiter keeps keys of up to maxShortKey bytes packed
//     inline (shortKey: no pointer, so comparing a key touches only its slot's cache line
//     and the garbage collector never scans the slots) and longer keys as strings.
//   - A decision on a key the table holds takes no lock: it reads the word atomically, runs
//     the core step and publishes the new TAT with a compare-and-swap, retrying if another
//     goroutine got there first. A denial (the step returns the TAT unchanged) writes
//     nothing. The shard mutex is taken only to add a key, and by sweeps and growth, which
//     build new slots and publish them atomically.
//
// Lock-free deciders stay correct across a rebuild because the rebuild freezes every old
// slot (swaps its TAT for frozenTAT, collecting the latest word) before copying it: a
// compare-and-swap on an old slot either lands before the freeze, and is copied, or fails,
// and a decider that sees frozenTAT takes the locked path, which waits for the new slots.
// A key is written once into a slot, before the slot's word is published, so a decider
// that matches a tag always reads a complete key.
type bucketTable[K bucketKey] struct {
	shards    []bucketShard[K]
	seed      maphash.Seed // hashes long keys
	short     shortSeed    // hashes short keys
	shardMask uint64
	threshold int
}

// bucketKey is how a bucketTable stores keys.
type bucketKey interface{ string | shortKey }

// maxShortKey is the longest key stored as a shortKey.
const maxShortKey = 15

// shortKey is a key of at most maxShortKey bytes packed into 16 bytes: the key's bytes,
// zero padding, and its length in the last byte.
type shortKey struct{ lo, hi uint64 }

func packShort(key string) shortKey {
	// Whole-word loads of the key's bytes: building the key in a [16]byte and reading it
	// back as two words stalls on store-to-load forwarding (bytes stored one by one, read
	// as a word), which cost about 5 ns a decision.
	n := len(key)
	var lo, hi uint64
	switch {
	case n >= 8:
		lo = le64(key)
		// The last 8 bytes, shifted so that key[8] is the low byte (for n = 8 the shift is
		// 64, which gives 0).
		hi = le64(key[n-8:]) >> (8 * uint(16-n))
	case n >= 4:
		// Two overlapping 4-byte loads cover bytes 0..n-1.
		lo = uint64(le32(key)) | uint64(le32(key[n-4:]))<<(8*uint(n-4))
	case n > 0:
		lo = uint64(key[0]) | uint64(key[n/2])<<(8*uint(n/2)) | uint64(key[n-1])<<(8*uint(n-1))
	}
	return shortKey{lo, hi | uint64(n)<<56}
}

// le64 reads the first 8 bytes of s as a little-endian word (one load).
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// le32 reads the first 4 bytes of s as a little-endian word (one load).
func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// shortSeed is the random key of hashShort, drawn per table.
type shortSeed [4]uint64

func newShortSeed() shortSeed {
	return shortSeed{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64() | 1}
}

// hashShort hashes a packed key with two rounds of wyhash's multiply-and-fold mix under a
// random per-table seed (the mix Go's runtime hashes strings with on CPUs without AES
// instructions). On a short key it costs about a third of maphash.String, with no call.
func hashShort(s *shortSeed, k shortKey) uint64 {
	return mix(mix(k.lo^s[0], k.hi^s[1])^s[2], s[3])
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hash returns the hash of a key as the table stores it: the hash locate is given.
func (t *bucketTable[K]) hash(k K) uint64 {
	switch k := any(k).(type) {
	case string:
		return maphash.String(t.seed, k)
	case shortKey:
		return hashShort(&t.short, k)
	}
	panic("unreachable")
}

const (
	tagBits   = 11
	tagMask   = 1<<tagBits - 1
	frozenTAT = 1<<(64-tagBits) - 1 // above every TAT
)

type bucketShard[K bucketKey] struct {
	slots atomic.Pointer[[]bucketEntry[K]] // nil until the first key
	mu    sync.Mutex                       // serializes insert and rebuild
	count int                              // keys held (under mu)
	mark  int                              // a new key arriving when count >= mark sweeps first
	_     [cacheLine - 8 - 8 - 8 - 8]byte
}

// bucketEntry is one slot. word is accessed atomically: tat<<tagBits | tag.
type bucketEntry[K bucketKey] struct {
	key  K
	word uint64
}

func newBucketTable[K bucketKey](c Config) bucketTable[K] {
	t := bucketTable[K]{
		shards:    make([]bucketShard[K], c.Shards),
		seed:      maphash.MakeSeed(),
		short:     newShortSeed(),
		shardMask: uint64(c.Shards - 1),
		threshold: c.SweepThreshold,
	}
	for i := range t.shards {
		t.shards[i].mark = c.SweepThreshold
	}
	return t
}

// locate returns the shard of a key whose hash is h (low bits), its home position (middle
// bits, reduced by find) and its tag (top bits, never 0).
func (t *bucketTable[K]) locate(h uint64) (*bucketShard[K], uint64, uint64) {
	tag := h >> (64 - tagBits)
	if tag == 0 {
		tag = 1
	}
	return &t.shards[h&t.shardMask], h >> 16, tag
}

// find returns the slot of key in slots and true, or the empty slot where key would be
// inserted and false. It may run without the shard lock.
func find[K bucketKey](slots []bucketEntry[K], key K, home, tag uint64) (int, bool) {
	mask := len(slots) - 1
	i := int(home) & mask
	for {
		w := atomic.LoadUint64(&slots[i].word)
		switch w & tagMask {
		case tag:
			if slots[i].key == key {
				return i, true
			}
		case 0:
			return i, false
		}
		i = (i + 1) & mask
	}
}

// get returns the TAT of the key stored as k.
func (t *bucketTable[K]) get(k K) (int64, bool) {
	s, home, tag := t.locate(t.hash(k))
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl := s.slots.Load(); sl != nil {
		if i, ok := find(*sl, k, home, tag); ok {
			return int64(atomic.LoadUint64(&(*sl)[i].word) >> tagBits), true
		}
	}
	return 0, false
}

// insert adds a key that s (locked by the caller) does not hold; i is the slot find
// returned in the current slots (-1 when there were none). It sweeps first when the shard
// holds its mark of keys (dropping those for which gone(tat) is true; the mark becomes
// max(threshold, 2 × keys left)) and grows the slots to stay at most 7/8 full.
func (t *bucketTable[K]) insert(s *bucketShard[K], i int, key K, home, tag uint64, tat int64, gone func(int64) bool) {
	if s.count >= s.mark {
		t.rebuild(s, 0, gone)
		s.mark = max(t.threshold, 2*s.count)
		i = -1
	}
	sl := s.slots.Load()
	if sl == nil || 8*(s.count+1) > 7*len(*sl) {
		size := minSlots
		if sl != nil {
			size = 2 * len(*sl)
		}
		t.rebuild(s, size, nil)
		sl, i = s.slots.Load(), -1
	}
	slots := *sl
	if i < 0 {
		i, _ = find(slots, key, home, tag)
	}
	slots[i].key = key
	atomic.StoreUint64(&slots[i].word, uint64(tat)<<tagBits|tag)
	s.count++
}

// rebuild replaces the slots of s (locked) by new ones holding the keys for which gone is
// false (all when gone is nil), frozen out of the old slots. size is the new number of
// slots; 0 means the smallest that holds the keys kept.
func (t *bucketTable[K]) rebuild(s *bucketShard[K], size int, gone func(int64) bool) {
	var kept []bucketEntry[K]
	if old := s.slots.Load(); old != nil {
		kept = make([]bucketEntry[K], 0, s.count)
		for j := range *old {
			e := &(*old)[j]
			w0 := atomic.LoadUint64(&e.word)
			if w0 == 0 {
				continue // empty: stays empty while the lock is held
			}
			// Freeze, keeping the tag (deciders change only the TAT): from now on every
			// compare-and-swap on this slot fails.
			w := atomic.SwapUint64(&e.word, frozenTAT<<tagBits|w0&tagMask)
			if gone != nil && gone(int64(w>>tagBits)) {
				continue
			}
			kept = append(kept, bucketEntry[K]{key: e.key, word: w})
		}
	}
	if size == 0 {
		size = minSlots
		for 8*len(kept) > 7*size {
			size *= 2
		}
	}
	slots := make([]bucketEntry[K], size)
	mask := size - 1
	for _, e := range kept {
		i := int(t.hash(e.key)>>16) & mask
		for slots[i].word != 0 {
			i = (i + 1) & mask
		}
		slots[i] = e
	}
	s.slots.Store(&slots)
	s.count = len(kept)
}

// len returns the number of keys held by every shard.
func (t *bucketTable[K]) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.count
		s.mu.Unlock()
	}
	return n
}

// Buckets is the lock-free state of a single token or leaky bucket limit: the TAT of every
// key in a bucketTable, keys of up to maxShortKey bytes inline.
type Buckets struct {
	g     gcra
	short bucketTable[shortKey]
	long  bucketTable[string]
}

// gcraShaping is the table of the algorithms decided by the lock-free bucket path: the
// GCRA algorithms of core's registry, with whether their decisions carry the leaky bucket's
// shaping delay. It is optional: an algorithm it lacks takes the general path (Limiter).
var gcraShaping = map[string]bool{"token-bucket": false, "leaky-bucket": true}

// gcra is a GCRA limit's Ints, decided with corekit.GCRA, the arithmetic core's buckets
// use, and the limit itself for the errors.
type gcra struct {
	interval, tolerance, burst int64
	shaping                    bool
	lim                        core.Limit
}

// decideInto is core's step for a key whose TAT is tat, written into *d.
func (g *gcra) decideInto(d *core.Decision, tat, now, n int64) (int64, error) {
	next, ok := corekit.GCRA((*corekit.Decision)(d), g.interval, g.tolerance, g.burst, tat, now, n, g.shaping)
	if ok {
		return next, nil
	}
	return tat, g.badRequest(now, n)
}

// badRequest returns core's error for a time or cost that corekit.GCRA refused. It is apart
// so that only this path allocates what the call through core.Limit needs.
//
//go:noinline
func (g *gcra) badRequest(now, n int64) error {
	var (
		d    core.Decision
		next coreops.Next
	)
	return coreops.CheckState(g.lim, &core.State{}, now, n, &d, &next)
}

// NewBuckets returns the bucket table of lim and true when lim's algorithm is in
// gcraShaping, else nil and false.
func NewBuckets(lim core.Limit, c Config) (*Buckets, bool) {
	shaping, ok := gcraShaping[lim.Name()]
	if !ok {
		return nil, false
	}
	ints := coreops.Ints(lim)
	b := &Buckets{g: gcra{interval: ints[0], tolerance: ints[1], burst: ints[2], shaping: shaping, lim: lim}}
	b.short, b.long = newBucketTable[shortKey](c), newBucketTable[string](c)
	return b, true
}

// Decide decides a request of cost n for key at now. DecideInto is the fast form.
func (b *Buckets) Decide(key string, now, n int64) (core.Decision, error) {
	var out redstream.Decision
	err := b.DecideInto(&out, key, now, n)
	return coreOf(&out), err
}

// DecideInto decides a request of cost n for key at now into *out (see convert).
func (b *Buckets) DecideInto(out *redstream.Decision, key string, now, n int64) error {
	if len(key) <= maxShortKey {
		k := packShort(key)
		return stepBucket(out, b, &b.short, k, hashShort(&b.short.short, k), now, n)
	}
	return stepBucket(out, b, &b.long, key, maphash.String(b.long.seed, key), now, n)
}

// TrackedKeys returns the number of keys held, as Limiter.TrackedKeys does.
func (b *Buckets) TrackedKeys() int { return b.short.len() + b.long.len() }

// TAT returns the stored TAT of key (for tests, and a successor's Carrier).
func (b *Buckets) TAT(key string) (int64, bool) {
	if len(key) <= maxShortKey {
		return b.short.get(packShort(key))
	}
	return b.long.get(key)
}

// stepBucket decides a key already held without a lock: read the TAT, decide with
// corekit.GCRA, and compare-and-swap the new TAT in, again if another goroutine
// changed it meanwhile; a denial stores nothing. k is the key as the table stores it, h its
// hash.
func stepBucket[K bucketKey](out *redstream.Decision, b *Buckets, t *bucketTable[K], k K, h uint64, now, n int64) error {
	s, home, tag := t.locate(h)
	if sl := s.slots.Load(); sl != nil {
		if i, ok := find(*sl, k, home, tag); ok {
			p := &(*sl)[i].word
			var d core.Decision
			for {
				w := atomic.LoadUint64(p)
				if w>>tagBits == frozenTAT {
					break // the slots are being rebuilt: wait on the lock
				}
				old := int64(w >> tagBits)
				tat, err := b.g.decideInto(&d, old, now, n)
				if tat == old || atomic.CompareAndSwapUint64(p, w, uint64(tat)<<tagBits|tag) {
					convert(out, &d)
					return err
				}
			}
		}
	}
	return stepBucketLocked(out, b, t, s, k, home, tag, now, n)
}

// stepBucketLocked decides under the shard lock: for a key not held yet (stored only when
// admitted, which may sweep the shard first), or one whose slots were being rebuilt.
func stepBucketLocked[K bucketKey](out *redstream.Decision, b *Buckets, t *bucketTable[K], s *bucketShard[K], k K, home, tag uint64, now, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d core.Decision
	i := -1
	if sl := s.slots.Load(); sl != nil {
		var ok bool
		if i, ok = find(*sl, k, home, tag); ok {
			// The current slots are never frozen while the lock is held, but lock-free
			// deciders may still race on the TAT.
			p := &(*sl)[i].word
			for {
				w := atomic.LoadUint64(p)
				old := int64(w >> tagBits)
				tat, err := b.g.decideInto(&d, old, now, n)
				if tat == old || atomic.CompareAndSwapUint64(p, w, uint64(tat)<<tagBits|tag) {
					convert(out, &d)
					return err
				}
			}
		}
	}
	tat, err := b.g.decideInto(&d, 0, now, n)
	convert(out, &d)
	if err != nil {
		return err
	}
	if d.Allowed {
		t.insert(s, i, k, home, tag, tat, func(v int64) bool { return corekit.GCRAIdle(v, now) })
	}
	return nil
}
