// Package redstream holds the contracts shared by all of redstream's engines: [Limiter],
// [Deduplicator], [Decision] and the sentinel errors, plus composition that needs no engine.
//
// The algorithms live once, in package core; engines implement these contracts on top of
// it: package memory (in-process), package redisbackend (Lua scripts on Redis through
// rueidis, cluster-safe, no modules). Package proptest proves every engine equal to core.
package redstream
