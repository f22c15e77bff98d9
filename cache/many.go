package cache

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// BatchLoader loads the values of keys: distinct cache keys (as given to GetMany, without
// prefix), each a miss, in the order GetMany was given them. It returns the values it
// found; a key missing from the map has no value, and gets a null marker for
// Config.NullTTL like a loader's ErrNotFound (penetration protection). Values for keys it
// was not asked for are ignored. Returning ErrNotFound (possibly wrapped) means none of
// the keys has a value; any other error fails the GetMany and is not cached.
type BatchLoader[T any] func(ctx context.Context, keys []string) (map[string]T, error)

// GetMany returns the values cached under keys, decoded into T, in a map from key to value;
// the misses are loaded with one call of loader and cached for ttl (DefaultTTL for
// Config.DefaultTTL; plus jitter). A key without a value (a null marker, or a key the loader
// did not return) is absent from the map. Repeated keys are read and loaded once.
//
// The hits cost one round trip: MGET, split per hash slot on Redis Cluster (one MGET per
// slot, sent to all nodes at once); with client-side caching, GETs answered from process
// memory where the copies are fresh; with sliding expiration (and no client-side caching),
// one read-and-renew script per key in one pipeline.
//
// The misses get the stampede protection of GetOrLoad key by key, in batches: misses
// another call in this process is loading are waited for; the others take the load lock of
// their key in one pipeline; the keys whose lock was taken are loaded with one call of
// loader and written back in one pipeline; keys another process is loading are waited for
// as in GetOrLoad (each after Breakdown.WaitTimeout loaded alone, with loader called on
// that one key). Without Breakdown.Enabled the misses are loaded with one call and written.
//
// Each round trip carrying n keys has the deadline Config.Timeout × ceil(n/1000), so a
// large batch on a healthy server is not mistaken for an outage.
//
// When Redis fails, Config.OnRedisError applies to the whole call: ReturnError returns the
// error, LoadOnError loads every key with loader and caches nothing (concurrent fallbacks
// of one key in the process share a load).
//
// An error (a loader's, a decoding's, Redis's) fails the whole call: the map is nil. An
// empty key, a nil loader or a bad ttl is ErrInvalidArgument; no keys is an empty map.
//
// With Config.FailSafe enabled, a call failing with a loader or Redis error is answered
// with the last value the process knew for each key, when it knows one (read or loaded at
// most FailSafe.MaxStaleness ago) for every key; the Stale option reports it, and while
// every key's source is throttled (FailSafe.Throttle, with backoff) the call is answered
// so at once. The Tags option tags the values loaded (as in GetOrLoad); LoadTimeouts is
// ignored.
func GetMany[T any](ctx context.Context, c *Cache, keys []string, ttl time.Duration, loader BatchLoader[T], opts ...Option) (map[string]T, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if loader == nil {
		return nil, fmt.Errorf("%w: nil loader", ErrInvalidArgument)
	}
	if err := checkTTLArg(ttl); err != nil {
		return nil, err
	}
	uniq, err := uniqueKeys(keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]T, len(uniq))
	if len(uniq) == 0 {
		return out, nil
	}
	dks := make([]string, len(uniq))
	for i, k := range uniq {
		dks[i] = c.keys.data(k)
	}
	var o callOptions
	for _, opt := range opts {
		o = opt(o)
	}
	if o.stale != nil {
		*o.stale = false
	}
	if raws, ok := c.staleMany(ctx, dks, nil); ok {
		return decodeStaleMany[T](c, uniq, raws, o.stale)
	}
	if err := checkTags(o.tags); err != nil {
		return nil, err
	}
	err = getMany(ctx, c, uniq, dks, ttl, encodedBatch(c, loader, o.tags), out)
	if err != nil {
		if raws, ok := c.staleMany(ctx, dks, err); ok {
			return decodeStaleMany[T](c, uniq, raws, o.stale)
		}
		return nil, err
	}
	return out, nil
}

// getMany is GetMany past its checks: it fills out, or fails.
func getMany[T any](ctx context.Context, c *Cache, uniq, dks []string, ttl time.Duration, batch batchFunc, out map[string]T) error {
	ents, err := c.readMany(ctx, dks)
	var (
		miss    []int // indexes into uniq of the keys to load
		results []result
	)
	if err != nil {
		if !c.fallsBack(ctx, err) {
			return fmt.Errorf("cache: get %d keys: %w", len(uniq), err)
		}
		miss = make([]int, len(uniq))
		for i := range miss {
			miss[i] = i
		}
		results, err = c.fallbackMany(ctx, uniq, dks, err, batch)
	} else {
		if miss, err = takeHits(c, uniq, dks, ents, out); err != nil {
			return err
		}
		if len(miss) == 0 {
			return nil
		}
		results, err = c.loadMany(ctx, pick(uniq, miss), pick(dks, miss), ttl, batch)
	}
	if err != nil {
		return err
	}
	for j, i := range miss {
		r := results[j]
		c.remember(dks[i], r)
		if !r.null {
			v, err := decode[T](c, uniq[i], r.raw)
			if err != nil {
				return err
			}
			out[uniq[i]] = v
		}
	}
	return nil
}

// staleMany returns the last known values of dks for fail-safe, all or none: after err, or
// with err nil while every key's source is throttled.
func (c *Cache) staleMany(ctx context.Context, dks []string, err error) ([]string, bool) {
	if c.known == nil || (err != nil && !failSafeFor(ctx, err)) {
		return nil, false
	}
	now := time.Now()
	raws := make([]string, len(dks))
	for i, dk := range dks {
		ok := false
		if err == nil {
			raws[i], ok = c.known.throttled(dk, now, c.cfg.FailSafe.MaxStaleness)
		} else {
			raws[i], ok = c.known.stale(dk, now, c.cfg.FailSafe.MaxStaleness)
		}
		if !ok {
			return nil, false
		}
	}
	if err != nil {
		for _, dk := range dks {
			c.known.failed(dk, now, c.cfg.FailSafe.Throttle)
		}
	}
	c.m.staleServed.Add(len(dks))
	return raws, true
}

// decodeStaleMany decodes the values fail-safe serves to a GetMany.
func decodeStaleMany[T any](c *Cache, keys, raws []string, served *bool) (map[string]T, error) {
	out := make(map[string]T, len(keys))
	for i, key := range keys {
		v, err := decode[T](c, key, raws[i])
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	if served != nil {
		*served = true
	}
	return out, nil
}

// uniqueKeys returns keys without repeats, in order; an empty key is ErrInvalidArgument.
func uniqueKeys(keys []string) ([]string, error) {
	uniq := make([]string, 0, len(keys))
	seen := make(map[string]struct{}, len(keys))
	for i, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("%w: empty key at index %d", ErrInvalidArgument, i)
		}
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			uniq = append(uniq, k)
		}
	}
	return uniq, nil
}

// encodedBatch returns loader as a batchFunc: its values encoded, ErrNotFound as no values.
func encodedBatch[T any](c *Cache, loader BatchLoader[T], tags []string) batchFunc {
	return func(ctx context.Context, keys []string) (map[string]result, error) {
		var tokens []string
		if len(tags) > 0 {
			tokens = c.writeTokens(ctx, tags) // before the load, as in GetOrLoad
		}
		vs, err := loader(ctx, keys)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return map[string]result{}, nil
			}
			return nil, err
		}
		rs := make(map[string]result, len(keys))
		for _, k := range keys {
			v, ok := vs[k]
			if !ok {
				continue
			}
			raw, err := c.encode(k, v)
			if err != nil {
				return nil, err
			}
			if len(tags) > 0 {
				raw = wrapTagged(tags, tokens, raw)
			}
			rs[k] = splitStored(result{raw: string(raw)})
		}
		return rs, nil
	}
}

// takeHits decodes the values readMany found into out, counts hits, null hits and misses,
// and returns the indexes (into keys) of the misses.
func takeHits[T any](c *Cache, keys, dks []string, ents []entry, out map[string]T) (miss []int, err error) {
	for i, e := range ents {
		switch e.k {
		case kindValue:
			c.m.hits.Inc()
			if c.known != nil {
				c.known.seen(dks[i], e.s, time.Now())
			}
			v, err := decodeHit[T](c, keys[i], dks[i], e.s, e.local)
			if err != nil {
				return nil, err
			}
			out[keys[i]] = v
		case kindNull:
			c.m.nullHits.Inc()
			if c.known != nil {
				c.known.forget(dks[i])
			}
		default:
			c.m.misses.Inc()
			miss = append(miss, i)
		}
		if e.local {
			c.m.localHits.Inc()
		}
	}
	return miss, nil
}

// batchFunc runs a BatchLoader and encodes its values (a missing key: no result).
type batchFunc func(ctx context.Context, keys []string) (map[string]result, error)

func pick(s []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = s[i]
	}
	return out
}

// entry is what readMany found under one key.
type entry struct {
	s     string
	k     kind
	local bool
}

// readMany reads the Redis keys dks in one round trip (see GetMany) and classifies them.
func (c *Cache) readMany(ctx context.Context, dks []string) ([]entry, error) {
	tk, gerr := c.gate(ctx, dks...)
	if gerr != nil {
		return nil, gerr
	}
	rctx, op := c.batchCtx(ctx, len(dks))
	var ents []entry
	switch {
	case c.own != nil:
		ents, gerr = c.readManyLocal(ctx, rctx, tk, dks)
	case c.cfg.SlidingExpiration:
		ents, gerr = c.readManyRenewing(ctx, rctx, tk, dks)
	default:
		ents, gerr = c.mget(rctx, ctx, tk, dks)
	}
	op.release()
	if gerr == nil {
		gerr = c.openMany(ctx, dks, ents)
	}
	return ents, gerr
}

// readManyLocal is readMany with client-side caching: a local copy is used only while the
// heartbeat is current and no write of ours to the key is unconfirmed; those keys are read
// from Redis again. With sliding expiration, the TTLs of values read from Redis are renewed.
func (c *Cache) readManyLocal(ctx, rctx context.Context, tk ticket, dks []string) ([]entry, error) {
	ents := make([]entry, len(dks))
	mark, pending := c.own.start()
	cmds := make([]rueidis.CacheableTTL, len(dks))
	for i, dk := range dks {
		cmds[i] = rueidis.CT(c.client.B().Get().Key(dk).Cache(), c.cfg.ClientSideCache.TTL)
	}
	resps := c.client.DoMultiCache(rctx, cmds...)
	var stale, renew []int
	reached := false
	current := c.beat.current()
	for i, resp := range resps {
		s, err := resp.ToString()
		miss := rueidis.IsRedisNil(err)
		if err != nil && !miss {
			return nil, c.outcome(ctx, tk, err)
		}
		local := resp.IsCacheHit()
		reached = reached || !local
		if local && !current {
			// Memory may be behind Redis by more than MaxStaleness: ask Redis.
			c.m.localRefused.Inc()
			stale = append(stale, i)
			continue
		}
		if pending {
			if !local {
				c.own.fromRedis(dks[i], mark)
			} else if c.own.stale(dks[i], s, miss) {
				stale = append(stale, i)
				continue
			}
		}
		ents[i].local = local
		if miss {
			continue
		}
		ents[i].s, ents[i].k = s, classify(s)
		if c.cfg.SlidingExpiration && ents[i].k == kindValue && !local {
			if pttl := resp.CachePTTL(); pttl >= 0 && pttl < c.renewBelow {
				renew = append(renew, i)
			}
		}
	}
	if reached {
		c.outcome(ctx, tk, nil)
	}
	if len(stale) > 0 {
		// Copies that predate writes of ours whose invalidation has not arrived, or
		// that may be too far behind Redis.
		fresh, err := c.mget(rctx, ctx, tk, pick(dks, stale))
		if err != nil {
			return nil, err
		}
		for j, i := range stale {
			ents[i] = fresh[j]
		}
	}
	if len(renew) > 0 {
		c.renewMany(ctx, tk, pick(dks, renew))
	}
	return ents, nil
}

// renewMany sets the TTL of the values under dks again (sliding expiration), in the
// background of the read.
func (c *Cache) renewMany(ctx context.Context, tk ticket, dks []string) {
	execs := make([]rueidis.LuaExec, len(dks))
	for i, dk := range dks {
		execs[i] = rueidis.LuaExec{Keys: []string{dk},
			Args: []string{strconv.FormatInt(jitter(c.cfg.DefaultTTL, c.cfg.JitterRatio), 10), lockPrefix, nullMarker}}
	}
	wctx, cancel := c.detachedN(ctx, len(execs))
	c.background("renew", c.outcome(context.Background(), tk, firstErr(c.evalMulti(wctx, expireSrc, execs))))
	cancel()
}

// readManyRenewing is readMany with sliding expiration and no client-side caching: each
// read renews the value's TTL in the same script.
func (c *Cache) readManyRenewing(ctx, rctx context.Context, tk ticket, dks []string) ([]entry, error) {
	ents := make([]entry, len(dks))
	execs := make([]rueidis.LuaExec, len(dks))
	for i, dk := range dks {
		execs[i] = rueidis.LuaExec{Keys: []string{dk},
			Args: []string{strconv.FormatInt(jitter(c.cfg.DefaultTTL, c.cfg.JitterRatio), 10), markerPrefix, taggedPrefix}}
	}
	for i, resp := range c.evalMulti(rctx, getRenewSrc, execs) {
		s, err := resp.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return nil, c.outcome(ctx, tk, err)
		}
		ents[i] = entry{s: s, k: classify(s)}
	}
	c.outcome(ctx, tk, nil)
	return ents, nil
}

// mget reads dks with MGET, one per hash slot (rueidis.MGet groups the keys by slot on a
// cluster client and sends the MGETs in one DoMulti). rctx bounds the call, ctx is the
// caller's.
func (c *Cache) mget(rctx, ctx context.Context, tk ticket, dks []string) ([]entry, error) {
	m, err := rueidis.MGet(c.client, rctx, dks)
	if err = c.outcome(ctx, tk, err); err != nil {
		return nil, err
	}
	ents := make([]entry, len(dks))
	for i, dk := range dks {
		msg, ok := m[dk]
		if !ok {
			continue
		}
		s, err := msg.ToString()
		if err != nil {
			if rueidis.IsRedisNil(err) {
				continue
			}
			return nil, c.outcome(ctx, tk, err)
		}
		ents[i] = entry{s: s, k: classify(s)}
	}
	return ents, nil
}

// loadMany loads the misses keys (Redis keys dks) of a GetMany; results[i] is keys[i]'s.
func (c *Cache) loadMany(ctx context.Context, keys, dks []string, ttl time.Duration, batch batchFunc) ([]result, error) {
	if !c.cfg.Breakdown.Enabled {
		rs, err := c.callBatch(ctx, keys, batch)
		if err != nil {
			return nil, err
		}
		c.storeMany(ctx, dks, rs, ttl)
		return rs, nil
	}
	return c.shareMany(ctx, &c.flight, dks, func(ctx context.Context, idx []int) ([]result, error) {
		rs, err := c.lockedMany(ctx, pick(keys, idx), pick(dks, idx), ttl, batch)
		if err != nil && c.fallsBack(ctx, err) {
			return c.fallbackBatch(ctx, pick(keys, idx), err, batch)
		}
		return rs, err
	})
}

// fallbackMany answers a GetMany whose read Redis failed (err, under LoadOnError) from the
// loader, caching nothing; keys in a fallback load of this process already are shared.
func (c *Cache) fallbackMany(ctx context.Context, keys, dks []string, err error, batch batchFunc) ([]result, error) {
	return c.shareMany(ctx, &c.outage, dks, func(ctx context.Context, idx []int) ([]result, error) {
		return c.fallbackBatch(ctx, pick(keys, idx), err, batch)
	})
}

// fallbackBatch counts a fallback for each key and loads them; nothing is cached.
func (c *Cache) fallbackBatch(ctx context.Context, keys []string, err error, batch batchFunc) ([]result, error) {
	c.m.fallback(fallbackReason(err)).Add(len(keys))
	return c.callBatch(ctx, keys, batch)
}

// shareMany runs fn, within g, for the keys dks no call of this process is running yet
// (idx are indexes into dks), and waits for the calls running the others, like group.do
// for many keys at once: a key whose run ended with its leader's context is run again by
// this caller. results[i] is dks[i]'s.
func (c *Cache) shareMany(ctx context.Context, g *group, dks []string, fn func(ctx context.Context, idx []int) ([]result, error)) ([]result, error) {
	results := make([]result, len(dks))
	calls := make([]*call, len(dks))
	var owned, waited []int
	for i, dk := range dks {
		cl, owner := g.join(dk)
		calls[i] = cl
		if owner {
			owned = append(owned, i)
		} else {
			waited = append(waited, i)
		}
	}
	if len(owned) > 0 {
		err := func() (err error) {
			defer func() {
				for _, i := range owned {
					g.finish(dks[i], calls[i])
				}
			}()
			rs, err := fn(ctx, owned)
			for j, i := range owned {
				var r result
				if err == nil {
					r = rs[j]
					results[i] = r
				}
				calls[i].set(ctx, r, err)
			}
			return err
		}()
		if err != nil {
			return nil, err
		}
	}
	var again []int
	for _, i := range waited {
		cl := calls[i]
		select {
		case <-cl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if cl.ctxEnded && ctx.Err() == nil {
			again = append(again, i)
			continue
		}
		if cl.err != nil {
			return nil, cl.err
		}
		results[i] = cl.r
	}
	if len(again) > 0 {
		rs, err := c.shareMany(ctx, g, pick(dks, again), func(ctx context.Context, idx []int) ([]result, error) {
			sub := make([]int, len(idx))
			for j, k := range idx {
				sub[j] = again[k]
			}
			return fn(ctx, sub)
		})
		if err != nil {
			return nil, err
		}
		for j, i := range again {
			results[i] = rs[j]
		}
	}
	return results, nil
}

// lockedMany is one process's load of the misses keys: take the locks of all in one
// pipeline, load the keys whose lock it took in one loader call and write them back in one
// pipeline; wait for the keys another process is loading, key by key as GetOrLoad does.
func (c *Cache) lockedMany(ctx context.Context, keys, dks []string, ttl time.Duration, batch batchFunc) ([]result, error) {
	token := lockPrefix + rand.Text()
	results := make([]result, len(keys))
	taken, busy, err := c.lockAll(ctx, keys, dks, token, results)
	if err != nil {
		return nil, err
	}
	var g loadGroup
	// Keys another process is loading: wait as GetOrLoad does, each in its own goroutine,
	// while this one loads the others.
	for _, i := range busy {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer g.recoverPanic()
			one := func(ctx context.Context) ([]byte, error) {
				rs, err := batch(ctx, []string{keys[i]})
				if err != nil {
					return nil, err
				}
				r, ok := rs[keys[i]]
				if !ok {
					return nil, ErrNotFound
				}
				return []byte(r.value()), nil
			}
			r, err := c.waitLocked(ctx, keys[i], dks[i], ttl, one)
			g.mu.Lock()
			defer g.mu.Unlock()
			if err != nil && g.err == nil {
				g.err = err
			}
			results[i] = r
		}()
	}
	ownErr := func() error {
		if len(taken) == 0 {
			return nil
		}
		// A panic of the loader is raised again once the waiting goroutines are done.
		defer g.recoverPanic()
		return c.loadTaken(ctx, pick(keys, taken), pick(dks, taken), ttl, token, batch, func(j int, r result) { results[taken[j]] = r })
	}()
	g.wg.Wait()
	if g.panicked != nil {
		panic(g.panicked)
	}
	if ownErr != nil {
		return nil, ownErr
	}
	if g.err != nil {
		return nil, g.err
	}
	return results, nil
}

// loadGroup collects the waits of a lockedMany: the first error and a panic to raise again.
type loadGroup struct {
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	panicked any
}

// recoverPanic, deferred, records a panic of the goroutine.
func (g *loadGroup) recoverPanic() {
	if p := recover(); p != nil {
		g.mu.Lock()
		g.panicked = p
		g.mu.Unlock()
	}
}

// lockAll takes the load locks of dks for token in one pipeline. It returns the indexes of
// the keys it locked and of those another process holds the lock of; the others already
// have a value or a null marker, put in results. On an error it releases the locks it took.
func (c *Cache) lockAll(ctx context.Context, keys, dks []string, token string, results []result) (taken, busy []int, err error) {
	tk, gerr := c.gate(ctx, dks...)
	if gerr != nil {
		return nil, nil, fmt.Errorf("cache: lock %d keys: %w", len(keys), gerr)
	}
	lockMs := strconv.FormatInt(c.cfg.Breakdown.LockTTL.Milliseconds(), 10)
	execs := make([]rueidis.LuaExec, len(dks))
	for i, dk := range dks {
		execs[i] = rueidis.LuaExec{Keys: []string{dk}, Args: []string{token, lockMs}}
	}
	rctx, op := c.batchCtx(ctx, len(execs))
	resps := c.evalMulti(rctx, acquireSrc, execs)
	op.release()
	for i, resp := range resps {
		s, err := resp.ToString()
		if rueidis.IsRedisNil(err) {
			taken = append(taken, i)
			continue
		}
		if err != nil {
			// Release the locks this pipeline did take before failing.
			taken = taken[:0]
			for j := range resps {
				if rueidis.IsRedisNil(resps[j].Error()) {
					taken = append(taken, j)
				}
			}
			c.unlockMany(ctx, pick(dks, taken), token)
			return nil, nil, fmt.Errorf("cache: lock %d keys: %w", len(keys), c.outcome(ctx, tk, err))
		}
		s, k, err := c.open(ctx, dks[i], s, classify(s))
		switch {
		case err != nil:
			taken = taken[:0]
			for j := range resps {
				if rueidis.IsRedisNil(resps[j].Error()) {
					taken = append(taken, j)
				}
			}
			c.unlockMany(ctx, pick(dks, taken), token)
			return nil, nil, fmt.Errorf("cache: lock %d keys: %w", len(keys), err)
		case k == kindLocked, k == kindMiss: // a miss: an invalidated entry, just deleted
			busy = append(busy, i)
		case k == kindNull:
			results[i] = result{null: true}
		default:
			results[i] = result{raw: s}
		}
	}
	c.outcome(ctx, tk, nil)
	return taken, busy, nil
}

// loadTaken loads keys (Redis keys dks, whose locks token holds) in one loader call, gives
// each result to set, and writes them back in one pipeline, releasing the locks. If the
// load fails or panics, the locks are released.
func (c *Cache) loadTaken(ctx context.Context, keys, dks []string, ttl time.Duration, token string, batch batchFunc, set func(int, result)) error {
	done := false
	defer func() {
		if !done {
			c.unlockMany(ctx, dks, token)
		}
	}()
	rs, err := c.callBatch(ctx, keys, batch)
	if err != nil {
		return err
	}
	done = true
	values := make([]string, len(keys))
	execs := make([]rueidis.LuaExec, len(keys))
	for j, r := range rs {
		set(j, r)
		value, ms := r.value(), int64(0)
		if r.null {
			value, ms = nullMarker, jitter(c.cfg.NullTTL, c.cfg.JitterRatio)
		} else {
			ms, _ = c.ttlMillis(ttl)
		}
		values[j] = value
		execs[j] = rueidis.LuaExec{Keys: []string{dks[j]}, Args: []string{token, value, strconv.FormatInt(ms, 10)}}
	}
	tk, gerr := c.gate(ctx, dks...)
	if gerr != nil {
		c.background("write-back", gerr) // the locks expire after LockTTL
		return nil
	}
	wctx, cancel := c.detachedN(ctx, len(execs))
	defer cancel()
	fills := c.evalMulti(wctx, fillSrc, execs)
	c.background("write-back", c.outcome(context.Background(), tk, firstErr(fills)))
	for j := range keys {
		if n, err := fills[j].AsInt64(); err != nil || n == 1 {
			c.wrote(dks[j], values[j], false)
		}
	}
	return nil
}

// waitLocked is GetOrLoad's per-key path for a key another process holds the lock of,
// with the fallback of LoadOnError.
func (c *Cache) waitLocked(ctx context.Context, key, dk string, ttl time.Duration, load loadFunc) (result, error) {
	r, err := c.loadLocked(ctx, key, dk, ttl, load)
	if err != nil && c.fallsBack(ctx, err) {
		return c.loadFallback(ctx, err, load)
	}
	return r, err
}

// unlockMany releases the locks token holds on dks (compare-and-delete), in one pipeline
// with a deadline of its own.
func (c *Cache) unlockMany(ctx context.Context, dks []string, token string) {
	if len(dks) == 0 {
		return
	}
	tk, gerr := c.gate(ctx, dks...)
	if gerr != nil {
		c.background("unlock", gerr)
		return
	}
	execs := make([]rueidis.LuaExec, len(dks))
	for i, dk := range dks {
		execs[i] = rueidis.LuaExec{Keys: []string{dk}, Args: []string{token}}
	}
	wctx, cancel := c.detachedN(ctx, len(execs))
	defer cancel()
	resps := c.evalMulti(wctx, unlockSrc, execs)
	c.background("unlock", c.outcome(context.Background(), tk, firstErr(resps)))
	for i, dk := range dks {
		if n, err := resps[i].AsInt64(); err != nil || n == 1 {
			c.wrote(dk, "", true)
		}
	}
}

// storeMany writes the results of a load without the lock (breakdown protection off) in
// one pipeline; a failure only costs a reload (background).
func (c *Cache) storeMany(ctx context.Context, dks []string, rs []result, ttl time.Duration) {
	tk, gerr := c.gate(ctx, dks...)
	if gerr != nil {
		c.background("write-back", gerr)
		return
	}
	cmds := make(rueidis.Commands, len(dks))
	values := make([]string, len(dks))
	for i, r := range rs {
		value, ms := r.value(), int64(0)
		if r.null {
			value, ms = nullMarker, jitter(c.cfg.NullTTL, c.cfg.JitterRatio)
		} else {
			ms, _ = c.ttlMillis(ttl)
		}
		values[i] = value
		cmds[i] = c.client.B().Set().Key(dks[i]).Value(value).PxMilliseconds(ms).Build()
	}
	wctx, cancel := c.detachedN(ctx, len(cmds))
	defer cancel()
	c.background("write-back", c.outcome(context.Background(), tk, firstErr(c.client.DoMulti(wctx, cmds...))))
	for i, dk := range dks {
		c.wrote(dk, values[i], false)
	}
}

// callBatch runs batch on keys and counts it as one load; results[i] is keys[i]'s (null
// when the loader returned no value for it).
func (c *Cache) callBatch(ctx context.Context, keys []string, batch batchFunc) ([]result, error) {
	c.m.loads.Inc()
	ok := false
	defer func() {
		if !ok {
			c.m.loadErrors.Inc() // a panic, or runtime.Goexit
		}
	}()
	rs, err := batch(ctx, keys)
	ok = true
	if err != nil {
		if !errors.Is(err, ErrEncode) {
			c.m.loadErrors.Inc()
		}
		return nil, err
	}
	out := make([]result, len(keys))
	for i, k := range keys {
		r, found := rs[k]
		if !found {
			r = result{null: true}
		}
		out[i] = r
	}
	return out, nil
}

// firstErr returns the first error of resps other than a nil reply.
func firstErr(resps []rueidis.RedisResult) error {
	for _, r := range resps {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
	}
	return nil
}

// luaSrc is a script for evalMulti: its source and SHA-1.
type luaSrc struct{ src, sha string }

func newLuaSrc(src string) luaSrc {
	h := sha1.Sum([]byte(src))
	return luaSrc{src: src, sha: hex.EncodeToString(h[:])}
}

var (
	acquireSrc  = newLuaSrc(acquireLua)
	fillSrc     = newLuaSrc(fillLua)
	unlockSrc   = newLuaSrc(unlockLua)
	expireSrc   = newLuaSrc(expireLua)
	getRenewSrc = newLuaSrc(getRenewLua)
)

// evalMulti runs a one-key script once per exec in one pipeline with EVALSHA. When some
// replies are NOSCRIPT (a restarted or new server), it loads the script on every node
// (SCRIPT LOAD) and sends those again, with EVAL for any still refused. (rueidis's
// Lua.ExecMulti sends SCRIPT LOAD to every node first on every call, a round trip more;
// EVAL for each of thousands of keys would send the source thousands of times.) On a
// cluster client each command goes to its key's node.
func (c *Cache) evalMulti(ctx context.Context, sc luaSrc, execs []rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(execs))
	for i, e := range execs {
		cmds[i] = c.client.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
	}
	resps := c.client.DoMulti(ctx, cmds...)
	retry := noScript(resps, nil)
	if len(retry) == 0 {
		return resps
	}
	for _, n := range c.client.Nodes() {
		_ = n.Do(ctx, n.B().ScriptLoad().Script(sc.src).Build()).Error() // EVAL below covers a failure
	}
	for round := range 2 {
		again := make(rueidis.Commands, len(retry))
		for j, i := range retry {
			e := execs[i]
			if round == 0 {
				again[j] = c.client.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
			} else {
				again[j] = c.client.B().Eval().Script(sc.src).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
			}
		}
		rs := c.client.DoMulti(ctx, again...)
		for j, r := range rs {
			resps[retry[j]] = r
		}
		if retry = noScript(rs, retry); len(retry) == 0 {
			break
		}
	}
	return resps
}

// noScript returns the indexes (mapped through idx when non-nil) of the NOSCRIPT replies.
func noScript(resps []rueidis.RedisResult, idx []int) []int {
	var out []int
	for j, r := range resps {
		if re, ok := rueidis.IsRedisErr(r.Error()); ok && re.IsNoScript() {
			if idx != nil {
				out = append(out, idx[j])
			} else {
				out = append(out, j)
			}
		}
	}
	return out
}
