package wasmcore

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultShards is the number of shards of the engines' host-side maps.
	DefaultShards = 64
	// DefaultSweepThreshold is the number of keys a shard may hold before its first sweep.
	DefaultSweepThreshold = 256
	// MaxShards is the largest accepted Options.Shards.
	MaxShards = 1 << 16
)

// Options configures an engine. The zero value means the defaults.
type Options struct {
	// Runtime is the pool of module instances the engine decides with. Engines may share
	// one Runtime; the engine does not close it. Default: the process-wide [Default].
	Runtime *Runtime
	// Clock is read when a call passes the zero time.Time. Default time.Now. Times it
	// returns must lie in [Unix epoch, core.MaxTime].
	Clock func() time.Time
	// Shards is the number of independently locked parts of the engine's host-side state
	// (per-key states, per-element last-seen times), a power of two in [1, MaxShards].
	// Default DefaultShards.
	Shards int
	// SweepThreshold is the number of keys a shard may hold before it is first swept for
	// keys whose state has fully recovered (limiters) or expired (windowed deduplicator);
	// after a sweep the mark is max(SweepThreshold, 2 × keys left). At least 1. Default
	// DefaultSweepThreshold.
	SweepThreshold int
}

// resolved is Options after defaults and validation.
type resolved struct {
	rt        *Runtime
	clock     func() time.Time
	shards    int
	threshold int
}

func (o Options) resolve() (resolved, error) {
	r := resolved{rt: o.Runtime, clock: o.Clock, shards: o.Shards, threshold: o.SweepThreshold}
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
		return r, fmt.Errorf("wasmcore: %w: Shards = %d, want a power of two in [1, %d]", errInvalidConfig, o.Shards, MaxShards)
	}
	if r.threshold < 1 {
		return r, fmt.Errorf("wasmcore: %w: SweepThreshold = %d, want at least 1", errInvalidConfig, o.SweepThreshold)
	}
	if r.rt == nil {
		rt, err := Default()
		if err != nil {
			return r, err
		}
		r.rt = rt
	}
	return r, nil
}

// micros converts now to core microseconds, reading the clock for the zero time.
func (r *resolved) micros(now time.Time) int64 {
	if now.IsZero() {
		now = r.clock()
	}
	return now.UnixMicro()
}

// shard is one independently locked part of a table; mark is the size at which the next
// new key triggers a sweep. Shards are padded so that two locks never share a cache line.
type shard[S any] struct {
	mu   sync.Mutex
	m    map[string]S
	mark int
	_    [64 - 8 - 8 - 8]byte
}

// table maps string keys to states of type S, split into power-of-two shards.
type table[S any] struct {
	shards    []shard[S]
	seed      maphash.Seed
	mask      uint64
	threshold int
}

func newTable[S any](r resolved) table[S] {
	t := table[S]{shards: make([]shard[S], r.shards), seed: maphash.MakeSeed(), mask: uint64(r.shards - 1), threshold: r.threshold}
	for i := range t.shards {
		t.shards[i].m = make(map[string]S)
		t.shards[i].mark = r.threshold
	}
	return t
}

func (t *table[S]) shard(key string) *shard[S] {
	if t.mask == 0 {
		return &t.shards[0]
	}
	return &t.shards[maphash.String(t.seed, key)&t.mask]
}

// insert stores the state of a key the shard (locked by the caller) does not hold yet,
// first sweeping the shard when it holds its mark of keys.
func (t *table[S]) insert(s *shard[S], key string, v S, gone func(S) bool) {
	if len(s.m) >= s.mark {
		before := len(s.m)
		for k, v := range s.m {
			if gone(v) {
				delete(s.m, k)
			}
		}
		left := len(s.m)
		if before >= 2*t.threshold && left < before/4 {
			m := make(map[string]S, left) // Go maps never shrink
			for k, v := range s.m {
				m[k] = v
			}
			s.m = m
		}
		s.mark = max(t.threshold, 2*left)
	}
	s.m[key] = v
}

// len returns the number of keys held.
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
