package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

// ownWrites gives a Cache read-your-writes under client-side caching.
//
// Redis invalidates the copies that client-side caching keeps in memory by a message on the
// connection that read the key, which rueidis reads independently of the connection a
// write went through: for a moment after a write of this process returns, a read here may
// still be answered by the replaced copy. ownWrites remembers this cache's recent writes;
// a read answered from memory that disagrees with a write not yet confirmed goes to Redis
// instead. A write is confirmed (forgotten) by a read from Redis that started after it, by
// a copy in memory that agrees with it, or when the longest a copy can live in memory
// (ClientSideCache.TTL, at most maxOwnWriteWindow) has passed.
type ownWrites struct {
	pending atomic.Int64  // len(m), read without the lock on every read
	seq     atomic.Uint64 // write sequence numbers
	window  time.Duration
	mu      sync.Mutex
	m       map[string]ownWrite
}

// maxOwnWriteWindow bounds how long an unconfirmed write is remembered. Invalidation
// messages normally arrive within a millisecond; this covers pauses, not the normal case.
const maxOwnWriteWindow = 2 * time.Second

// ownWriteSweep is the map size above which a write first drops expired entries.
const ownWriteSweep = 4096

type ownWrite struct {
	value   string // what the write stored; unused when deleted
	deleted bool
	seq     uint64
	until   time.Time
}

func newOwnWrites(localTTL time.Duration) *ownWrites {
	return &ownWrites{window: min(localTTL, maxOwnWriteWindow), m: make(map[string]ownWrite)}
}

// note records that this process stored value under dk (or deleted it).
func (w *ownWrites) note(dk, value string, deleted bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.m) >= ownWriteSweep {
		for k, e := range w.m {
			if now.After(e.until) {
				delete(w.m, k)
			}
		}
	}
	w.m[dk] = ownWrite{value: value, deleted: deleted, seq: w.seq.Add(1), until: now.Add(w.window)}
	w.pending.Store(int64(len(w.m)))
}

// start returns the mark a read takes before it is sent, and whether any write is pending.
func (w *ownWrites) start() (uint64, bool) {
	if w.pending.Load() == 0 {
		return 0, false
	}
	return w.seq.Load(), true
}

// stale reports whether a read answered from memory (s, or miss) must be ignored because it
// disagrees with an unconfirmed write of dk.
func (w *ownWrites) stale(dk, s string, miss bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[dk]
	if !ok {
		return false
	}
	if time.Now().After(e.until) || (e.deleted && miss) || (!e.deleted && !miss && s == e.value) {
		w.forget(dk)
		return false
	}
	return true
}

// fromRedis confirms the writes of dk that a read from Redis, started at mark, saw.
func (w *ownWrites) fromRedis(dk string, mark uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.m[dk]; ok && mark >= e.seq {
		w.forget(dk)
	}
}

func (w *ownWrites) forget(dk string) {
	delete(w.m, dk)
	w.pending.Store(int64(len(w.m)))
}
