package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/health"
)

// DefaultTTL, passed as a ttl argument, means the cache's Config.DefaultTTL. It is a
// sentinel, not a duration (like go-redis's KeepTTL): every other ttl must be at least 1ms,
// so a zero or negative ttl computed by mistake is an error rather than a silent default.
const DefaultTTL time.Duration = -1

// Errors. Compare with errors.Is; returned errors add the key and the cause.
var (
	// ErrNotFound is returned by Get for a missing key or a null marker, and by GetOrLoad
	// when the key holds a null marker or its loader reports ErrNotFound. A loader returns
	// it (possibly wrapped) to say "this key has no value": GetOrLoad then caches a null
	// marker for Config.NullTTL so the source is not asked again (penetration protection).
	ErrNotFound = errors.New("cache: not found")
	// ErrEncode is returned when the codec cannot encode a value (Set, or a loaded value
	// in GetOrLoad); nothing is written.
	ErrEncode = errors.New("cache: cannot encode value")
	// ErrDecode is returned when a stored value cannot be decoded into the requested type;
	// it is an error, not a miss, so a bad entry or a mismatched type is not silently
	// reloaded forever.
	ErrDecode = errors.New("cache: cannot decode value")
	// ErrInvalidArgument is returned for bad call arguments: an empty key, a ttl that is
	// neither DefaultTTL nor at least 1ms, a nil loader.
	ErrInvalidArgument = errors.New("cache: invalid argument")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("cache: closed")
	// ErrUnavailable matches (errors.Is) every error caused by Redis failing: an error
	// reply, a broken connection, Config.Timeout passing, or the circuit breaker open. The
	// error also wraps its cause (context.DeadlineExceeded for a timeout). It never marks
	// the caller's own context ending. Under Config.OnRedisError LoadOnError, GetOrLoad
	// and GetMany answer such failures from the loader instead of returning them.
	ErrUnavailable = errors.New("cache: Redis unavailable")
)

// Cache is a cache-aside template on Redis: typed reads and writes with TTL jitter, and
// GetOrLoad, which loads a missing key once however many callers ask for it at once. It is
// safe for concurrent use.
type Cache struct {
	client rueidis.Client
	cfg    Config
	codec  Codec
	keys   keyspace
	m      *counters
	own    *ownWrites // nil without client-side caching
	// beat bounds the staleness of hits from memory; nil without client-side caching.
	beat   *heartbeater
	memo   memo // decoded values of copies in memory (client-side caching)
	flight group
	closed atomic.Bool
	// watchSlots bounds the connections held by watchers (client-side caching only).
	watchSlots chan struct{}
	// renewBelow is the remaining PTTL (ms) under which a sliding read that reached Redis
	// renews the key when client-side caching is on.
	renewBelow int64
	log        *slog.Logger
	// bgFailing is set while writes the callers do not wait for (write-back of a load,
	// lock release, sliding renewal) fail; it logs once per change of state.
	bgFailing atomic.Bool
	// health is the circuit breakers in front of Redis, one per cluster master; nil with
	// Breaker.Disabled.
	health *health.Set
	// outage shares fallback loads (LoadOnError with Redis failing) within the process.
	outage group
	// refreshing holds the keys whose eager refresh runs in this process.
	refreshing sync.Map
	// known holds the last value of each key for fail-safe; nil with FailSafe off.
	known *lastKnown
	// tagOwn gives read-your-invalidations to the tag tokens read from memory.
	tagOwn *ownWrites
}

// New returns a Cache on client with cfg (see DefaultConfig). The client stays the
// caller's: Close does not close it, and it must outlive the Cache. For client-side caching
// (cfg.ClientSideCache.Enabled) the client needs client tracking, as rueidis sets up by
// default on RESP3 servers; with ClientOption.DisableCache the reads simply go to Redis.
//
// The cache's metrics live in their own metrics.Set (Metrics), registered with
// VictoriaMetrics' default registry until Close.
func New(client rueidis.Client, cfg Config) (*Cache, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", ErrInvalidArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{client: client, cfg: cfg, codec: cfg.Codec, keys: newKeyspace(&cfg), m: newCounters(cfg.Name)}
	if c.codec == nil {
		c.codec = defaultCodec
	}
	c.renewBelow = cfg.DefaultTTL.Milliseconds() / 2
	c.log = cfg.Logger
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.cfg.OnRedisError == "" {
		c.cfg.OnRedisError = ReturnError
	}
	if c.cfg.Timeout == 0 {
		c.cfg.Timeout = DefaultTimeout
	}
	if cfg.FailSafe.Enabled {
		c.known = newLastKnown(cfg.FailSafe.MaxEntries)
	}
	var err error
	if c.health, err = c.newBreaker(); err != nil {
		return nil, err
	}
	c.cfg.ClientSideCache.MaxStaleness = cfg.ClientSideCache.maxStaleness()
	c.cfg.ClientSideCache.Heartbeat = cfg.ClientSideCache.heartbeat()
	c.tagOwn = newOwnWrites(c.cfg.ClientSideCache.MaxStaleness)
	age := metricHeartbeatAge + `{name="` + escapeLabel(cfg.Name) + `"}`
	if cfg.ClientSideCache.Enabled {
		c.own = newOwnWrites(cfg.ClientSideCache.TTL)
		c.watchSlots = make(chan struct{}, maxWatchers)
		cs := c.cfg.ClientSideCache
		c.beat = newHeartbeater(client, c.keys.heartbeat(), cs.Heartbeat, cs.MaxStaleness, c.m.heartbeatFailures, c.log, "cache", cfg.Name)
		c.m.set.NewGauge(age, func() float64 { return c.beat.age().Seconds() })
		c.beat.start(c.cfg.Timeout)
	} else {
		c.m.set.NewGauge(age, func() float64 { return 0 })
	}
	metrics.RegisterSet(c.m.set)
	return c, nil
}

// Close stops the cache: later calls return ErrClosed, and its metrics are unregistered.
// It does not close the rueidis client, and does not wait for loads in progress. It is
// idempotent.
func (c *Cache) Close() {
	if c.closed.Swap(true) {
		return
	}
	if c.beat != nil {
		c.beat.stop()
	}
	metrics.UnregisterSet(c.m.set, false)
}

// Config returns the configuration the cache was built with.
func (c *Cache) Config() Config { return c.cfg }

// Metrics returns the cache's metric set (the redis_cache_* series, labelled with Config.Name).
func (c *Cache) Metrics() *metrics.Set { return c.m.set }

// Stats returns a snapshot of the cache's counters and breaker state.
func (c *Cache) Stats() Stats {
	st := c.m.stats()
	if c.health != nil {
		st.Breaker = c.health.State()
	}
	if c.beat != nil {
		st.HeartbeatAge = c.beat.age()
	}
	return st
}

// Key returns the Redis key holding key's entry: KeyPrefix [+ Env + ":"] + key.
func (c *Cache) Key(key string) string { return c.keys.data(key) }

// Set stores v under key for ttl (DefaultTTL for Config.DefaultTTL), plus jitter. It
// replaces whatever the key held, a load in progress included: that load's result is then
// returned to its callers but not cached, so the newer value wins. The Tags option tags
// the entry (other options are ignored).
func (c *Cache) Set(ctx context.Context, key string, v any, ttl time.Duration, opts ...Option) error {
	if err := c.check(key); err != nil {
		return err
	}
	ms, err := c.ttlMillis(ttl)
	if err != nil {
		return err
	}
	var o callOptions
	for _, opt := range opts {
		o = opt(o)
	}
	if err := checkTags(o.tags); err != nil {
		return err
	}
	raw, err := c.encode(key, v)
	if err != nil {
		return err
	}
	r := result{raw: string(raw)}
	if len(o.tags) > 0 {
		r = splitStored(result{raw: string(wrapTagged(o.tags, c.writeTokens(ctx, o.tags), raw))})
	}
	dk, value := c.keys.data(key), r.value()
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		return fmt.Errorf("cache: set %q: %w", key, gerr)
	}
	rctx, op := c.callCtx(ctx)
	err = c.client.Do(rctx, c.client.B().Set().Key(dk).Value(value).PxMilliseconds(ms).Build()).Error()
	op.release()
	c.wrote(dk, value, false)
	if err = c.outcome(ctx, tk, err); err != nil {
		return fmt.Errorf("cache: set %q: %w", key, err)
	}
	c.remember(dk, r)
	return nil
}

// Get returns the value cached under key, decoded into a T. A missing key, a null marker,
// an entry invalidated by its tag and a load in progress are ErrNotFound; a value that
// cannot be decoded into T is ErrDecode. With sliding expiration, a hit renews the key (see
// Config.SlidingExpiration).
//
// With Config.FailSafe enabled, a Redis failure (an ErrUnavailable error) is answered with
// the last value the process knew for the key, as in GetOrLoad: read or loaded at most
// FailSafe.MaxStaleness ago, reported by the Stale option, and Redis is not asked again for
// that key for FailSafe.Throttle (with backoff). The only option Get uses is Stale.
func Get[T any](ctx context.Context, c *Cache, key string, opts ...Option) (T, error) {
	var zero T
	if err := c.check(key); err != nil {
		return zero, err
	}
	var o callOptions
	for _, opt := range opts {
		o = opt(o)
	}
	if o.stale != nil {
		*o.stale = false
	}
	dk := c.keys.data(key)
	var now time.Time
	if c.known != nil {
		now = time.Now()
		if raw, ok := c.known.throttled(dk, now, c.cfg.FailSafe.MaxStaleness); ok {
			c.m.staleServed.Inc()
			return decodeStale[T](c, key, raw, o.stale)
		}
	}
	s, k, local, err := c.lookup(ctx, key, dk)
	if err != nil {
		if raw, ok := c.serveStale(ctx, dk, err); ok {
			return decodeStale[T](c, key, raw, o.stale)
		}
		return zero, err
	}
	if c.known != nil {
		switch k {
		case kindValue:
			c.known.seen(dk, s, now)
		case kindNull:
			c.known.forget(dk)
		}
	}
	if k != kindValue {
		return zero, ErrNotFound
	}
	return decodeHit[T](c, key, dk, s, local)
}

// decodeStale decodes a value fail-safe serves, and reports it through the Stale option.
func decodeStale[T any](c *Cache, key, raw string, served *bool) (T, error) {
	v, err := decode[T](c, key, raw)
	if err == nil && served != nil {
		*served = true
	}
	return v, err
}

// Delete removes key's entry (value, null marker, or a load in progress, whose result is
// then not cached). Deleting a missing key is not an error.
func (c *Cache) Delete(ctx context.Context, key string) error {
	if err := c.check(key); err != nil {
		return err
	}
	dk := c.keys.data(key)
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		return fmt.Errorf("cache: delete %q: %w", key, gerr)
	}
	rctx, op := c.callCtx(ctx)
	err := c.client.Do(rctx, c.client.B().Del().Key(dk).Build()).Error()
	op.release()
	c.wrote(dk, "", true)
	c.remember(dk, result{null: true})
	if err = c.outcome(ctx, tk, err); err != nil {
		return fmt.Errorf("cache: delete %q: %w", key, err)
	}
	return nil
}

// Exists reports whether key has an entry: a value or a null marker (a cached "not
// found"; Get tells them apart). A load in progress is not an entry.
func (c *Cache) Exists(ctx context.Context, key string) (bool, error) {
	if err := c.check(key); err != nil {
		return false, err
	}
	dk := c.keys.data(key)
	s, k, _, err := c.read(ctx, dk)
	if err == nil {
		_, k, err = c.open(ctx, dk, s, k)
	}
	if err != nil {
		return false, fmt.Errorf("cache: exists %q: %w", key, err)
	}
	return k == kindValue || k == kindNull, nil
}

// Expire sets key's TTL to ttl (DefaultTTL for Config.DefaultTTL), plus jitter. It
// reports false when the key has no entry (missing, or only a load in progress).
func (c *Cache) Expire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := c.check(key); err != nil {
		return false, err
	}
	ms, err := c.ttlMillis(ttl)
	if err != nil {
		return false, err
	}
	dk := c.keys.data(key)
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		return false, fmt.Errorf("cache: expire %q: %w", key, gerr)
	}
	rctx, op := c.callCtx(ctx)
	n, err := expireScript.Exec(rctx, c.client, []string{dk},
		[]string{strconv.FormatInt(ms, 10), lockPrefix, ""}).AsInt64()
	op.release()
	if err = c.outcome(ctx, tk, err); err != nil {
		return false, fmt.Errorf("cache: expire %q: %w", key, err)
	}
	return n == 1, nil
}

// check validates the key and the cache's state.
func (c *Cache) check(key string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	}
	return nil
}

// checkTTLArg validates a ttl argument: DefaultTTL or at least 1ms.
func checkTTLArg(ttl time.Duration) error {
	if ttl == DefaultTTL {
		return nil
	}
	if err := checkTTL(ttl); err != nil {
		return fmt.Errorf("%w: ttl %v", ErrInvalidArgument, err)
	}
	return nil
}

// ttlMillis validates ttl and returns it in milliseconds with jitter.
func (c *Cache) ttlMillis(ttl time.Duration) (int64, error) {
	if err := checkTTLArg(ttl); err != nil {
		return 0, err
	}
	if ttl == DefaultTTL {
		ttl = c.cfg.DefaultTTL
	}
	return jitter(ttl, c.cfg.JitterRatio), nil
}

// jitter returns ttl in whole milliseconds plus a uniform random extra in
// [0, floor(ms*ratio)]: a TTL is never shortened, only spread. ttl must be >= 1ms.
func jitter(ttl time.Duration, ratio float64) int64 {
	ms := ttl.Milliseconds()
	if ratio > 0 {
		if max := int64(float64(ms) * ratio); max > 0 {
			ms += rand.Int64N(max + 1)
		}
	}
	return ms
}

// encode encodes v with the codec.
func (c *Cache) encode(key string, v any) ([]byte, error) {
	raw, err := c.codec.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w %T for %q: %w", ErrEncode, v, key, err)
	}
	if strings.HasPrefix(string(raw), markerPrefix) {
		return nil, fmt.Errorf("%w %T for %q: the encoding starts with the cache's reserved marker prefix", ErrEncode, v, key)
	}
	return raw, nil
}

// decode decodes s into a new T.
func decode[T any](c *Cache, key, s string) (T, error) {
	var v T
	if err := c.codec.Unmarshal([]byte(s), &v); err != nil {
		var zero T
		return zero, fmt.Errorf("%w of %q as %v: %w", ErrDecode, key, reflect.TypeFor[T](), err)
	}
	return v, nil
}

// decodeHit decodes a hit; a copy served from memory reuses its memoized decoding.
func decodeHit[T any](c *Cache, key, dk, s string, local bool) (T, error) {
	if !local {
		return decode[T](c, key, s)
	}
	if v, ok := memoGet[T](&c.memo, dk, s); ok {
		return v, nil
	}
	v, err := decode[T](c, key, s)
	if err == nil {
		memoPut(&c.memo, dk, s, v)
	}
	return v, err
}

// lookup reads key (Redis key dk) for a caller (Get, GetOrLoad) and counts the outcome.
func (c *Cache) lookup(ctx context.Context, key, dk string) (string, kind, bool, error) {
	s, k, local, err := c.read(ctx, dk)
	if err == nil {
		s, k, err = c.open(ctx, dk, s, k)
	}
	if err != nil {
		return "", kindMiss, false, fmt.Errorf("cache: get %q: %w", key, err)
	}
	c.count(k, local)
	return s, k, local, nil
}

// count counts a read's outcome.
func (c *Cache) count(k kind, local bool) {
	switch k {
	case kindValue:
		c.m.hits.Inc()
	case kindNull:
		c.m.nullHits.Inc()
	default:
		c.m.misses.Inc()
	}
	if local {
		c.m.localHits.Inc()
	}
}

// read reads the Redis key dk: through the client-side cache when enabled (local reports
// an answer from memory), and renewing a real value under sliding expiration.
func (c *Cache) read(ctx context.Context, dk string) (s string, k kind, local bool, err error) {
	tk, gerr := c.gate(ctx, dk)
	if gerr != nil {
		return "", kindMiss, false, gerr
	}
	if c.own != nil {
		mark, pending := c.own.start()
		rctx, op := c.callCtx(ctx)
		resp := c.client.DoCache(rctx, c.client.B().Get().Key(dk).Cache(), c.cfg.ClientSideCache.TTL)
		op.release()
		s, err = resp.ToString()
		miss := rueidis.IsRedisNil(err)
		if err != nil && !miss {
			return "", kindMiss, false, c.outcome(ctx, tk, err)
		}
		if !resp.IsCacheHit() {
			c.outcome(ctx, tk, nil)
		}
		local = resp.IsCacheHit()
		if local && !c.beat.current() {
			// Memory may be behind Redis by more than MaxStaleness: ask Redis.
			c.m.localRefused.Inc()
			return c.readRedis(ctx, tk, dk, c.cfg.SlidingExpiration)
		}
		if pending {
			if !local {
				c.own.fromRedis(dk, mark)
			} else if c.own.stale(dk, s, miss) {
				// The copy predates a write of ours whose invalidation has not arrived.
				s, k, _, err = c.readRedis(ctx, tk, dk, false)
				return s, k, false, err
			}
		}
		if miss {
			return "", kindMiss, local, nil
		}
		k = classify(s)
		if c.cfg.SlidingExpiration && k == kindValue && !local {
			if pttl := resp.CachePTTL(); pttl >= 0 && pttl < c.renewBelow {
				c.renew(ctx, dk)
			}
		}
		return s, k, local, nil
	}
	return c.readRedis(ctx, tk, dk, c.cfg.SlidingExpiration)
}

// readRedis reads dk from Redis, renewing a real value when sliding.
func (c *Cache) readRedis(ctx context.Context, tk ticket, dk string, sliding bool) (s string, k kind, local bool, err error) {
	var resp rueidis.RedisResult
	rctx, op := c.callCtx(ctx)
	if sliding {
		resp = getRenewScript.Exec(rctx, c.client, []string{dk},
			[]string{strconv.FormatInt(jitter(c.cfg.DefaultTTL, c.cfg.JitterRatio), 10), markerPrefix, taggedPrefix})
	} else {
		resp = c.client.Do(rctx, c.client.B().Get().Key(dk).Build())
	}
	op.release()
	s, err = resp.ToString()
	if err = c.outcome(ctx, tk, err); err != nil {
		return "", kindMiss, false, err
	}
	if resp.Error() != nil { // a nil reply
		return "", kindMiss, false, nil
	}
	return s, classify(s), false, nil
}

// wrote records a write of this cache to dk for read-your-writes under client-side
// caching. It is called whatever the write's outcome: a write that timed out may still
// have happened.
func (c *Cache) wrote(dk, value string, deleted bool) {
	if c.own != nil {
		c.own.note(dk, value, deleted)
	}
}

// background records the outcome of a write no caller waits for (op names it): a failure
// costs a reload or a lock held until its TTL, not a caller's error, so it is logged at
// Warn when such writes start failing and at Info when they work again, once per change.
func (c *Cache) background(op string, err error) {
	if err != nil && !rueidis.IsRedisNil(err) {
		if c.bgFailing.CompareAndSwap(false, true) {
			c.log.Warn("cache: background writes to Redis are failing; loaded values are returned but not cached",
				"cache", c.cfg.Name, "op", op, "err", err)
		}
		return
	}
	if c.bgFailing.CompareAndSwap(true, false) {
		c.log.Info("cache: background writes to Redis work again", "cache", c.cfg.Name, "op", op)
	}
}

// renew sets DefaultTTL (jittered) on a real value: the sliding renewal of a read that
// reached Redis through the client-side cache. It is best effort: the read already
// succeeded, so a failed renewal is only logged (background).
func (c *Cache) renew(ctx context.Context, dk string) {
	tk, err := c.gate(ctx, dk)
	if err != nil {
		c.background("renew", err)
		return
	}
	wctx, cancel := c.detached(ctx)
	defer cancel()
	err = expireScript.Exec(wctx, c.client, []string{dk},
		[]string{strconv.FormatInt(jitter(c.cfg.DefaultTTL, c.cfg.JitterRatio), 10), lockPrefix, nullMarker}).Error()
	c.background("renew", c.outcome(context.Background(), tk, err))
}
