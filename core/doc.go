// Package core holds redstream's algorithms as pure functions of (parameters, state, now):
// the specification every engine (in-process memory, Lua on Redis, WebAssembly) is proven
// equal to by the conformance suites in package proptest.
//
// Units: time is int64 microseconds since the Unix epoch, durations are int64 microseconds,
// costs and counts are int64. All arithmetic on state is integer and every value stays below
// 2^53, so Go, Lua (doubles) and WebAssembly agree bit for bit. User-facing floats (rates,
// capacities, multipliers) are converted to integers once, by the constructors, which reject
// bad parameters with an error wrapping [ErrInvalidConfig]. Steps never panic: a bad cost or
// time is an error ([ErrInvalidCost], [ErrCostTooLarge], [ErrInvalidTime]), and time going
// backwards has a defined answer in every algorithm.
//
// Limiters: [TokenBucket] and [LeakyBucket] (both GCRA), [SlidingLog] (exact),
// [SlidingCounter] (two weighted windows), [FixedWindow]. Deduplication: [WindowDedup] and
// [Bloom] (sizing and bit positions from [Murmur3x64_128]). Retries: [Backoff].
//
// The package uses only the standard library, performs no I/O, starts no goroutine, reads no
// clock and uses no map, so it builds for GOOS=wasip1 GOARCH=wasm.
package core
