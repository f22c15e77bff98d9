// Package memory holds redstream's in-process engines: rate limiters and deduplicators whose
// state lives in this process's memory and whose every decision is made by package core, so
// they answer exactly as the Redis engines do (package proptest checks it).
//
// Rate limiting:
//   - [NewLimiter] builds a [Limiter] for any redstream.Spec: token bucket, leaky bucket
//     (with Decision.Delay for shaping), exact sliding window log, sliding window counter,
//     fixed window. It implements redstream.Limiter.
//   - [NewMultiLimiter] builds the same [Limiter] type of several specs on one key,
//     all-or-nothing (for example 10 per second and 10,000 per day).
//   - [NewConcurrencyLimiter] builds a [ConcurrencyLimiter]: leases (Acquire, Release,
//     Extend) on a redstream.Concurrency limit, at most N units held at once per key, alone
//     or all-or-nothing with rate limits (docs/concurrency.md).
//
// Deduplication: [NewDeduplicator] builds the redstream.Deduplicator of a redstream.DedupSpec:
// exact (a set, remembers every element until Clear), a Bloom filter (core's sizing and bit
// positions; fixed memory, no false negatives, false positives at about the configured
// rate), or windowed (forgets an element a window after it was last seen; it also
// implements redstream.TimedDeduplicator).
//
// Every engine is safe for concurrent use. State is kept in hash tables split into
// [Options].Shards shards, each under its own mutex and chosen by a hash/maphash hash of the
// key, so goroutines working on different keys rarely wait for each other; the token and
// leaky buckets decide a key they already track without any lock (one compare-and-swap). A
// decision on a key already tracked allocates nothing.
//
// Memory stays bounded: a key whose state has fully recovered (a bucket back to full, a
// window with nothing left in it, an expired dedup element) is evicted by amortized sweeping,
// triggered by [Options].SweepThreshold, and [Limiter.TrackedKeys] reports how many keys
// are held. Sweeping never changes an answer while time moves forward.
//
// Time: the zero time.Time (redstream.Allow, the Deduplicator methods) reads
// [Options].Clock, by default a monotonic clock anchored to the wall clock (see [Options]);
// an explicit time (AllowN, PeekN, IsDuplicateAt, CheckAndMarkAt) is used as given, which
// makes tests and replays reproducible. The engines start no goroutine and need no Close.
package memory
