package redisbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/engine"
)

// NewLocal returns a new in-process limiter of l's specs (the one spec, or every spec of a
// multi-limiter, all-or-nothing), deciding as package memory does, on the process's
// monotonic clock for the zero time. It is the fallback redstream.WithFailurePolicy uses
// under FailFallback when it is given none.
//
// Its state is this process's own and starts empty: while Redis fails, N replicas that
// fall back admit up to N times the limit between them, and what they admit is not
// recorded in Redis.
func (l *Limiter) NewLocal() (redstream.Limiter, error) {
	ls, err := engine.Limits("redisbackend: local", l.specs)
	if err != nil {
		return nil, err
	}
	c, err := engine.Resolve("redisbackend: local", engine.Options{})
	if err != nil {
		return nil, err
	}
	loc := &localLimiter{cfg: c}
	if b, ok := engine.NewBuckets(ls[0], c); ok && len(ls) == 1 {
		loc.buckets = b
	} else {
		loc.k = engine.NewLimiter(ls, c)
	}
	return loc, nil
}

// localLimiter is the in-process limiter NewLocal returns.
type localLimiter struct {
	cfg     engine.Config
	buckets *engine.Buckets // the single bucket's lock-free table, or nil
	k       *engine.Limiter
}

func (l *localLimiter) AllowN(_ context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return redstream.Decision{}, fmt.Errorf("redisbackend: local: %w", err)
	}
	t := l.cfg.Micros(now)
	var err error
	var d redstream.Decision
	if l.buckets != nil {
		cd, e := l.buckets.Decide(key, t, n)
		d, err = engine.Decision(cd), e
	} else {
		cd, e := l.k.DecideNative(key, t, n)
		d, err = engine.Decision(cd), e
	}
	if err != nil {
		return redstream.Decision{}, fmt.Errorf("redisbackend: local: %w", err)
	}
	return d, nil
}

// TrackedKeys returns the number of keys the local limiter holds state for.
func (l *localLimiter) TrackedKeys() int {
	if l.buckets != nil {
		return l.buckets.TrackedKeys()
	}
	return l.k.TrackedKeys()
}
