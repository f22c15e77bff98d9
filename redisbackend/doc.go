// Package redisbackend implements redstream's limiters and deduplicators on Redis: every
// decision is one Lua script from package lua, run through rueidis in one round trip, and
// decides exactly as package core (the conformance suites in package proptest prove it on
// miniredis, a real redis-server and a real 3-master Redis Cluster). No Redis module is
// needed. Read-only checks run with EVALSHA_RO where the server has it (Redis 7.0+) and
// fall back to EVALSHA where it does not (Redis 6.2); CI runs the suites on Redis 7.0 and 8.6
// and Valkey 8.1 and 9.1, single server and cluster.
//
// Limiters: [NewLimiter] for one [redstream.Spec] (token bucket, leaky bucket, sliding
// window log, sliding window counter, fixed window), [NewMultiLimiter] for several limits on
// one key, all-or-nothing. [Limiter.AllowBatch] decides many keys in one pipelined round
// trip. Deduplicators: [NewDeduplicator] builds a [SetDeduplicator] (exact),
// [BloomDeduplicator] (probabilistic, atomic check-and-add, sharded) or
// [WindowDeduplicator] (forgets an element a window after it was last seen).
//
// Clock: a zero time means the Redis server's TIME, read inside the script, so clients need
// no synchronized clocks; an explicit time is passed to the script as is (tests, replays).
//
// Keys: all the keys of one call share a hash tag derived from the user key in one key
// schema (keys.go), so user keys holding '{', '}', spaces, binary bytes or megabytes of data
// work and stay in one cluster slot. A limiter's keys end with its Spec's [Fingerprint], so
// limiters of different parameters never share state. Default key prefixes:
// [DefaultTokenBucketPrefix] (the Java starter's "streaming:tb"), [DefaultSlidingWindowPrefix]
// (the Java starter's "streaming:rl") and one per other engine. A key holding state a script
// did not write is [ErrForeignState], naming the key and what it holds.
//
// Java interop: by default no key meets the Java implementation's. [Options.JavaCompatible]
// (sliding window, token bucket) and [DedupOptions.JavaCompatible] (set deduplicator) read
// and write the Java layout instead, so a mixed Go/Java fleet shares limits and dedup state.
//
// Failures: a limiter follows its [Options.FailurePolicy] when Redis fails (fail-closed by
// default, fail-open, or a fallback limiter); bad input is always an error. Every call
// honours its context's deadline. Engines never close the rueidis.Client they are given.
//
// Logging: a limiter logs through [Options.Logger] (default slog.Default()) once per state
// change, never per request: a Warn when Redis fails (with the error and what decisions do
// meanwhile, e.g. "decisions fall back to the fallback limiter") and an Info when Redis
// answers again. Under fail-closed each failure is also returned to the caller (and a
// named limiter counts it in redis_streaming_rl_errors_total).
package redisbackend
