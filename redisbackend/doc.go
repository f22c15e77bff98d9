// Package redisbackend implements redstream's limiters and deduplicators on Redis: every
// decision is one Lua script from package lua, run through rueidis in one round trip, and
// decides exactly as package core (the conformance suites in package proptest prove it on
// miniredis, a real redis-server and a real 3-master Redis Cluster). No Redis module is
// needed. Read-only checks run with EVALSHA_RO where the server has it (Redis 7.0+) and
// fall back to EVALSHA where it does not (Redis 6.2); CI runs the suites on Redis 7.0 and 8.6
// and Valkey 8.1 and 9.1, single server and cluster.
//
// Limiters: [NewLimiter] for one [redstream.Spec] (token bucket, leaky bucket, sliding
// window log, sliding window counter, fixed window), [NewMultiLimiter] for several specs on
// one key, all-or-nothing. [Limiter.AllowBatch] decides many keys in one pipelined round
// trip. [NewConcurrencyLimiter] hands out leases on a redstream.Concurrency limit (at most N
// units held at once per key, shared by every process, a dead holder's slots back at its
// lease's expiry), alone or with rate limits. Deduplicators: [NewDeduplicator] builds a set (exact), a Bloom filter
// (probabilistic, atomic check-and-add, sharded) or a windowed deduplicator (forgets an
// element a window after it was last seen).
//
// Clock: a zero time means the Redis server's TIME, read inside the script, so clients need
// no synchronized clocks; an explicit time is passed to the script as is (tests, replays).
//
// Keys: all the keys of one call share a hash tag derived from the user key in one key
// schema (keys.go), so user keys holding '{', '}', spaces, binary bytes or megabytes of data
// work and stay in one cluster slot. A limiter's keys end with its Spec's fingerprint (the
// algorithm's name and its parameters in core units, "sliding.60000000.10"; see
// [Limiter.Keys]), so limiters of different parameters never share state. The default key
// prefix is [DefaultKeyPrefix] ("streaming:rl", the Java starter's) for every algorithm,
// as in configuration files, where a policy's keys add its name (docs/limiters.md, "Key
// prefixes"). redisbackend/testdata/keys.json pins the key schema. A key holding state a
// script did not write is [ErrForeignState], naming the key and what it holds.
//
// Java interop: by default no key meets the Java implementation's. [Options.JavaCompatible]
// (sliding window, token bucket) and [DedupOptions.JavaCompatible] (set deduplicator) read
// and write the Java layout instead, so a mixed Go/Java fleet shares limits and dedup state.
//
// Local denials: after Redis denies a key's request of cost n with RetryAfter r, that key's
// state can only move forward until r has passed (a denial changes nothing; time and other
// admissions only add), so the limiter answers the requests that denial proves denied in
// process, with no round trip, from a bounded table (at most 8,192 keys per limiter): token and leaky bucket and fixed window, every cost >= n; sliding log and
// sliding counter, cost n, when the denial's Remaining is n-1 (always for n = 1). Each field
// of such a Decision is the one Redis would give: at explicit times exactly (a conformance
// test runs limiters with and without local denials side by side on random sequences, on
// miniredis, redis-server and a cluster, and finds no difference); at the server's TIME,
// measured on the local monotonic clock from when the denied request was sent, so RetryAfter
// and ResetAfter may be shorter than Redis's by up to the round trip, never longer. What it
// cannot see: another client's Reset or DEL of the key (a local denial then lasts at most the
// r it came from); the limiter's own Reset forgets the key. [Limiter.AllowBatch] sends only
// the keys local denials do not answer; multi-limit limiters always ask Redis. During a
// Redis outage a key with a live local denial stays denied. Local denials are counted in
// redis_streaming_rl_local_denied_total{prefix="..."} and, by a named limiter, as denials.
// [Options.DisableLocalDenials] turns them off.
//
// Leased quota (off by default, [Options.Quota], a [QuotaOptions]): for a hot key under its
// limit, the limiter takes a slice of the key's budget in one script call (quota.lua) and
// admits requests from it in process until it is spent or three quarters of its life have
// passed; the next request gives back the unused units and takes the next lease in the same
// call. A lease takes its units from the key's state as a request of that cost would, so no
// number of processes admits more than the limit; a process that dies holding a lease leaves
// its unused units spent. A slice is the request's cost plus the rate the process admitted on
// the key during its previous lease times QuotaOptions.Duration, at most QuotaOptions.MaxShare
// of the limit: a cold key takes just its request's cost, as without leases. A token bucket's
// lease is recorded as taken at its end; a window algorithm's ends with its window. Token
// bucket, fixed window and sliding counter have leases; the leaky bucket, the sliding log,
// multi-limit and JavaCompatible limiters refuse them. Peek and AllowBatch read Redis, where
// leased units count as spent. metrics.LeasedQuotaCounters counts calls, units granted and
// given back, and decisions admitted from leases, per key prefix. docs/limiters.md, "Hot
// keys under their limit", has the details.
//
// [Limiter.DeniedKeys] lists the keys a limiter now denies from memory, most denied first:
// the hot keys over their limit, for an operator.
//
// Coalesced decisions (on by default; [Options.DisableCoalescing]): an AllowN that arrives
// while 4 calls of the same server (of the same hash slot on a cluster) are in flight
// waits for one of them to return, and everything that gathered meanwhile goes in its
// place as one pipeline of the batch calls [Limiter.AllowBatch] makes (up to 128 keys per
// script call). There is no timer: a caller with fewer than 4 calls ahead goes at once,
// alone, and a gathering lasts at most one round trip, so under load the server runs one
// script call per gathering instead of one per decision. Each
// decision is the one it would be alone (it is decided atomically, in arrival order with
// the others of its key). A caller keeps its own context: one that ends while its decision
// waits returns its context's error at once, and one whose decision was already sent stops
// waiting too (the decision is made in Redis, as it is for a call abandoned by its
// context). The batch call has the limiter's timeout per 128 keys, whatever the callers'
// contexts, so a decision that waits behind a hung call is bounded by two timeouts, not
// one. Local denials, the failure policy and the breaker work as without coalescing.
// Multi-limit limiters, leased quota, limiters carrying state from Previous specs and a
// negative Timeout do not coalesce. Deduplicators coalesce CheckAndMark (and MarkSeen)
// the same way ([DedupOptions.DisableCoalescing]): a gathering of the set or Bloom
// deduplicator is one call of its batch script, of the windowed one a pipeline of its
// script; every element is new to exactly one caller, as alone.
//
// Deadlines cost no allocation when the caller's context has neither a deadline nor a
// done channel (context.Background, a context of values): the call's context is then one
// of a pool, with its timer reset per call, instead of a context.WithTimeout. A decision
// on Redis costs 5 allocations (the time argument, the Redis key, the key and argument
// slices, and rueidis's reply).
//
// Failures: every Redis call has a deadline of its own, [Options.Timeout] (default
// [DefaultTimeout], 100 ms), whatever the caller's context allows, and a circuit breaker
// ([Options.Breaker], a redstream.BreakerOptions): after 3 consecutive failures calls fail at once with an error
// wrapping redstream.ErrCircuitOpen, without touching Redis, and after a cool-down of 1 s a
// probe call tests Redis again. So a hung server costs a few timeouts, then microseconds per
// decision, instead of rueidis's 10 s write timeout per request. The breaker counts causes,
// not calls: the calls in flight on a connection that drops fail at once with one
// connection-level error and count as one failure, and on a Redis Cluster each master has a
// breaker of its own (by the key's hash slot), so that one failing master fails fast only
// its own keys. A call is made again once only when its error proves it never reached Redis
// (a failed dial). A limiter returns a
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
