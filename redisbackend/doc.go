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
// work and stay in one cluster slot. Default key prefixes: [DefaultTokenBucketPrefix]
// (the Java starter's "streaming:tb"), [DefaultSlidingWindowPrefix] (the Java starter's "streaming:rl") and
// one per other engine.
//
// Failures: every Redis call has a deadline of its own, [Options.Timeout] (default
// [DefaultTimeout], 100 ms), whatever the caller's context allows, and a circuit breaker
// ([BreakerOptions]): after 3 consecutive failures calls fail at once with an error
// wrapping redstream.ErrCircuitOpen, without touching Redis, and after a cool-down of 1 s a
// probe call tests Redis again. So a hung server costs a few timeouts, then microseconds per
// decision, instead of rueidis's 10 s write timeout per request. A limiter returns a
// failure as an error with a denied decision (fail-closed); redstream.WithFailurePolicy is
// the one place that turns failures into admissions (FailOpen) or decisions of an
// in-process limiter of the same specs (FailFallback; [Limiter.NewLocal] builds it). Bad
// input is always an error. Engines never close the rueidis.Client they are given.
//
// Starting without Redis: rueidis.NewClient fails while no server answers; a [Connector]
// makes the client in the background with backoff, and its engines fail with
// [ErrNotConnected] (answered by the failure policy) until it is made.
//
// Capabilities: a server without EVALSHA_RO (Redis 6.2) is detected on the first read-only
// call of a client and remembered, so every later read-only call is one round trip.
//
// Logging: an engine logs through [Options.Logger] (default slog.Default()) once per state
// change of its breaker, never per request: a Warn when it opens (with the last error) and
// an Info when it closes again. metrics.Named counts failures in
// redis_streaming_rl_errors_total and redis_streaming_rl_fallback_total{reason}, and
// exports the breaker's state as redis_streaming_rl_breaker_state; deduplicators count
// their failures in redis_streaming_dedup_failures_total{name,reason} and export
// redis_streaming_dedup_breaker_state{name} themselves.
package redisbackend
