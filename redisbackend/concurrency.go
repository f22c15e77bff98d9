package redisbackend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

var scriptLease = newScript("lease.lua")

// ConcurrencyLimiter is a [redstream.ConcurrencyLimiter] whose leases live in Redis: one
// concurrency limit ([redstream.Concurrency]), alone or all-or-nothing with rate limits on
// the same key. An acquisition is one multi.lua call over the key's limits, as a
// NewMultiLimiter limiter of the same specs decides, with the lease's token for the
// concurrency limit; a release or an extension is one lease.lua call on the concurrency
// limit's key alone. The keys of one user key share its hash tag, so it runs on a cluster.
// Each call is bounded by Options.Timeout and goes through the limiter's circuit breaker
// (Options.Breaker); it keeps no local denials (a release frees slots before any denial's
// RetryAfter). Any number of processes may share the keys; a process that dies holding
// leases frees their slots when they expire.
//
// A ConcurrencyLimiter is safe for concurrent use; its zero value is not usable.
type ConcurrencyLimiter struct {
	l     *Limiter
	ci    int    // the concurrency limit's index among the specs
	tokAt int    // the index of its token (its third parameter) in l.params
	ttl   string // its lease TTL, µs
}

var _ redstream.ConcurrencyLimiter = (*ConcurrencyLimiter)(nil)

// NewConcurrencyLimiter returns a limiter handing out leases on the one spec of specs whose
// algorithm is redstream.AlgorithmConcurrency; the other specs are rate limits charged by
// every acquisition, all-or-nothing with it. Options.JavaCompatible and
// Options.DisableLocalDenials do not apply. It returns an error wrapping
// redstream.ErrInvalidConfig for an invalid spec or opts, when specs holds no
// concurrency spec or more than one, and for Options.Previous or Options.Carry: a
// concurrency limiter's leases do not carry across a limit change (an acquisition seeds no
// key from a previous spec's, and a lease taken under the previous specs is released in
// their keys). The client stays the caller's.
func NewConcurrencyLimiter(client rueidis.Client, specs []redstream.Spec, opts Options) (*ConcurrencyLimiter, error) {
	if client == nil {
		return nil, fmt.Errorf("redisbackend: %w: nil client", errInvalidConfig)
	}
	if len(opts.Previous) > 0 || opts.Carry != core.CarryReset {
		return nil, fmt.Errorf("redisbackend: %w: Options.Previous and Options.Carry do not apply to a concurrency limiter: its leases do not carry across a limit change", errInvalidConfig)
	}
	ci := -1
	for i, s := range specs {
		if s.Algorithm != redstream.AlgorithmConcurrency {
			continue
		}
		if ci >= 0 {
			return nil, fmt.Errorf("redisbackend: %w: specs[%d] and specs[%d] are both concurrency limits, want one", errInvalidConfig, ci, i)
		}
		ci = i
	}
	if ci < 0 {
		return nil, fmt.Errorf("redisbackend: %w: no spec of algorithm %q", errInvalidConfig, redstream.AlgorithmConcurrency)
	}
	opts.JavaCompatible = false
	l, err := newMulti(specs, opts)
	if err != nil {
		return nil, err
	}
	p, _ := specs[ci].Core() // validated by newMulti
	return &ConcurrencyLimiter{l: l.attach(client), ci: ci, tokAt: 4*ci + 6, ttl: strconv.FormatInt(p.Period(), 10)}, nil
}

// Keys returns the Redis keys holding key's state, one per spec.
func (c *ConcurrencyLimiter) Keys(key string) []string { return c.l.Keys(key) }

// Acquire asks for n units of key at now (the zero time reads the Redis server's TIME) in
// one round trip: a lease when every limit admits the request, else a denied Lease whose
// RetryAfter is the time until enough leases expire (or a rate limit admits). Bad input
// returns the errors of Limiter.AllowN and no Redis call; a Redis failure returns an error
// naming the script (context.DeadlineExceeded past Options.Timeout, ErrCircuitOpen while
// the breaker is open) and no lease.
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, key string, now time.Time, n int64) (redstream.Lease, error) {
	if err := c.l.check(key, now, n); err != nil {
		return redstream.Lease{}, err
	}
	token := rand.Uint64N(1<<53-1) + 1
	args := c.l.args(now, n)
	args[c.tokAt] = strconv.FormatUint(token, 10)
	r, err := c.l.call(ctx, scriptMulti, c.l.Keys(key), args)
	if err != nil {
		return redstream.Lease{}, err
	}
	d, err := c.l.parse(r)
	if err != nil {
		return redstream.Lease{}, err
	}
	lease := redstream.Lease{Decision: d, Key: key}
	if !d.Allowed {
		return lease, nil
	}
	vs, _ := r.AsIntSlice() // parse checked it
	lease.N, lease.Token = n, token
	lease.Expiry = clientNow(now).Add(time.Duration(vs[6*c.ci+4]) * time.Microsecond)
	return lease, nil
}

// clientNow is now, or the caller's clock for the zero time.
func clientNow(now time.Time) time.Time {
	if now.IsZero() {
		return time.Now()
	}
	return now
}

// Release frees lease's units at now (the zero time reads the server's TIME) if they are
// still held, in one round trip, and reports whether it did: a lease that expired, was
// released already, or carries a stale token changes nothing. A Redis failure is an error
// naming lease.lua.
func (c *ConcurrencyLimiter) Release(ctx context.Context, lease redstream.Lease, now time.Time) (bool, error) {
	r, ok, err := c.lease(ctx, "release", lease, now)
	if !ok || err != nil {
		return false, err
	}
	v, err := r.AsInt64()
	if err != nil {
		return false, scriptLease.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
	}
	return v == 1, nil
}

// Extend renews lease at now (the zero time reads the server's TIME) for another lease TTL,
// in one round trip, and returns it with its new Expiry; a lease that no longer holds its
// units is an error wrapping redstream.ErrLeaseLost. A Redis failure is an error naming
// lease.lua (the lease is then as it was, or extended: extend again or release it).
func (c *ConcurrencyLimiter) Extend(ctx context.Context, lease redstream.Lease, now time.Time) (redstream.Lease, error) {
	r, ok, err := c.lease(ctx, "extend", lease, now)
	if err != nil {
		return lease, err
	}
	if !ok {
		return lease, fmt.Errorf("redisbackend: %w", redstream.ErrLeaseLost)
	}
	left, err := r.AsInt64()
	if err != nil {
		return lease, scriptLease.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
	}
	if left < 0 {
		return lease, fmt.Errorf("redisbackend: %w", redstream.ErrLeaseLost)
	}
	lease.Expiry = clientNow(now).Add(time.Duration(left) * time.Microsecond)
	return lease, nil
}

// lease runs lease.lua's op on lease; ok is false, with no call, for a lease no
// acquisition of this limiter can have issued.
func (c *ConcurrencyLimiter) lease(ctx context.Context, op string, lease redstream.Lease, now time.Time) (rueidis.RedisResult, bool, error) {
	if err := c.l.check(lease.Key, now, 1); err != nil {
		return rueidis.RedisResult{}, false, err
	}
	if lease.Token == 0 || lease.Token >= 1<<53 || lease.N < 1 || lease.N > c.l.limit {
		return rueidis.RedisResult{}, false, nil
	}
	at := ""
	if !now.IsZero() {
		at = strconv.FormatInt(now.UnixMicro(), 10)
	}
	args := []string{at, op, strconv.FormatUint(lease.Token, 10), strconv.FormatInt(lease.N, 10), c.ttl, c.l.params[0]}
	r, err := c.l.call(ctx, scriptLease, c.l.Keys(lease.Key)[c.ci:c.ci+1], args)
	return r, err == nil, err
}

// call runs s once on keys under the limiter's guard (its timeout and circuit breaker), as
// AllowN runs its script, and once more if its error proves it never reached Redis. A
// script's error reply is returned as an error naming s.
func (l *Limiter) call(ctx context.Context, s *script, keys, args []string) (rueidis.RedisResult, error) {
	c, cp, err := l.get()
	if err != nil {
		return rueidis.RedisResult{}, s.wrap(err)
	}
	cctx, cancel, t, err := l.g.begin(ctx, keys[0])
	if err != nil {
		return rueidis.RedisResult{}, s.wrap(err)
	}
	run := func() rueidis.RedisResult {
		r := s.exec(cctx, c, cp, keys, args)
		if retryable(cctx, r.Error()) {
			r = s.exec(cctx, c, cp, keys, args)
		}
		return r
	}
	var r rueidis.RedisResult
	if l.g.suspected() {
		r, err = bounded(cctx, run)
	} else {
		r = run()
	}
	cancel.done()
	if err == nil {
		err = r.Error()
	}
	if err != nil {
		err = s.wrap(err)
	}
	if err = l.g.end(ctx, t, err); err != nil {
		return rueidis.RedisResult{}, err
	}
	return r, nil
}
