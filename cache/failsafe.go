package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// FailSafeConfig configures fail-safe: GetOrLoad serving the last value it knew for a key
// when the source of a fresh one fails. The values are kept in process memory (the last
// value each key was read or loaded with, up to MaxEntries keys), so a value is at hand
// even with Redis unreachable.
type FailSafeConfig struct {
	// Enabled turns fail-safe on. When the loader fails (an error other than ErrNotFound,
	// or the hard load timeout), or Redis fails (an ErrUnavailable error, the open breaker
	// included), GetOrLoad returns the last value it knew for the key, if it was last
	// confirmed fresh at most MaxStaleness ago, with a nil error; the Stale option tells the
	// caller. The failing source is then not asked again for that key for Throttle,
	// doubling with each further failure up to 8×Throttle: the calls in between are served
	// the stale value at once. YAML: enabled. Default false.
	Enabled bool `yaml:"enabled"`
	// MaxStaleness is how long after a value was last read from Redis or loaded it may be
	// served stale. YAML: max-staleness-ms. Default 10m.
	MaxStaleness time.Duration `yaml:"max-staleness-ms" unit:"ms"`
	// Throttle is the least time between two tries of a failing source for one key (see
	// Enabled). YAML: throttle-ms. Default 1s.
	Throttle time.Duration `yaml:"throttle-ms" unit:"ms"`
	// MaxEntries bounds the number of keys whose last value is kept; past it, the value of
	// an arbitrary other key is dropped. YAML: max-entries. Default 10000.
	MaxEntries int `yaml:"max-entries"`
}

const (
	defaultFailSafeStaleness  = 10 * time.Minute
	defaultFailSafeThrottle   = time.Second
	defaultFailSafeMaxEntries = 10000
	// maxThrottleShift caps the backoff of a failing source at Throttle << 3.
	maxThrottleShift = 3
)

// Option is a per-call option of GetOrLoad, Get, GetMany and Set; each says which it uses.
type Option func(callOptions) callOptions

type callOptions struct {
	stale      *bool
	soft, hard time.Duration
	tags       []string
	start      time.Time // when the call began: the soft timeout counts from it
}

// Stale makes GetOrLoad, Get or GetMany set *served to whether it returned a stale value
// (fail-safe or the soft load timeout) rather than a fresh one.
func Stale(served *bool) Option {
	return func(o callOptions) callOptions { o.stale = served; return o }
}

// LoadTimeouts overrides Config.LoadSoftTimeout and Config.LoadHardTimeout for one call;
// 0 switches that timeout off for the call.
func LoadTimeouts(soft, hard time.Duration) Option {
	return func(o callOptions) callOptions { o.soft, o.hard = soft, hard; return o }
}

// known is the last value fail-safe knows for a key. raw never changes: a new value is a
// new known, so a hit that finds its own value only stores a time.
type known struct {
	raw   string
	fresh atomic.Int64 // UnixNano of the last read from Redis or load
	next  atomic.Int64 // UnixNano; while ahead, the source is not asked: the value is served stale
	fails atomic.Int32 // consecutive failures, for the backoff of next
}

// lastKnown holds the last value of up to max keys (fail-safe). Reads and the hit path
// (the same value seen again) take no lock.
type lastKnown struct {
	m   sync.Map // dk -> *known
	mu  sync.Mutex
	n   int // entries in m; guarded by mu, as are inserts and deletes
	max int
}

func newLastKnown(max int) *lastKnown { return &lastKnown{max: max} }

func (l *lastKnown) get(dk string) *known {
	if v, ok := l.m.Load(dk); ok {
		return v.(*known)
	}
	return nil
}

// seen records raw as dk's value, confirmed fresh at now, and ends its throttling.
func (l *lastKnown) seen(dk, raw string, now time.Time) {
	if e := l.get(dk); e != nil && e.raw == raw {
		e.fresh.Store(now.UnixNano())
		if e.fails.Load() != 0 {
			e.next.Store(0)
			e.fails.Store(0)
		}
		return
	}
	e := &known{raw: raw}
	e.fresh.Store(now.UnixNano())
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, loaded := l.m.Swap(dk, e); loaded {
		return
	}
	l.n++
	if l.n > l.max {
		l.m.Range(func(k, _ any) bool {
			if k == dk {
				return true
			}
			l.m.Delete(k)
			l.n--
			return false
		})
	}
}

// forget drops dk's value (deleted, or a null: it is no longer the last known value).
func (l *lastKnown) forget(dk string) {
	if l.get(dk) == nil {
		return
	}
	l.mu.Lock()
	if _, loaded := l.m.LoadAndDelete(dk); loaded {
		l.n--
	}
	l.mu.Unlock()
}

// stale returns dk's value if it was fresh at most maxAge before now.
func (l *lastKnown) stale(dk string, now time.Time, maxAge time.Duration) (string, bool) {
	e := l.get(dk)
	if e == nil || now.UnixNano()-e.fresh.Load() > int64(maxAge) {
		return "", false
	}
	return e.raw, true
}

// throttled returns dk's value while its source is throttled after a failure.
func (l *lastKnown) throttled(dk string, now time.Time, maxAge time.Duration) (string, bool) {
	e := l.get(dk)
	if e == nil || now.UnixNano() >= e.next.Load() || now.UnixNano()-e.fresh.Load() > int64(maxAge) {
		return "", false
	}
	return e.raw, true
}

// failed records a failure of dk's source at now: it is not asked again before
// throttle << min(fails-1, maxThrottleShift).
func (l *lastKnown) failed(dk string, now time.Time, throttle time.Duration) {
	if e := l.get(dk); e != nil {
		n := e.fails.Add(1)
		e.next.Store(now.Add(throttle << min(n-1, maxThrottleShift)).UnixNano())
	}
}

// failSafeFor reports whether err, returned to a GetOrLoad whose context is ctx, may be
// answered with a stale value: a loader or Redis failure, not the caller's own context
// ending, an argument or a codec error.
func failSafeFor(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil, errors.Is(err, ErrEncode), errors.Is(err, ErrDecode),
		errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrClosed):
		return false
	}
	return true
}

// serveStale answers dk with its last known value after err, if fail-safe has one, and
// throttles its source.
func (c *Cache) serveStale(ctx context.Context, dk string, err error) (string, bool) {
	if c.known == nil || !failSafeFor(ctx, err) {
		return "", false
	}
	now := time.Now()
	raw, ok := c.known.stale(dk, now, c.cfg.FailSafe.MaxStaleness)
	if ok {
		c.known.failed(dk, now, c.cfg.FailSafe.Throttle)
		c.m.staleServed.Inc()
	}
	return raw, ok
}

// hardLimit wraps load so that it is abandoned with an error after hard (0: never). An
// abandoned loader keeps running until it returns (its context is cancelled); its result is
// dropped.
func hardLimit(key string, hard time.Duration, load loadFunc) loadFunc {
	if hard <= 0 {
		return load
	}
	return func(ctx context.Context) ([]byte, error) {
		lctx, cancel := context.WithTimeout(ctx, hard)
		defer cancel()
		type out struct {
			raw   []byte
			err   error
			panic any
		}
		done := make(chan out, 1)
		go func() {
			o := out{panic: errLoadAborted}
			defer func() {
				if p := recover(); p != nil {
					o.panic = p
				}
				done <- o
			}()
			o.raw, o.err = load(lctx)
			o.panic = nil
		}()
		select {
		case o := <-done:
			if o.panic != nil {
				panic(o.panic) // the loader's panic goes to its caller, as without a timeout
			}
			return o.raw, o.err
		case <-lctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("cache: load %q: past the hard load timeout %v: %w", key, hard, context.DeadlineExceeded)
		}
	}
}

// remember records a load's or a read's result for fail-safe.
func (c *Cache) remember(dk string, r result) {
	if c.known == nil {
		return
	}
	if r.null {
		c.known.forget(dk)
		return
	}
	c.known.seen(dk, r.raw, time.Now())
}

// getOrLoad is GetOrLoad past its checks: the read, and the load on a miss.
func (c *Cache) getOrLoad(ctx context.Context, key, dk string, ttl time.Duration, mk func() loadFunc, o *callOptions) (result, error) {
	if c.known != nil {
		if raw, ok := c.known.throttled(dk, o.start, c.cfg.FailSafe.MaxStaleness); ok {
			c.m.staleServed.Inc()
			return result{raw: raw, stale: true}, nil
		}
	}
	var (
		s     string
		k     kind
		local bool
		err   error
		pttl  int64 = -1
	)
	if c.cfg.EagerRefresh > 0 {
		s, k, pttl, err = c.readPTTL(ctx, key, dk)
	} else {
		s, k, local, err = c.lookup(ctx, key, dk)
	}
	switch {
	case err != nil:
		if c.fallsBack(ctx, err) {
			r, lerr := c.fallbackLoad(ctx, dk, err, mk())
			if lerr == nil {
				c.remember(dk, r)
				return r, nil
			}
			err = lerr
		}
		if raw, ok := c.serveStale(ctx, dk, err); ok {
			return result{raw: raw, stale: true}, nil
		}
		return result{}, err
	case k == kindValue:
		r := result{raw: s, local: local}
		if c.known != nil {
			c.known.seen(dk, s, o.start)
		}
		if pttl > 0 {
			c.maybeRefresh(ctx, key, dk, ttl, pttl, mk)
		}
		return r, nil
	case k == kindNull:
		r := result{null: true}
		c.remember(dk, r)
		return r, nil
	}
	return c.loadSoft(ctx, key, dk, ttl, mk(), o)
}

// loadSoft loads key after a miss. With a soft timeout and a stale value at hand, the load
// runs apart from the caller: past soft the caller gets the stale value, and the load goes
// on to store its result.
func (c *Cache) loadSoft(ctx context.Context, key, dk string, ttl time.Duration, load loadFunc, o *callOptions) (result, error) {
	stale, ok := "", false
	if o.soft > 0 && c.known != nil {
		stale, ok = c.known.stale(dk, time.Now(), c.cfg.FailSafe.MaxStaleness)
	}
	if !ok {
		r, err := c.loadMiss(ctx, key, dk, ttl, load)
		return c.loaded(ctx, dk, r, err)
	}
	type out struct {
		r   result
		err error
	}
	done := make(chan out, 1)
	bctx := context.WithoutCancel(ctx)
	go func() {
		r, err := c.loadMiss(bctx, key, dk, ttl, load)
		if err == nil {
			c.remember(dk, r)
		} else if failSafeFor(bctx, err) {
			c.known.failed(dk, time.Now(), c.cfg.FailSafe.Throttle)
		}
		done <- out{r, err}
	}()
	timer := time.NewTimer(o.soft - time.Since(o.start))
	defer timer.Stop()
	select {
	case out := <-done:
		if out.err != nil && failSafeFor(ctx, out.err) {
			c.m.staleServed.Inc()
			return result{raw: stale, stale: true}, nil
		}
		return out.r, out.err
	case <-timer.C:
		c.m.softTimeouts.Inc()
		return result{raw: stale, stale: true}, nil
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
}

// loaded finishes a load of dk in the caller: remembered, or answered stale on failure.
func (c *Cache) loaded(ctx context.Context, dk string, r result, err error) (result, error) {
	if err == nil {
		c.remember(dk, r)
		return r, nil
	}
	if raw, ok := c.serveStale(ctx, dk, err); ok {
		return result{raw: raw, stale: true}, nil
	}
	return r, err
}
