// Package redstream holds the contracts shared by all of redstream's engines: [Limiter],
// [Deduplicator], [Decision] and the sentinel errors, plus composition that needs no engine.
//
// The algorithms live once, in package core; engines implement these contracts on top of
// it: package memory (in-process), package redisbackend (Lua scripts on Redis through
// rueidis, cluster-safe, no modules). Package proptest proves every engine equal to core.
//
// Composition, for any engine: [Named] counts a limiter's decisions in package metrics
// (redis_streaming_rl_allowed_total / redis_streaming_rl_denied_total); [Registry] looks
// limiters up by name; [LimitingSink] rate-limits values on their way to a [Sink], dropping
// or rejecting ([ErrRateLimited]) what is denied; [Multi] names several limits applied
// all-or-nothing by an engine's multi-limiter; [WithFailurePolicy] decides what a limiter
// does when its backend fails (fail-closed, fail-open, or a local fallback). Package config
// builds all of it from the Java starters' YAML files; package httplimit puts a limiter in
// front of net/http handlers.
package redstream
