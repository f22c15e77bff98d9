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
	"github.com/redstream-go/redstream/lua"
)

// scriptPeek decides every limit of a key without recording: read-only (EVALSHA_RO).
var scriptPeek = newScript("peek.lua", lua.Peek, true)

// DefaultPeekTimeout bounds a peek whose context has no deadline of its own.
const DefaultPeekTimeout = 5 * time.Second

// Limits returns the validated core limits of the limiter's specs, in the order of Specs,
// in a new slice: what the decisions of PeekLimits are about.
func (l *Limiter) Limits() []core.Limit {
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

// Peek is shorthand for PeekN(ctx, key, now, 1).
func (l *Limiter) Peek(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	return l.PeekN(ctx, key, now, 1)
}

// PeekN returns the Decision that AllowN(ctx, key, now, n) would return, without recording
// anything: whether a request of cost n would be admitted, the Limit, the Remaining after
// it (or, when it would be denied, now), RetryAfter and ResetAfter. Two peeks at the same
// time answer the same, and a later decision is the same as without the peek. With several
// limits it is their core.Combine, as AllowN's.
//
// Bad input returns the errors of AllowN and makes no Redis call. A Redis failure is
// returned as an error (naming the script) whatever the FailurePolicy: a peek inspects,
// it does not decide. Without a deadline on ctx the call is bounded by
// DefaultPeekTimeout. A key holding state the scripts cannot read is ErrForeignState; a
// JavaCompatible limiter cannot be peeked at (errors.ErrUnsupported).
func (l *Limiter) PeekN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	ds, err := l.peek(ctx, key, now, n)
	if err != nil {
		return redstream.Decision{}, err
	}
	return engine.Decision(core.Combine(ds)), nil
}

// PeekLimits is PeekN limit by limit: the decision of each limit (in the order of Specs)
// for a request of cost n at now, in one atomic read-only script call. A limit's
// decision is its own: with several limits, a request is admitted only if every one of
// them admits it.
func (l *Limiter) PeekLimits(ctx context.Context, key string, now time.Time, n int64) ([]redstream.Decision, error) {
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
	for _, p := range l.Limits() {
		ps := algParams(p)
		for len(ps) < 3 {
			ps = append(ps, "0")
		}
		args = append(append(args, algScripts[p.Name()].code), ps...)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultPeekTimeout)
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
