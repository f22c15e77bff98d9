package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/engine"
)

// ConcurrencyLimiter is an in-process [redstream.ConcurrencyLimiter]: leases on one
// concurrency limit ([redstream.Concurrency]), alone or all-or-nothing with rate limits on
// the same key ([NewConcurrencyLimiter]). Admission is core's step of every limit, as for a
// [Limiter] of the same specs; a lease is the units its acquisition recorded in the
// concurrency limit's log, found again by its token.
//
// All keys are held in one map under one mutex (a lease's release and extension must find
// the state its acquisition wrote); keys whose limits are all idle again are swept as by
// Options.SweepThreshold. Options.Shards is not used. A ConcurrencyLimiter is safe for
// concurrent use; its zero value is not usable.
type ConcurrencyLimiter struct {
	cfg    engine.Config
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

var _ redstream.ConcurrencyLimiter = (*ConcurrencyLimiter)(nil)

// NewConcurrencyLimiter returns a limiter handing out leases on the one spec of specs whose
// algorithm is redstream.AlgorithmConcurrency; the other specs are rate limits charged by
// every acquisition, all-or-nothing with it. It returns an error wrapping
// redstream.ErrInvalidConfig for an invalid spec or opts, or when specs holds no
// concurrency spec or more than one.
func NewConcurrencyLimiter(specs []redstream.Spec, opts Options) (*ConcurrencyLimiter, error) {
	ls, err := engine.Limits("memory", specs)
	if err != nil {
		return nil, err
	}
	ci, err := concurrencyIndex(ls)
	if err != nil {
		return nil, err
	}
	c, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &ConcurrencyLimiter{cfg: c, limits: ls, ci: ci, ttl: ls[ci].Period(), max: core.MaxCount,
		keys: map[string]*leaseKey{}, mark: c.SweepThreshold}
	for _, p := range ls {
		l.max = min(l.max, p.Max())
	}
	return l, nil
}

// concurrencyIndex returns the index of the one concurrency limit of ls.
func concurrencyIndex(ls []core.Limit) (int, error) {
	ci := -1
	for i, p := range ls {
		if p.Name() != string(redstream.AlgorithmConcurrency) {
			continue
		}
		if ci >= 0 {
			return 0, fmt.Errorf("memory: %w: specs[%d] and specs[%d] are both concurrency limits, want one", redstream.ErrInvalidConfig, ci, i)
		}
		ci = i
	}
	if ci < 0 {
		return 0, fmt.Errorf("memory: %w: no spec of algorithm %q", redstream.ErrInvalidConfig, redstream.AlgorithmConcurrency)
	}
	return ci, nil
}

// newToken returns a random lease token in [1, 2^53), the range every runtime's numbers
// hold exactly.
func newToken() uint64 { return rand.Uint64N(1<<53-1) + 1 }

// Acquire asks for n units of key at now (the zero time means Options.Clock): a lease when
// every limit admits the request, else a denied Lease whose RetryAfter is core's. Bad input
// returns the errors of Limiter.AllowN and records nothing. ctx is not used.
func (l *ConcurrencyLimiter) Acquire(ctx context.Context, key string, now time.Time, n int64) (redstream.Lease, error) {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return redstream.Lease{}, wrap(err)
	}
	if n > l.max {
		return redstream.Lease{}, fmt.Errorf("memory: %w: n = %d, limit = %d", redstream.ErrCostTooLarge, n, l.max)
	}
	t := l.cfg.Micros(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		l.sweep(t)
		k = &leaseKey{states: make([]core.State, len(l.limits)), held: map[uint64]heldLease{}}
		l.keys[key] = k
	}
	var ds [engine.Inline]core.Decision
	var nx [engine.Inline]core.Next
	dd, nn := ds[:0], nx[:0]
	for i := range l.limits {
		dd, nn = append(dd, core.Decision{}), append(nn, core.Next{})
		if err := l.limits[i].CheckState(&k.states[i], t, n, &dd[i], &nn[i]); err != nil {
			return redstream.Lease{}, wrap(err)
		}
	}
	d := core.Combine(dd)
	lease := redstream.Lease{Decision: engine.Decision(d), Key: key}
	if !d.Allowed {
		return lease, nil
	}
	for i := range l.limits {
		l.limits[i].CommitState(&k.states[i], nn[i])
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
func (l *ConcurrencyLimiter) sweep(t int64) {
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

// Release frees lease's units at now (the zero time means Options.Clock) if it still holds
// them, and reports whether it did: a lease that expired, was released already, or whose
// token this limiter never issued changes nothing. ctx is not used.
func (l *ConcurrencyLimiter) Release(ctx context.Context, lease redstream.Lease, now time.Time) (bool, error) {
	if err := engine.CheckRequest(lease.Key, now, 1); err != nil {
		return false, wrap(err)
	}
	t := l.cfg.Micros(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	k, h, ok := l.find(lease)
	if !ok || !core.ReleaseLease(l.limits[l.ci], &k.states[l.ci], h.at, t, h.n) {
		return false, nil
	}
	delete(k.held, lease.Token)
	return true, nil
}

// Extend renews lease at now (the zero time means Options.Clock) for another lease TTL and
// returns it with its new Expiry, or an error wrapping redstream.ErrLeaseLost for a lease
// that no longer holds its units. ctx is not used.
func (l *ConcurrencyLimiter) Extend(ctx context.Context, lease redstream.Lease, now time.Time) (redstream.Lease, error) {
	if err := engine.CheckRequest(lease.Key, now, 1); err != nil {
		return lease, wrap(err)
	}
	t := l.cfg.Micros(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	k, h, ok := l.find(lease)
	if !ok {
		return lease, fmt.Errorf("memory: %w", redstream.ErrLeaseLost)
	}
	at, ok := core.ExtendLease(l.limits[l.ci], &k.states[l.ci], h.at, t, h.n)
	if !ok {
		return lease, fmt.Errorf("memory: %w", redstream.ErrLeaseLost)
	}
	k.held[lease.Token] = heldLease{at: at, n: h.n}
	lease.Expiry = time.UnixMicro(at + l.ttl)
	return lease, nil
}

// find returns the key and the record of lease, if its token is one this limiter issued
// for that key and size.
func (l *ConcurrencyLimiter) find(lease redstream.Lease) (*leaseKey, heldLease, bool) {
	k := l.keys[lease.Key]
	if k == nil || lease.Token == 0 {
		return nil, heldLease{}, false
	}
	h, ok := k.held[lease.Token]
	return k, h, ok && h.n == lease.N
}
