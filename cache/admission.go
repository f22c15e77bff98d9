package cache

import (
	"container/list"
	"hash/maphash"
	"sync"

	"github.com/redis/rueidis"
)

// NewAdmissionStore is a client-side cache store for rueidis with a frequency-based
// admission policy (TinyLFU): when memory is full, a value read from Redis enters only if
// its key has been read more often, recently, than the least recently used entry it would
// evict; otherwise it is served but not kept. A scan or a long tail of keys read once then
// no longer evicts the hot keys, as it does with rueidis's default store, which admits
// everything. The bound is ClientOption.CacheSizeEachConn bytes per connection (rueidis's
// default: 128 MiB), counted as rueidis counts it (the value's size plus the key's).
//
// Pass it to rueidis, whose client the cache reads through:
//
//	rueidis.ClientOption{InitAddress: addrs, NewCacheStoreFn: cache.NewAdmissionStore, CacheSizeEachConn: 64 << 20}
//
// It keeps every guarantee of client-side caching (invalidation, ClientSideCache.TTL and
// MaxStaleness): it changes only which copies are kept. It is safe for concurrent use.
func NewAdmissionStore(opt rueidis.CacheStoreOption) rueidis.CacheStore {
	size := opt.CacheSizeEachConn
	if size <= 0 {
		size = rueidis.DefaultCacheBytes
	}
	return rueidis.NewSimpleCacheAdapter(newAdmitting(size))
}

// admitting is a byte-bounded LRU whose insertions past the bound pass TinyLFU admission:
// a count-min sketch of 4-bit counters (4 rows) estimates each key's recent read count, a
// doorkeeper bit set absorbs the first read of each key (most keys of a long tail are read
// once), and every sampleFactor × counters recorded reads all counters are halved and the
// doorkeeper cleared, so the counts follow the recent workload.
type admitting struct {
	mu    sync.Mutex
	max   int
	used  int
	lru   *list.List // front: most recent; values *admitted
	items map[string]*list.Element
	sk    sketch
}

type admitted struct {
	key  string
	val  rueidis.RedisMessage
	size int
}

func newAdmitting(max int) *admitting {
	// Size the sketch for the entries that fit if an entry takes about 256 bytes.
	return &admitting{max: max, lru: list.New(), items: make(map[string]*list.Element), sk: newSketch(max / 256)}
}

// Get returns key's value (the zero RedisMessage when absent) and records the read.
func (a *admitting) Get(key string) rueidis.RedisMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sk.record(key)
	if e, ok := a.items[key]; ok {
		a.lru.MoveToFront(e)
		return e.Value.(*admitted).val
	}
	return rueidis.RedisMessage{}
}

// Set stores key's value if it fits, or if its key is read more often than the entries it
// evicts; otherwise it is dropped.
func (a *admitting) Set(key string, val rueidis.RedisMessage) {
	size := len(key) + val.CacheSize()
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.items[key]; ok {
		it := e.Value.(*admitted)
		a.used += size - it.size
		it.val, it.size = val, size
		a.lru.MoveToFront(e)
		a.evictOver(e)
		return
	}
	if size > a.max {
		return
	}
	if a.used+size > a.max {
		freq := a.sk.estimate(key)
		// Admission: every entry to evict must be read less often than the newcomer.
		need := a.used + size - a.max
		for e := a.lru.Back(); need > 0; e = e.Prev() {
			if e == nil || a.sk.estimate(e.Value.(*admitted).key) >= freq {
				return
			}
			need -= e.Value.(*admitted).size
		}
		a.evictOver(nil)
		for a.used+size > a.max {
			a.remove(a.lru.Back())
		}
	}
	a.items[key] = a.lru.PushFront(&admitted{key: key, val: val, size: size})
	a.used += size
}

// evictOver evicts least recently used entries other than keep while over the bound.
func (a *admitting) evictOver(keep *list.Element) {
	for a.used > a.max {
		e := a.lru.Back()
		if e == keep {
			e = e.Prev()
		}
		if e == nil {
			return
		}
		a.remove(e)
	}
}

func (a *admitting) remove(e *list.Element) {
	it := a.lru.Remove(e).(*admitted)
	delete(a.items, it.key)
	a.used -= it.size
}

// Del drops key's value.
func (a *admitting) Del(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.items[key]; ok {
		a.remove(e)
	}
}

// Flush drops every value (the connection closed); the frequencies stay.
func (a *admitting) Flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lru.Init()
	clear(a.items)
	a.used = 0
}

// sampleFactor × the sketch's counters is the number of reads between two halvings.
const sampleFactor = 10

// sketch is a count-min sketch of 4-bit counters with a doorkeeper.
type sketch struct {
	seed    maphash.Seed
	rows    [4][]uint64 // 16 counters of 4 bits per word
	mask    uint64      // counters per row - 1
	door    []uint64    // doorkeeper bits
	reads   int
	resetAt int
}

func newSketch(entries int) sketch {
	n := uint64(1024)
	for n < uint64(entries) && n < 1<<24 {
		n <<= 1
	}
	s := sketch{seed: maphash.MakeSeed(), mask: n - 1, door: make([]uint64, n/64), resetAt: sampleFactor * int(n)}
	for i := range s.rows {
		s.rows[i] = make([]uint64, n/16)
	}
	return s
}

// index returns the counter of key in row i, from the key's hash h.
func (s *sketch) index(h uint64, i int) uint64 {
	return ((h + uint64(i)*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9 >> 24) & s.mask
}

func (s *sketch) hash(key string) uint64 { return maphash.String(s.seed, key) }

func counter(row []uint64, j uint64) uint64 { return (row[j/16] >> (4 * (j % 16))) & 0xf }

// record counts one read of key: its first read since the last halving sets its
// doorkeeper bit; later ones increment its counters (conservatively: only the smallest).
func (s *sketch) record(key string) {
	h := s.hash(key)
	d := h & (uint64(len(s.door))*64 - 1)
	if s.door[d/64]&(1<<(d%64)) == 0 {
		s.door[d/64] |= 1 << (d % 64)
	} else {
		low := uint64(15)
		for i := range s.rows {
			low = min(low, counter(s.rows[i], s.index(h, i)))
		}
		if low < 15 {
			for i := range s.rows {
				if j := s.index(h, i); counter(s.rows[i], j) == low {
					s.rows[i][j/16] += 1 << (4 * (j % 16))
				}
			}
		}
	}
	if s.reads++; s.reads >= s.resetAt {
		s.halve()
	}
}

// estimate returns key's recent read count.
func (s *sketch) estimate(key string) uint64 {
	h := s.hash(key)
	low := uint64(15)
	for i := range s.rows {
		low = min(low, counter(s.rows[i], s.index(h, i)))
	}
	d := h & (uint64(len(s.door))*64 - 1)
	return low + (s.door[d/64]>>(d%64))&1
}

// halve halves every counter and clears the doorkeeper.
func (s *sketch) halve() {
	for i := range s.rows {
		for j := range s.rows[i] {
			s.rows[i][j] = (s.rows[i][j] >> 1) & 0x7777777777777777
		}
	}
	clear(s.door)
	s.reads = 0
}
