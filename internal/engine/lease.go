package engine

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// LeaseStepper is a Stepper that also releases and extends the leases of limit i, a
// concurrency limit, in the key's state s (coreops.ReleaseLease and coreops.ExtendLease), natively
// ([Native]) or in a WebAssembly instance. Release reports whether the lease still held its
// units (and s lost them); Extend whether it did and the lease's new time (s holds its
// units there). Neither changes s when the lease no longer counts.
type LeaseStepper interface {
	Stepper
	Release(i int, s *core.State, at, now, n int64) (bool, error)
	Extend(i int, s *core.State, at, now, n int64) (int64, bool, error)
}

// Release calls coreops.ReleaseLease of limit i.
func (ls Native) Release(i int, s *core.State, at, now, n int64) (bool, error) {
	return coreops.ReleaseLease(ls[i], s, at, now, n), nil
}

// Extend calls coreops.ExtendLease of limit i.
func (ls Native) Extend(i int, s *core.State, at, now, n int64) (int64, bool, error) {
	at, ok := coreops.ExtendLease(ls[i], s, at, now, n)
	return at, ok, nil
}

// Leases holds the leases of one concurrency limit, alone or all-or-nothing with rate
// limits on the same key: the in-process engines' [redstream.ConcurrencyLimiter] (package
// memory steps natively, wasmcore in its module). Admission is the step of every limit, as
// for a Limiter of the same limits; a lease is the units its acquisition recorded in the
// concurrency limit's log, found again by its token.
//
// All keys are held in one map under one mutex (a lease's release and extension must find
// the state its acquisition wrote); keys whose limits are all idle again are swept as by
// Config.SweepThreshold. Leases is safe for concurrent use if each call gets its own
// stepper.
type Leases struct {
	pkg    string
	cfg    Config
	limits []core.Limit
	ci     int   // the concurrency limit's index in limits
	ttl    int64 // its lease TTL, µs
	max    int64 // the largest admissible cost

	mu   sync.Mutex
	keys map[string]*leaseKey
	mark int // the number of keys at which the next sweep runs
}

// leaseKey is one key's state: a core.State per limit and the leases of the concurrency
// limit by token.
type leaseKey struct {
	states []core.State
	held   map[uint64]heldLease
}

// heldLease is where a lease's units are in the concurrency limit's log.
type heldLease struct{ at, n int64 }

// NewLeases returns the leases of the one concurrency limit of ls, configured by c; pkg
// prefixes its errors. It returns an error wrapping redstream.ErrInvalidConfig when ls
// holds no concurrency limit or more than one.
func NewLeases(pkg string, ls []core.Limit, c Config) (*Leases, error) {
	ci := -1
	for i, p := range ls {
		if p.Name() != string(redstream.AlgorithmConcurrency) {
			continue
		}
		if ci >= 0 {
			return nil, fmt.Errorf("%s: %w: specs[%d] and specs[%d] are both concurrency limits, want one", pkg, redstream.ErrInvalidConfig, ci, i)
		}
		ci = i
	}
	if ci < 0 {
		return nil, fmt.Errorf("%s: %w: no spec of algorithm %q", pkg, redstream.ErrInvalidConfig, redstream.AlgorithmConcurrency)
	}
	l := &Leases{pkg: pkg, cfg: c, limits: ls, ci: ci, ttl: ls[ci].Period(), max: core.MaxCount,
		keys: map[string]*leaseKey{}, mark: c.SweepThreshold}
	for _, p := range ls {
		l.max = min(l.max, p.Max())
	}
	return l, nil
}

// Limits returns the limits, in a new slice.
func (l *Leases) Limits() []core.Limit { return append([]core.Limit(nil), l.limits...) }

// newToken returns a random lease token in [1, 2^53), the range every runtime's numbers
// hold exactly.
func newToken() uint64 { return rand.Uint64N(1<<53-1) + 1 }

// Acquire asks for n units of key at now (µs) with st: a lease when every limit admits the
// request, else a denied Lease whose RetryAfter is core's. The request (key, n, now) must
// have been checked (CheckRequest); a cost above every limit's maximum is
// redstream.ErrCostTooLarge. A stepper's error records nothing.
func (l *Leases) Acquire(st LeaseStepper, key string, now, n int64) (redstream.Lease, error) {
	if n > l.max {
		return redstream.Lease{}, fmt.Errorf("%s: %w: n = %d, limit = %d", l.pkg, redstream.ErrCostTooLarge, n, l.max)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		l.sweep(now)
		k = &leaseKey{states: make([]core.State, len(l.limits)), held: map[uint64]heldLease{}}
		l.keys[key] = k
	}
	var ds [Inline]core.Decision
	var nx [Inline]coreops.Next
	dd, nn := ds[:0], nx[:0]
	for i := range l.limits {
		dd, nn = append(dd, core.Decision{}), append(nn, coreops.Next{})
		if err := st.Check(i, &k.states[i], now, n, &dd[i], &nn[i]); err != nil {
			return redstream.Lease{}, err
		}
	}
	d := core.Combine(dd)
	lease := redstream.Lease{Decision: Decision(d), Key: key}
	if !d.Allowed {
		return lease, nil
	}
	for i := range l.limits {
		coreops.CommitState(l.limits[i], &k.states[i], nn[i])
	}
	at := nn[l.ci][2]
	k.forget(k.states[l.ci].Log)
	lease.Token, lease.N = newToken(), n
	for k.held[lease.Token].n != 0 {
		lease.Token = newToken()
	}
	k.held[lease.Token] = heldLease{at: at, n: n}
	lease.Expiry = time.UnixMicro(at + l.ttl)
	return lease, nil
}

// forget drops the leases whose entries the concurrency limit's log lg no longer holds: the
// log prunes its oldest entries in order, so a lease taken before the oldest entry left (or
// any, once the log is empty) can never count again, even when time goes back and a new
// lease is taken at its old time (its token must not release that one's units, as on
// Redis, where each unit is a member named by its token).
func (k *leaseKey) forget(lg *core.Log) {
	for tok, h := range k.held {
		if lg == nil || lg.Len() == 0 || h.at < lg.At(0) {
			delete(k.held, tok)
		}
	}
}

// sweep drops the keys whose limits are all idle at t, once the map holds its mark of keys.
func (l *Leases) sweep(t int64) {
	if len(l.keys) < l.mark {
		return
	}
	for key, k := range l.keys {
		idle := true
		for i := range l.limits {
			idle = idle && l.limits[i].IdleState(&k.states[i], t)
		}
		if idle {
			delete(l.keys, key)
		}
	}
	l.mark = max(l.cfg.SweepThreshold, 2*len(l.keys))
}

// Release frees lease's units at now (µs) with st if it still holds them, and reports
// whether it did: a lease that expired, was released already, or whose token this limiter
// never issued changes nothing.
func (l *Leases) Release(st LeaseStepper, lease redstream.Lease, now int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, h, ok := l.find(lease)
	if !ok {
		return false, nil
	}
	done, err := st.Release(l.ci, &k.states[l.ci], h.at, now, h.n)
	if err != nil || !done {
		return false, err
	}
	delete(k.held, lease.Token)
	return true, nil
}

// Extend renews lease at now (µs) with st for another lease TTL and returns it with its new
// Expiry, or an error wrapping redstream.ErrLeaseLost for a lease that no longer holds its
// units.
func (l *Leases) Extend(st LeaseStepper, lease redstream.Lease, now int64) (redstream.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, h, ok := l.find(lease)
	if !ok {
		return lease, fmt.Errorf("%s: %w", l.pkg, redstream.ErrLeaseLost)
	}
	at, ok, err := st.Extend(l.ci, &k.states[l.ci], h.at, now, h.n)
	if err != nil {
		return lease, err
	}
	if !ok {
		return lease, fmt.Errorf("%s: %w", l.pkg, redstream.ErrLeaseLost)
	}
	k.held[lease.Token] = heldLease{at: at, n: h.n}
	lease.Expiry = time.UnixMicro(at + l.ttl)
	return lease, nil
}

// find returns the key and the record of lease, if its token is one this limiter issued
// for that key and size.
func (l *Leases) find(lease redstream.Lease) (*leaseKey, heldLease, bool) {
	k := l.keys[lease.Key]
	if k == nil || lease.Token == 0 {
		return nil, heldLease{}, false
	}
	h, ok := k.held[lease.Token]
	return k, h, ok && h.n == lease.N
}

// TrackedKeys returns the number of keys whose state l holds, counting keys that have
// recovered but not been swept yet.
func (l *Leases) TrackedKeys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
