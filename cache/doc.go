// Package cache is a cache-aside template on Redis: [GetOrLoad] reads a key and, on a miss,
// loads it once however many callers ask at the same time, then caches it.
//
// A [Cache] wraps a rueidis client (the caller keeps owning it) and a [Config] whose keys
// and defaults are the Java starter's redis-cache block ([DefaultConfig]; package config reads the
// block from a configuration file). Values are encoded by a [Codec], JSON by default. It
// protects the source behind it against:
//
//   - penetration: a loader that returns [ErrNotFound] gets a null marker cached for
//     Config.NullTTL, so a key that has no value does not reach the source on every call;
//   - avalanche: every TTL written gets a random extra of up to Config.JitterRatio of it,
//     so entries written together do not expire together;
//   - breakdown (stampede): concurrent misses of one key share one load in a process
//     (singleflight) and, across processes, take a lock held in the key itself (a
//     placeholder carrying the owner's token, replaced by the value or deleted by its owner
//     only, through Lua compare-and-set / compare-and-delete scripts). Other callers wait,
//     reading the key every Breakdown.WaitInterval, and after Breakdown.WaitTimeout load
//     without the lock (a degraded load, counted). A loader error is returned to every
//     caller sharing the load and never cached.
//
// [GetMany] reads many keys in one round trip (MGET, split per hash slot on a cluster, or
// client-side cached GETs) and loads all the misses with one [BatchLoader] call, under the
// same stampede protection.
//
// When Redis fails: every Redis call has a deadline of its own (Config.Timeout, 100ms by
// default) even when the caller's context has none, and a circuit breaker (Config.Breaker,
// the one the Redis limiters use) turns an outage into a few timeouts, after which calls
// fail at once until a probe finds Redis back. Failures are [ErrUnavailable] errors;
// Config.OnRedisError [LoadOnError] makes GetOrLoad and GetMany answer them from the loader
// instead, caching nothing. Each is counted (redis_cache_redis_errors_total,
// redis_cache_fallback_total{reason}, redis_cache_breaker_state), reported to
// Config.Breaker.OnStateChange and logged once per change of state.
//
// Tags ([Tags], [Cache.InvalidateTag]) invalidate a group of entries with one write: a
// tag's key holds a token that InvalidateTag replaces, each tagged entry records its tags'
// tokens, and a read of an entry whose tokens changed is a miss. The tokens are read from
// client-side cache memory, so a tagged hit costs no extra round trip.
//
// Sliding expiration (opt-in) renews the TTL of a value on reads; null markers are never
// renewed. Client-side caching (opt-in, Config.ClientSideCache) keeps read values in process
// memory with rueidis's server-assisted invalidation: a hot hit costs no round trip, a write
// from any client invalidates the copy, and the writer itself always reads its own writes.
//
// The guarantee of client-side caching: a value answered from memory reflects every write
// Redis completed more than ClientSideCache.MaxStaleness (3s by default) before the read,
// even when the connection that would carry the invalidation is up but silent (a hung
// server, a stalled network path). A heartbeat reads through every connection that
// delivers invalidations each ClientSideCache.Heartbeat (1s); a hit from memory is served
// only while the last heartbeat all of them answered was sent at most MaxStaleness ago, and
// otherwise goes to Redis, with its deadline and the failure policy, like any read. The
// check costs a hit one clock read and one atomic load. Refused hits, failed heartbeats and
// the heartbeat's age are counted (redis_cache_local_refused_total,
// redis_cache_heartbeat_failures_total, redis_cache_heartbeat_age_seconds); the change of
// state is logged once. On a single server the heartbeat reaches every connection rueidis
// may open; on a cluster, every connection of a node that owns at least 263 contiguous
// slots, up to four connections a node (rueidis opens one unless
// ClientOption.PipelineMultiplex says otherwise).
//
// Every key is a single Redis string (KeyPrefix [+ Env + ":"] + key) and every command or
// script touches that one key (GetMany pipelines one-key commands, and one MGET per hash
// slot), so the cache works unchanged on Redis Cluster. Counters
// (hits, misses, null hits, local hits, refused local hits, loads, load errors, lock waits,
// degraded loads, Redis errors, fallbacks, failed heartbeats), the breaker's state and the
// heartbeat's age are
// VictoriaMetrics metrics in a set per cache ([Cache.Metrics], [Cache.Stats]).
package cache
