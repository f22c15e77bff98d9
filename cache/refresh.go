package cache

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// readPTTL reads dk and its remaining TTL in one round trip (GET and PTTL pipelined, one
// key, so one slot), for eager refresh. pttl is negative for a missing key or one without
// a TTL.
func (c *Cache) readPTTL(ctx context.Context, key, dk string) (s string, k kind, pttl int64, err error) {
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		return "", kindMiss, -1, fmt.Errorf("cache: get %q: %w", key, gerr)
	}
	rctx, op := c.callCtx(ctx)
	resps := c.client.DoMulti(rctx, c.client.B().Get().Key(dk).Build(), c.client.B().Pttl().Key(dk).Build())
	op.release()
	s, err = resps[0].ToString()
	if err == nil || rueidis.IsRedisNil(err) {
		_, err = resps[1].AsInt64()
	}
	if err = c.outcome(ctx, tk, err); err != nil {
		return "", kindMiss, -1, fmt.Errorf("cache: get %q: %w", key, err)
	}
	if resps[0].Error() != nil { // a nil reply
		c.count(kindMiss, false)
		return "", kindMiss, -1, nil
	}
	pttl, _ = resps[1].AsInt64()
	if s, k, err = c.open(ctx, dk, s, classify(s)); err != nil {
		return "", kindMiss, -1, fmt.Errorf("cache: get %q: %w", key, err)
	}
	c.count(k, false)
	return s, k, pttl, nil
}

// maybeRefresh starts the eager refresh of dk when less than (1-EagerRefresh) of ttl is
// left (pttl ms): once per key in this process at a time, and once across processes
// through a lock key held for what is left of the entry's life (at most LockTTL), so the
// key loads once per TTL. Readers keep getting the current value meanwhile.
func (c *Cache) maybeRefresh(ctx context.Context, key, dk string, ttl time.Duration, pttl int64, mk func() loadFunc) {
	if ttl == DefaultTTL {
		ttl = c.cfg.DefaultTTL
	}
	window := int64(float64(ttl.Milliseconds()) * (1 - c.cfg.EagerRefresh))
	if pttl <= 0 || pttl > window {
		return
	}
	if _, busy := c.refreshing.LoadOrStore(dk, struct{}{}); busy {
		return
	}
	bctx, load := context.WithoutCancel(ctx), mk()
	go func() {
		defer c.refreshing.Delete(dk)
		c.refresh(bctx, key, dk, ttl, min(pttl, c.cfg.Breakdown.LockTTL.Milliseconds()), load)
	}()
}

// refresh is one eager refresh of dk, if its lock (held lockMs) is free.
func (c *Cache) refresh(ctx context.Context, key, dk string, ttl time.Duration, lockMs int64, load loadFunc) {
	lk := c.keys.refresh(key)
	tk, gerr := c.gate(ctx, lk)
	if gerr != nil {
		return
	}
	wctx, cancel := c.detached(ctx)
	lerr := c.client.Do(wctx, c.client.B().Set().Key(lk).Value("1").Nx().PxMilliseconds(lockMs).Build()).Error()
	cancel()
	if err := c.outcome(ctx, tk, lerr); err != nil || rueidis.IsRedisNil(lerr) {
		c.background("refresh lock", err)
		return // Redis fails, or another process refreshes the key (a nil reply)
	}
	// The load is bounded by the refresh lock's time: past it another process may refresh,
	// and a loader that hangs must not hold this key's refresh forever.
	lctx, lcancel := context.WithTimeout(ctx, time.Duration(lockMs)*time.Millisecond)
	r, err := c.callLoader(lctx, load)
	lcancel()
	if err != nil {
		return // the entry lives on; the read at its expiry loads
	}
	c.m.refreshes.Inc()
	value, ms := r.value(), jitter(ttl, c.cfg.JitterRatio)
	if r.null {
		value, ms = nullMarker, jitter(c.cfg.NullTTL, c.cfg.JitterRatio)
	}
	if tk, gerr = c.gate(ctx, dk); gerr != nil {
		return
	}
	wctx, cancel = c.detached(ctx)
	defer cancel()
	n, err := refreshScript.Exec(wctx, c.client, []string{dk}, []string{value, strconv.FormatInt(ms, 10), lockPrefix}).AsInt64()
	err = c.outcome(context.Background(), tk, err)
	c.background("refresh", err)
	if err == nil && n == 1 {
		c.wrote(dk, value, false)
		c.remember(dk, r)
	}
}
