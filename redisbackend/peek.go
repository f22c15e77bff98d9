package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/engine"
)

// scriptPeek decides every limit of a key without recording: read-only (EVALSHA_RO).
var scriptPeek = newScript("peek.lua")

// peekTimeout bounds a peek whose context has no deadline of its own.
const peekTimeout = 5 * time.Second

// PeekN returns the Decision that AllowN(ctx, key, now, n) would return, without recording
// anything: whether a request of cost n would be admitted, the Limit, the Remaining after
// it (or, when it would be denied, now), RetryAfter and ResetAfter. Two peeks at the same
// time answer the same, and a later decision is the same as without the peek. With several
// specs it is their core.Combine, as AllowN's.
//
// Bad input returns the errors of AllowN and makes no Redis call. A Redis failure is
// returned as an error (naming the script) whatever the FailurePolicy: a peek inspects,
// it does not decide. Without a deadline on ctx the call is bounded by
// 5 s. A key holding state the scripts cannot read is ErrForeignState; a
// JavaCompatible limiter cannot be peeked at (errors.ErrUnsupported).
func (l *Limiter) PeekN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	ds, err := l.peek(ctx, key, now, n)
	if err != nil {
		return redstream.Decision{}, err
	}
	return engine.Decision(core.Combine(ds)), nil
}

// PeekEach is PeekN spec by spec: the decision of each spec (in the order of Specs)
// for a request of cost n at now, in one atomic read-only script call. A limit's
// decision is its own: with several specs, a request is admitted only if every one of
// them admits it.
func (l *Limiter) PeekEach(ctx context.Context, key string, now time.Time, n int64) ([]redstream.Decision, error) {
	ds, err := l.peek(ctx, key, now, n)
	if err != nil {
		return nil, err
	}
	out := make([]redstream.Decision, len(ds))
	for i, d := range ds {
		out[i] = engine.Decision(d)
	}
	return out, nil
}

// peek runs peek.lua on the keys of key's limits.
func (l *Limiter) peek(ctx context.Context, key string, now time.Time, n int64) ([]core.Decision, error) {
	if err := l.check(key, now, n); err != nil {
		return nil, err
	}
	if l.java {
		// The Java layouts are decided by their own scripts (java.go), which have no
		// read-only variant.
		return nil, fmt.Errorf("redisbackend: peek on a JavaCompatible limiter: %w", errors.ErrUnsupported)
	}
	args := make([]string, 0, 2+4*len(l.specs))
	if now.IsZero() {
		args = append(args, "")
	} else {
		args = append(args, strconv.FormatInt(now.UnixMicro(), 10))
	}
	args = append(args, strconv.FormatInt(n, 10))
	for i, p := range l.coreLimits() {
		args = append(append(args, l.codes[i]), paddedParams(p)...)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, peekTimeout)
		defer cancel()
	}
	c, cp, err := l.get()
	if err != nil {
		return nil, scriptPeek.wrap(err)
	}
	keys := l.Keys(key)
	r := scriptPeek.exec(ctx, c, cp, keys, args)
	if err := r.Error(); err != nil {
		return nil, scriptPeek.wrap(err)
	}
	vs, err := r.AsIntSlice()
	if err != nil || len(vs) != 6*len(keys) {
		return nil, scriptPeek.wrap(fmt.Errorf("unexpected reply %v (%v)", r, err))
	}
	ds := make([]core.Decision, len(keys))
	for i := range ds {
		ds[i] = coreDecision(vs[6*i:])
	}
	return ds, nil
}

// coreLimits returns the validated core limits of the limiter's specs, in the order of
// Specs.
func (l *Limiter) coreLimits() []core.Limit {
	ls := make([]core.Limit, 0, len(l.specs))
	for _, s := range l.specs {
		p, err := s.Core()
		if err != nil { // validated by the constructor
			panic(fmt.Sprintf("redisbackend: spec %v no longer valid: %v", s, err))
		}
		ls = append(ls, p)
	}
	return ls
}
