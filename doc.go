// Package redstream holds the contracts shared by all of redstream's engines: [Limiter],
// [Deduplicator], [Decision] and the sentinel errors, the specs engines are built from
// ([Spec], [DedupSpec]), and composition that needs no engine.
//
// The algorithms live once, in package core ([Spec.Core] returns a spec's core.Limit);
// engines implement these contracts on top of it: package memory (in-process), package
// redisbackend (Lua scripts on Redis through rueidis, cluster-safe, no modules) and, in a
// module of its own, package wasmcore (core compiled to WebAssembly). Package proptest
// proves every engine equal to core.
//
// Composition, for any engine: [Registry] looks limiters up by name; [LimitingSink]
// rate-limits values on their way to a [Sink], dropping or rejecting ([ErrRateLimited]) what
// is denied; [Multi] names several limits applied all-or-nothing by an engine's
// multi-limiter; [WithFailurePolicy] decides what a limiter does when its backend fails
// (fail-closed, fail-open, or a local fallback), the one place a failure policy is applied,
// for single decisions and batches ([BatchLimiter]), telling [FailureObserver]s of every
// decision it answered. Engines with a circuit breaker fail with [ErrCircuitOpen] while it
// is open ([BreakerState]). Package metrics counts a limiter's
// decisions (metrics.Named); package config builds all of it from the YAML files of the
// Java starter this library is compatible with (io.github.cuihairu.redis.streaming,
// https://github.com/cuihairu/redis-streaming), whose names, defaults and keys it keeps;
// package httplimit puts a limiter in front of net/http handlers.
package redstream
