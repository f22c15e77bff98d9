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
// Limiters: the registry of algorithms ([Algorithms], [Lookup]) holds one [Algorithm] row per
// algorithm: its name, its parameter [Shape] ([Bucket]: capacity and rate; [Window]: window
// and limit), its Lua function and its state words. [Algorithm.New] validates [Params] and
// returns a [Limit], which decides a key's [State] ([Limit.StepState]) and says when the key
// may be forgotten ([Limit.IdleState]). The rows are the token bucket and the leaky bucket
// (both GCRA), the exact sliding log, the sliding counter (two weighted windows), the fixed
// window and the concurrency limit (units held at once by leases that expire). Every engine
// reads the registry, so an algorithm added to it reaches them all (CONTRIBUTING.md, "Adding
// a limiter algorithm"). [Combine] merges the decisions of several limits applied
// all-or-nothing.
//
// What only engines call on a Limit (deciding in two halves for all-or-nothing limits,
// settling reservations, carrying state across a limit change, releasing and extending
// leases) is not part of this package's API: core implements it, and the engines reach it
// through the internal package internal/coreops.
//
// Deduplication: [WindowDedup] and [Bloom] (sizing and bit positions from MurmurHash3_x64_128).
// Retries: [Backoff].
//
// The package uses only the standard library (and internal/corekit, which does too),
// performs no I/O, starts no goroutine, reads no clock and uses no map, so it builds for
// GOOS=wasip1 GOARCH=wasm.
package core
