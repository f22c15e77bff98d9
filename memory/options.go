package memory

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
)

// Defaults of Options.
const (
	// DefaultShards is the number of shards of every map when Options.Shards is 0.
	DefaultShards = 64
	// DefaultSweepThreshold is the number of keys a shard may hold before its first sweep
	// when Options.SweepThreshold is 0 (the seed's DEFAULT_SWEEP_THRESHOLD).
	DefaultSweepThreshold = 256
	// MaxShards is the largest accepted Options.Shards.
	MaxShards = 1 << 16
)

// Options configures every engine of this package. The zero value means the defaults.
type Options struct {
	// Clock is the engine's clock, read when a call passes the zero time.Time. Default
	// time.Now. Times it returns must lie in [Unix epoch, core.MaxTime].
	Clock func() time.Time

	// Shards is the number of independently locked parts each map is split into, a power of
	// two in [1, MaxShards]. More shards mean less lock contention between goroutines
	// working on different keys. Default DefaultShards.
	Shards int

	// SweepThreshold is the number of keys a shard may hold before it is first swept for
	// keys whose state has fully recovered (limiters) or expired (windowed deduplicator).
	// A shard is swept when a new key arrives and the shard already holds its mark of keys;
	// the mark starts at SweepThreshold and after each sweep is set to
	// max(SweepThreshold, 2 × keys left). Sweeping thus costs O(1) amortized per new key
	// and a shard never holds more than about twice its live keys (or SweepThreshold).
	// At least 1. Default DefaultSweepThreshold.
	SweepThreshold int
}

// resolved is Options after defaults and validation.
type resolved struct {
	clock     func() time.Time
	shards    int
	threshold int
}

func (o Options) resolve() (resolved, error) {
	r := resolved{clock: o.Clock, shards: o.Shards, threshold: o.SweepThreshold}
	if r.clock == nil {
		r.clock = time.Now
	}
	if r.shards == 0 {
		r.shards = DefaultShards
	}
	if r.threshold == 0 {
		r.threshold = DefaultSweepThreshold
	}
	if r.shards < 1 || r.shards > MaxShards || bits.OnesCount(uint(r.shards)) != 1 {
		return r, fmt.Errorf("memory: %w: Shards = %d, want a power of two in [1, %d]", redstream.ErrInvalidConfig, o.Shards, MaxShards)
	}
	if r.threshold < 1 {
		return r, fmt.Errorf("memory: %w: SweepThreshold = %d, want at least 1", redstream.ErrInvalidConfig, o.SweepThreshold)
	}
	return r, nil
}

// micros converts now to core microseconds, reading the clock for the zero time. It does
// not validate the result; core's steps do.
func (r *resolved) micros(now time.Time) int64 {
	if now.IsZero() {
		now = r.clock()
	}
	return now.UnixMicro()
}

// cacheLine is the assumed size of a CPU cache line; shards are padded to it so that two
// shards' locks never share a line.
const cacheLine = 64

// shard is one independently locked part of a table. m maps a key to its state; mark is
// the size at which the next new key triggers a sweep.
type shard[S any] struct {
	mu   sync.Mutex
	m    map[string]S
	mark int
	_    [cacheLine - 8 - 8 - 8]byte
}

// table is a map from string keys to states of type S, split into power-of-two shards
// chosen by hash/maphash.
type table[S any] struct {
	shards    []shard[S]
	seed      maphash.Seed
	mask      uint64
	threshold int
}

func newTable[S any](r resolved) table[S] {
	t := table[S]{
		shards:    make([]shard[S], r.shards),
		seed:      maphash.MakeSeed(),
		mask:      uint64(r.shards - 1),
		threshold: r.threshold,
	}
	for i := range t.shards {
		t.shards[i].m = make(map[string]S)
		t.shards[i].mark = r.threshold
	}
	return t
}

// shard returns the shard of key.
func (t *table[S]) shard(key string) *shard[S] {
	if t.mask == 0 {
		return &t.shards[0]
	}
	return &t.shards[maphash.String(t.seed, key)&t.mask]
}

// insert stores the state of a key the shard (locked by the caller) does not hold yet. When
// the shard already holds its mark of keys it is first swept: every key for which
// gone(state) is true is deleted, and the mark becomes max(threshold, 2 × keys left).
func (t *table[S]) insert(s *shard[S], key string, v S, gone func(S) bool) {
	if len(s.m) >= s.mark {
		t.sweep(s, gone)
	}
	s.m[key] = v
}

// sweep deletes the keys of s (locked) for which gone is true and resets the mark. When
// most keys went away the map is rebuilt, since Go maps never shrink.
func (t *table[S]) sweep(s *shard[S], gone func(S) bool) {
	before := len(s.m)
	for k, v := range s.m {
		if gone(v) {
			delete(s.m, k)
		}
	}
	left := len(s.m)
	if before >= 2*t.threshold && left < before/4 {
		m := make(map[string]S, left)
		for k, v := range s.m {
			m[k] = v
		}
		s.m = m
	}
	s.mark = max(t.threshold, 2*left)
}

// len returns the number of keys held by every shard.
func (t *table[S]) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// clear forgets every key.
func (t *table[S]) clear() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.m = make(map[string]S)
		s.mark = t.threshold
		s.mu.Unlock()
	}
}
