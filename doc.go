// Package redstream holds the contracts shared by all of redstream's engines: [Limiter],
// [Deduplicator], [Decision] and the sentinel errors, the specs engines are built from
// ([Spec], [DedupSpec]), and composition that needs no engine.
//
// The algorithms live once, in package core ([Spec.Core] returns a spec's core form);
// engines implement these contracts on top of it: package memory (in-process), package
// redisbackend (Lua scripts on Redis through rueidis, cluster-safe, no modules) and, in a
// module of its own, package wasmcore (core compiled to WebAssembly). Package proptest
// proves every engine equal to core.
//
// Composition, for any engine: [Allow] is the short form of a decision; [AllowBatch]
// decides many keys at once (in one round trip on Redis); [Registry] looks limiters up by
// name; [Multi] applies several named specs ([Rule]) all-or-nothing through an engine's
// multi-limiter; [WithFailurePolicy] decides what a limiter does when its backend fails
// (fail-closed, fail-open, or a local fallback), the one place a failure policy is applied,
// for single decisions and batches. [Reserve] admits an estimated cost and returns a
// [Reservation] to settle with the actual cost later; [Wait] blocks until a request is
// admitted, bounded by its context. Engines with a circuit breaker fail with
// [ErrCircuitOpen] while it is open ([BreakerState]). Package sink rate-limits values on
// their way to a [Sink]; package metrics counts a limiter's decisions (metrics.Named);
// package config builds all of it from the YAML files of the Java starter this library is
// compatible with (io.github.cuihairu.redis.streaming,
// https://github.com/cuihairu/redis-streaming), whose names, defaults and keys it keeps;
// package httplimit puts a limiter in front of net/http handlers.
//
// # Glossary
//
// One word per concept, in every package:
//
//   - key: what a limiter counts requests by (a user, an IP, an API key); never empty.
//   - cost: what one request consumes, n in AllowN, at least 1.
//   - limiter: decides whether a request of a cost for a key may proceed ([Limiter]).
//   - engine: a package implementing the contracts (memory, redisbackend, wasmcore); the
//     engine's clock is what a zero time.Time means.
//   - spec: what a limiter enforces, an algorithm and its parameters in user units
//     ([Spec], built by [TokenBucket], [SlidingWindow]...). Package core validates it into
//     its own form, a core.Limit, which only engines use.
//   - limit: a number only, the most cost a key can hold or admit per window: a bucket's
//     Capacity, a window's Spec.Limit, reported as Decision.Limit.
//   - multi-limiter: a limiter of several specs on one key, all-or-nothing (an engine's
//     NewMultiLimiter); a rule is one of its specs under a name ([Rule], [Multi]).
//   - decision: the answer to one request ([Decision]): Allowed, Limit, Remaining,
//     RetryAfter, ResetAfter and, for the leaky bucket, Delay.
//   - lease: units of a concurrency limit held by one holder until it releases them or
//     its expiry passes ([Lease], [ConcurrencyLimiter], [Concurrency]).
//   - peek: a decision computed without recording anything (the engines' PeekN and
//     PeekEach, spec by spec).
//   - bad input: an error caused by the caller's arguments ([ErrEmptyKey],
//     [ErrInvalidCost], [ErrCostTooLarge], [ErrInvalidTime], [ErrInvalidConfig]); never
//     subject to a failure policy.
//   - failure policy: what a limiter does when its backend fails ([FailurePolicy]); a
//     fallback is the limiter that decides under [FailFallback].
//   - breaker: the circuit breaker in front of a backend ([BreakerState]).
//   - deduplicator: tells whether an element was seen before ([Deduplicator]); a strategy
//     is how ([DedupStrategy]: set, Bloom filter, window).
//   - sink: where values go ([Sink]); a deny policy (sink.DenyPolicy) is what a
//     rate-limited sink does with a value its limiter denies.
//   - quota policy: one entry of the HTTP RateLimit-Policy header (httplimit.Policy), the
//     IETF draft's word.
//
// The Java starter's YAML keeps its own words (a rate-limit "policy" with "limits"); package
// config maps them to these.
package redstream
