package memory

import (
	"context"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/engine"
)

// PeekN returns the Decision that AllowN(ctx, key, now, n) would return, without recording
// anything: whether a request of cost n would be admitted, the Limit, the Remaining after
// it (or, when it would be denied, now), RetryAfter and ResetAfter. Two peeks at the same
// time answer the same, and a later decision is the same as without the peek; a key the
// limiter does not track stays untracked. With several specs it is their core.Combine, as
// AllowN's. It returns the errors of AllowN for bad input. ctx is not used.
func (l *Limiter) PeekN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	ds, err := l.peek(key, now, n)
	if err != nil {
		return redstream.Decision{}, err
	}
	return engine.Decision(core.Combine(ds)), nil
}

// PeekEach is PeekN spec by spec: the decision of each spec (in the order of Specs)
// for a request of cost n at now, all read at one moment under the key's lock. A limit's
// decision is its own: with several specs, a request is admitted only if every one of
// them admits it.
func (l *Limiter) PeekEach(ctx context.Context, key string, now time.Time, n int64) ([]redstream.Decision, error) {
	ds, err := l.peek(key, now, n)
	if err != nil {
		return nil, err
	}
	out := make([]redstream.Decision, len(ds))
	for i, d := range ds {
		out[i] = engine.Decision(d)
	}
	return out, nil
}

func (l *Limiter) peek(key string, now time.Time, n int64) ([]core.Decision, error) {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return nil, wrap(err)
	}
	t := l.cfg.Micros(now)
	if b := l.buckets; b != nil {
		d, err := b.Peek(key, t, n)
		if err != nil {
			return nil, wrap(err)
		}
		return []core.Decision{d}, nil
	}
	ds, err := l.k.PeekEach(key, t, n)
	if err != nil {
		return nil, wrap(err)
	}
	return ds, nil
}
