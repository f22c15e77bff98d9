package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// GetOrLoad returns the value cached under key, decoded into a T; on a miss it calls loader,
// caches its result for ttl (DefaultTTL for Config.DefaultTTL; plus jitter) and returns it.
//
// The loader says "this key has no value" by returning ErrNotFound (possibly wrapped):
// GetOrLoad then caches a null marker for Config.NullTTL and returns ErrNotFound, and so do
// later calls until the marker expires, without calling the loader (penetration
// protection). Any other loader error is returned to every caller waiting for that load and
// is not cached: the next call loads again. A loader's panic releases the lock and
// propagates to its own caller; callers sharing that load get an error.
//
// With Config.Breakdown.Enabled (the default), a miss is loaded once however many callers
// ask at the same time (stampede protection): callers in one Cache share one load
// (singleflight), and across processes the load holds a lock in Redis (the key itself holds
// a placeholder with the owner's token for Breakdown.LockTTL, replaced by the value or
// deleted by its owner only). A caller that finds another process loading reads the key
// every Breakdown.WaitInterval, and with client-side caching also as soon as Redis reports
// that the key changed; after Breakdown.WaitTimeout it calls loader itself without
// the lock (a degraded load, counted in metricDegradedLoads, whose result is returned but
// not cached). Callers sharing a load get its result whatever ttl and loader they passed.
//
// Every caller gets its own decoded copy of the value, as from a later cache hit: the loaded
// value goes through the codec. The loader gets the context of the caller that runs it; if
// that caller's context ends, the others start a load of their own. A load whose key is
// deleted or set while it runs returns its result but does not cache it.
//
// When Redis fails (an ErrUnavailable error: an error reply or a broken connection,
// Config.Timeout passing on a call, or the circuit breaker open), Config.OnRedisError
// decides: ReturnError returns the error without calling loader; LoadOnError calls loader
// and returns its result without caching anything, counted in metricFallbacks. Concurrent
// fallbacks for one key in a process share one load; there is no lock across processes
// then. A lock owner whose write-back fails still returns the loaded value. The caller's
// own context ending is never a Redis failure: its error is returned.
//
// With Config.FailSafe enabled, a loader or Redis failure is answered with the last value
// the process knew for the key, if it is recent enough (FailSafe.MaxStaleness), with a nil
// error; the Stale option reports it, and the source of that key is not asked again for
// FailSafe.Throttle (with backoff). Config.LoadSoftTimeout returns such a stale value when
// a load takes longer, the load finishing in the background; Config.LoadHardTimeout
// abandons a load. The LoadTimeouts option sets both for one call.
//
// A ttl that is neither DefaultTTL nor at least 1ms, a nil loader or an empty key is
// ErrInvalidArgument; a loaded value the codec cannot encode is ErrEncode (nothing cached).
func GetOrLoad[T any](ctx context.Context, c *Cache, key string, ttl time.Duration, loader func(ctx context.Context) (T, error), opts ...Option) (T, error) {
	var zero T
	if err := c.check(key); err != nil {
		return zero, err
	}
	if loader == nil {
		return zero, fmt.Errorf("%w: nil loader", ErrInvalidArgument)
	}
	if err := checkTTLArg(ttl); err != nil {
		return zero, err
	}
	o := callOptions{soft: c.cfg.LoadSoftTimeout, hard: c.cfg.LoadHardTimeout}
	for _, opt := range opts {
		o = opt(o)
	}
	if err := checkTags(o.tags); err != nil {
		return zero, err
	}
	if c.known != nil || o.soft > 0 {
		o.start = time.Now() // one clock read serves the call's fail-safe checks
	}
	if o.stale != nil {
		*o.stale = false
	}
	dk := c.keys.data(key)
	// The load is built only when needed: a hit allocates no closure.
	tags := o.tags // o itself stays on the stack
	mk := func() loadFunc {
		return hardLimit(key, o.hard, func(ctx context.Context) ([]byte, error) {
			var tokens []string
			if len(tags) > 0 {
				// Before the load: an invalidation while it runs then invalidates its result.
				tokens = c.writeTokens(ctx, tags)
			}
			v, err := loader(ctx)
			if err != nil {
				return nil, err
			}
			raw, err := c.encode(key, v)
			if err != nil || len(tags) == 0 {
				return raw, err
			}
			return wrapTagged(tags, tokens, raw), nil
		})
	}
	r, err := c.getOrLoad(ctx, key, dk, ttl, mk, &o)
	switch {
	case err != nil:
		return zero, err
	case r.null:
		return zero, ErrNotFound
	case r.stale && o.stale != nil:
		*o.stale = true
	}
	return decodeHit[T](c, key, dk, r.raw, r.local)
}

// result is the outcome of a load: an encoded value, or null (the key has no value).
type result struct {
	raw   string
	null  bool
	local bool // read from client-side cache memory
	stale bool // a last known value served by fail-safe or past the soft load timeout
	// stored is what Redis is to hold when it is not raw: a tagged entry's envelope.
	stored string
}

// value returns what Redis is to hold for r (a value, not a null).
func (r result) value() string {
	if r.stored != "" {
		return r.stored
	}
	return r.raw
}

// acquired is the outcome of the acquire script.
type acquired uint8

const (
	lockTaken  acquired = iota + 1 // the key was empty: we own the lock
	lockBusy                       // another caller owns the lock
	entryFound                     // the key holds a value or a null marker
)

// loadFunc runs the caller's loader and encodes its value.
type loadFunc func(ctx context.Context) ([]byte, error)

// loadMiss loads key after a miss, with or without the breakdown protection.
func (c *Cache) loadMiss(ctx context.Context, key, dk string, ttl time.Duration, load loadFunc) (result, error) {
	if !c.cfg.Breakdown.Enabled {
		r, err := c.callLoader(ctx, load)
		if err != nil {
			return r, err
		}
		c.store(ctx, dk, r, ttl)
		return r, nil
	}
	return c.flight.do(ctx, dk, func(ctx context.Context) (result, error) {
		r, err := c.loadLocked(ctx, key, dk, ttl, load)
		if err != nil && c.fallsBack(ctx, err) {
			return c.loadFallback(ctx, err, load)
		}
		return r, err
	})
}

// fallbackLoad answers a read that Redis failed (err, under LoadOnError) from the loader,
// caching nothing; concurrent fallbacks for dk in this process share one load.
func (c *Cache) fallbackLoad(ctx context.Context, dk string, err error, load loadFunc) (result, error) {
	return c.outage.do(ctx, dk, func(ctx context.Context) (result, error) {
		return c.loadFallback(ctx, err, load)
	})
}

// loadFallback counts a fallback for err and runs load; the result is not cached.
func (c *Cache) loadFallback(ctx context.Context, err error, load loadFunc) (result, error) {
	c.m.fallback(fallbackReason(err)).Inc()
	return c.callLoader(ctx, load)
}

// loadLocked is one process's load of dk: take the lock, or wait for its owner.
func (c *Cache) loadLocked(ctx context.Context, key, dk string, ttl time.Duration, load loadFunc) (result, error) {
	placeholder := lockPrefix + rand.Text()
	lockMs := strconv.FormatInt(c.cfg.Breakdown.LockTTL.Milliseconds(), 10)
	acquire := func() (result, acquired, error) { return c.acquire(ctx, key, dk, placeholder, lockMs) }
	r, got, err := acquire()
	switch {
	case err != nil:
		return r, err
	case got == lockTaken:
		return c.loadAsOwner(ctx, dk, placeholder, ttl, load)
	case got == entryFound:
		return r, nil // filled since our read
	}
	c.m.lockWaits.Inc()
	return c.waitOwner(ctx, key, dk, ttl, load, placeholder, acquire)
}

// acquire reads dk or, when it is empty, takes the lock with placeholder for lockMs.
func (c *Cache) acquire(ctx context.Context, key, dk, placeholder, lockMs string) (result, acquired, error) {
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		return result{}, 0, fmt.Errorf("cache: lock %q: %w", key, gerr)
	}
	rctx, op := c.callCtx(ctx)
	s, err := acquireScript.Exec(rctx, c.client, []string{dk}, []string{placeholder, lockMs}).ToString()
	op.release()
	if rueidis.IsRedisNil(err) {
		c.outcome(ctx, tk, nil)
		return result{}, lockTaken, nil
	}
	if err = c.outcome(ctx, tk, err); err != nil {
		return result{}, 0, fmt.Errorf("cache: lock %q: %w", key, err)
	}
	s, k, err := c.open(ctx, dk, s, classify(s))
	switch {
	case err != nil:
		return result{}, 0, fmt.Errorf("cache: lock %q: %w", key, err)
	case k == kindLocked, k == kindMiss: // a miss: an invalidated entry, just deleted; read again
		return result{}, lockBusy, nil
	case k == kindNull:
		return result{null: true}, entryFound, nil
	}
	return result{raw: s}, entryFound, nil
}

// waitOwner waits for another caller's load of dk: it reads the key until the owner fills
// it, takes the lock over when the key empties, and loads without the lock (degraded) after
// Breakdown.WaitTimeout.
func (c *Cache) waitOwner(ctx context.Context, key, dk string, ttl time.Duration, load loadFunc, placeholder string,
	acquire func() (result, acquired, error)) (result, error) {
	// With client-side caching the server tracks keys: wake on the key's invalidation. The
	// watcher's first read, with tracking on, is used at once: the key may have changed
	// before tracking was on.
	var (
		w     *watcher
		wake  <-chan struct{}
		s     string
		k     kind
		err   error
		fresh bool // s and k hold a read not yet looked at
	)
	if c.own != nil {
		if w, s, k, err = c.watch(ctx, dk); err != nil {
			return result{}, fmt.Errorf("cache: get %q: %w", key, err)
		}
		if w != nil {
			defer w.close()
			wake, fresh = w.wake, true
		}
	}
	deadline := time.Now().Add(c.cfg.Breakdown.WaitTimeout)
	var timer *time.Timer
	for {
		if !fresh {
			left := time.Until(deadline)
			if left <= 0 {
				c.m.degraded.Inc()
				return c.callLoader(ctx, load)
			}
			if wait := min(left, c.cfg.Breakdown.WaitInterval); timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return result{}, ctx.Err()
			case <-timer.C:
			case <-wake:
				timer.Stop() // Go 1.23+: no stale tick can follow
			}
			if w != nil {
				tk, gerr := c.gate(ctx, dk)
				if err = gerr; err == nil {
					rctx, op := c.callCtx(ctx)
					s, k, err = w.read(rctx)
					op.release()
					err = c.outcome(ctx, tk, err)
				}
			} else {
				s, k, _, err = c.read(ctx, dk)
			}
			if err != nil {
				return result{}, fmt.Errorf("cache: get %q: %w", key, err)
			}
		}
		if s, k, err = c.open(ctx, dk, s, k); err != nil {
			return result{}, fmt.Errorf("cache: get %q: %w", key, err)
		}
		fresh = false
		switch k {
		case kindValue, kindNull:
			return result{raw: s, null: k == kindNull}, nil
		case kindMiss: // the owner failed, or its lock expired: try to take over
			r, got, err := acquire()
			switch {
			case err != nil:
				return r, err
			case got == lockTaken:
				return c.loadAsOwner(ctx, dk, placeholder, ttl, load)
			case got == entryFound:
				return r, nil
			}
		}
	}
}

// loadAsOwner runs the load while holding the lock placeholder, then replaces the
// placeholder with the result, or deletes it if the load failed (or panicked).
func (c *Cache) loadAsOwner(ctx context.Context, dk, placeholder string, ttl time.Duration, load loadFunc) (r result, err error) {
	// Writing back must not depend on the caller still waiting: the lock would otherwise
	// stay until it expires. The write has a deadline of its own (Timeout), from the end of
	// the load.
	done := false
	defer func() {
		if !done {
			tk, gerr := c.gate(ctx, dk)
			if gerr != nil {
				c.background("unlock", gerr) // the lock expires after LockTTL
				return
			}
			wctx, cancel := c.detached(ctx)
			defer cancel()
			n, err := unlockScript.Exec(wctx, c.client, []string{dk}, []string{placeholder}).AsInt64()
			err = c.outcome(context.Background(), tk, err)
			c.background("unlock", err)
			if err != nil || n == 1 {
				c.wrote(dk, "", true)
			}
		}
	}()
	r, err = c.callLoader(ctx, load)
	if err != nil {
		return r, err
	}
	value, ms := r.value(), int64(0)
	if r.null {
		value, ms = nullMarker, jitter(c.cfg.NullTTL, c.cfg.JitterRatio)
	} else {
		ms, _ = c.ttlMillis(ttl) // ttl was checked by GetOrLoad
	}
	// 0 means the key no longer holds our placeholder (expired, deleted or set): the
	// result goes to the callers but is not cached. A failed write only costs a reload.
	done = true
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		c.background("write-back", gerr) // the lock expires after LockTTL
		return r, nil
	}
	wctx, cancel := c.detached(ctx)
	defer cancel()
	n, err := fillScript.Exec(wctx, c.client, []string{dk}, []string{placeholder, value, strconv.FormatInt(ms, 10)}).AsInt64()
	err = c.outcome(context.Background(), tk, err)
	c.background("write-back", err)
	if err != nil || n == 1 {
		c.wrote(dk, value, false)
	}
	return r, nil
}

// store writes a load's result without the lock (breakdown protection off). A failed
// write only costs a reload, so it is only logged (background).
func (c *Cache) store(ctx context.Context, dk string, r result, ttl time.Duration) {
	value, ms := r.value(), int64(0)
	if r.null {
		value, ms = nullMarker, jitter(c.cfg.NullTTL, c.cfg.JitterRatio)
	} else {
		ms, _ = c.ttlMillis(ttl)
	}
	// Like the locked write-back, it does not depend on the caller still waiting, and has
	// the deadline Timeout of its own. While the breaker is open nothing is written.
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		c.background("write-back", gerr)
		return
	}
	wctx, cancel := c.detached(ctx)
	defer cancel()
	c.background("write-back", c.outcome(context.Background(), tk, c.client.Do(wctx, c.client.B().Set().Key(dk).Value(value).PxMilliseconds(ms).Build()).Error()))
	c.wrote(dk, value, false)
}

// callLoader runs load and counts it. ErrNotFound becomes a null result.
func (c *Cache) callLoader(ctx context.Context, load loadFunc) (result, error) {
	c.m.loads.Inc()
	ok := false
	defer func() {
		if !ok {
			c.m.loadErrors.Inc() // a panic, or runtime.Goexit
		}
	}()
	raw, err := load(ctx)
	ok = true
	switch {
	case err == nil:
		return splitStored(result{raw: string(raw)}), nil
	case errors.Is(err, ErrNotFound):
		return result{null: true}, nil
	case !errors.Is(err, ErrEncode):
		c.m.loadErrors.Inc()
	}
	return result{}, err
}
