package idempotency

import (
	"context"
	"sync"
	"time"
)

// NewMemory returns an Idempotent whose records live in this process's memory: at most once
// per key among the callers of this process, for tests and single-process services. A
// crash loses every record (and so every lease). Records are dropped once their retention
// (or, in flight, their lease) has passed.
func NewMemory(o Options) (*Idempotent, error) {
	return newIdempotent(o, func(Options) (engine, error) {
		return &memEngine{recs: map[string]*memRecord{}, now: time.Now}, nil
	})
}

type memRecord struct {
	key, fp, token string
	done, tooLarge bool
	value          []byte
	deadline       time.Time // running: the lease's end
	expires        time.Time // the record's end
}

type memEngine struct {
	mu     sync.Mutex
	recs   map[string]*memRecord
	now    func() time.Time
	writes int // since the last sweep
}

var _ engine = (*memEngine)(nil)

// sweep drops expired records every 1024 writes, so memory follows the live keys.
func (e *memEngine) sweep(now time.Time) {
	if e.writes++; e.writes < 1024 {
		return
	}
	e.writes = 0
	for k, r := range e.recs {
		if !now.Before(r.expires) {
			delete(e.recs, k)
		}
	}
}

func (e *memEngine) acquire(_ context.Context, rk, key, fp, token string, lease, retention time.Duration) (reply, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.sweep(now)
	code := stAcquired
	if r := e.recs[rk]; r != nil && now.Before(r.expires) {
		switch {
		case !r.done && !now.Before(r.deadline):
			code = stTakeover
		case r.key != key || r.fp != fp:
			return reply{code: stMismatch}, nil
		case r.done:
			return reply{code: stDone, value: r.value, tooLarge: r.tooLarge}, nil
		default:
			return reply{code: stRunning, left: r.deadline.Sub(now)}, nil
		}
	}
	e.recs[rk] = &memRecord{key: key, fp: fp, token: token, deadline: now.Add(lease), expires: now.Add(retention)}
	return reply{code: code}, nil
}

// held returns the record of rk if token holds its lease.
func (e *memEngine) held(rk, token string) *memRecord {
	r := e.recs[rk]
	if r == nil || r.done || r.token != token || !e.now().Before(r.expires) {
		return nil
	}
	return r
}

func (e *memEngine) complete(_ context.Context, rk, token string, value []byte, tooLarge bool, retention time.Duration) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.held(rk, token)
	if r == nil {
		return false, nil
	}
	r.done, r.tooLarge, r.token = true, tooLarge, ""
	r.value = append([]byte(nil), value...)
	r.expires = e.now().Add(retention)
	return true, nil
}

func (e *memEngine) release(_ context.Context, rk, token string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.held(rk, token) != nil {
		delete(e.recs, rk)
	}
	return nil
}

func (e *memEngine) renew(_ context.Context, rk, token string, lease time.Duration) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.held(rk, token)
	if r == nil {
		return false, nil
	}
	now := e.now()
	r.deadline = now.Add(lease)
	if r.expires.Before(r.deadline) {
		r.expires = r.deadline
	}
	return true, nil
}
