package memory

import (
	"context"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
	"github.com/redstream-go/redstream/internal/failure"
)

// Limiter is an in-process rate limiter of one [redstream.Spec] ([NewLimiter]) or of several
// applied all-or-nothing ([NewMultiLimiter]), deciding with the algorithms' core steps.
// State lives in a hash table keyed by the user key and split into Options.Shards shards; a
// decision on a key already tracked allocates nothing (with at most 8 specs).
// Keys whose state has fully recovered are evicted by amortized sweeping (see
// Options.SweepThreshold), so memory stays proportional to the keys that still matter.
//
// Per key it stores: for a single token or leaky bucket the TAT, packed with a hash tag into
// one 64-bit word next to the key (24 bytes a slot, 27 to 55 bytes a key with the table
// between 7/16 and 7/8 full), decided without a lock by compare-and-swap; otherwise, under
// the shard's mutex, the key's core.State per limit: the TAT of a bucket, the start, count
// and previous count of a window, the timestamps of admitted units of a sliding window log
// in a ring buffer of at most Limit entries, reused across decisions. Keys are referenced,
// not copied.
//
// With several specs a request is admitted only if every spec admits it, and only then is
// it recorded in every spec; the specs of one key are decided under one lock, so the
// combination is atomic, and a denied request changes no limit's state. Its Decision is
// core.Combine of the specs' decisions: the smallest Remaining (with that spec's Limit)
// and the largest RetryAfter, ResetAfter and Delay.
//
// An evicted key is indistinguishable from a new one for every request at or after the time
// of the sweep that evicted it. A request that claims an earlier time (a client clock behind
// the one that triggered the sweep) on an evicted key is decided as for a new key.
//
// A Limiter is safe for concurrent use. Its zero value is not usable; call [NewLimiter] or
// [NewMultiLimiter].
type Limiter struct {
	cfg     engine.Config
	buckets *engine.Buckets // a single token or leaky bucket: the lock-free path
	k       *engine.Limiter // every other limiter
	limits  []core.Limit
	specs   []redstream.Spec
}

var _ redstream.Limiter = (*Limiter)(nil)

// multiInline is the number of specs a multi-limit decision handles without allocating.
const multiInline = engine.Inline

// NewLimiter returns an in-process limiter for spec. It validates spec with Spec.Core and
// returns an error wrapping redstream.ErrInvalidConfig when spec or opts is invalid (for
// example a window or limit <= 0, a capacity < 1, a rate <= 0, NaN or infinite values).
func NewLimiter(spec redstream.Spec, opts Options) (*Limiter, error) {
	return NewMultiLimiter([]redstream.Spec{spec}, opts)
}

// NewMultiLimiter returns an all-or-nothing limiter of specs (at least one) on every key; one
// spec gives the limiter [NewLimiter] returns. It returns an error wrapping
// redstream.ErrInvalidConfig when specs is empty or a spec or opts is invalid; the message
// names the spec. Package redstream's Multi names them (rules).
func NewMultiLimiter(specs []redstream.Spec, opts Options) (*Limiter, error) {
	ls, err := engine.Limits("memory", specs)
	if err != nil {
		return nil, err
	}
	c, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &Limiter{cfg: c, limits: ls, specs: append([]redstream.Spec(nil), specs...)}
	if len(ls) == 1 {
		if b, ok := engine.NewBuckets(ls[0], c); ok {
			l.buckets = b
			return l, nil
		}
	}
	l.k = engine.NewLimiter(ls, c)
	return l, nil
}

// Specs returns the limiter's specs (one, unless built by NewMultiLimiter with several), in
// a new slice: what the decisions of PeekEach are about.
func (l *Limiter) Specs() []redstream.Spec { return append([]redstream.Spec(nil), l.specs...) }

// AllowN decides a request of cost n for key at now (the zero time means Options.Clock).
// It returns redstream.ErrEmptyKey for an empty key, redstream.ErrInvalidCost for n <= 0,
// redstream.ErrCostTooLarge when n exceeds the limit (any limit's, with several) and
// redstream.ErrInvalidTime for a time before the Unix epoch or after core.MaxTime, each
// with a zero Decision and nothing recorded. Time going backwards is answered as core
// defines it for the algorithm.
//
// ctx is not used: a decision does no I/O and waits only for the lock of one shard.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	var d redstream.Decision
	err := l.allow(&d, key, now, n)
	return d, err
}

// allow is AllowN deciding into *d, the shape every call layer of the kernel has (see
// engine.Limiter.DecideInto): the three methods above each make this one call.
//
// The checks of engine.CheckRequest are split: the empty key and a cost <= 0 here, the
// time and the cost's upper bound in core's step, which makes them anyway, in the same
// order (time, then cost), with the same errors.
func (l *Limiter) allow(d *redstream.Decision, key string, now time.Time, n int64) error {
	if key == "" || n <= 0 {
		return wrap(engine.CheckRequest(key, now, n))
	}
	var t int64
	if now.IsZero() {
		t = l.cfg.Now()
	} else {
		t = now.UnixMicro()
		if len(l.limits) > 1 {
			// A multi-limit's step errors name the limit; a bad time is the request's.
			if err := coreops.CheckTime(t); err != nil {
				return wrap(err)
			}
		}
	}
	var err error
	if b := l.buckets; b != nil {
		err = b.DecideInto(d, key, t, n)
	} else {
		err = l.k.DecideNativeInto(d, key, t, n)
	}
	if err != nil {
		*d = redstream.Decision{}
		return wrap(err)
	}
	return nil
}

// wrap prefixes an error of core with the package name.
func wrap(err error) error { return failure.Prefixed("memory", err) }

// TrackedKeys returns the number of keys whose state the limiter holds, counting keys that
// have recovered but not been swept yet. Each shard is counted under its lock; the total is
// exact when no other goroutine is deciding.
func (l *Limiter) TrackedKeys() int {
	if l.buckets != nil {
		return l.buckets.TrackedKeys()
	}
	return l.k.TrackedKeys()
}
