// Package benchmarks measures redstream side by side with the peer libraries its users
// compare it to, in one `go test -bench` run. It is its own module so that the peers never
// become dependencies of the library.
//
// The Redis comparisons (BenchmarkRedisLimiter, BenchmarkRedisPathCost,
// BenchmarkRedisDenyHeavy) are interleaved: the contenders run in short alternating slices,
// round after round, and report medians, spreads and per-round ratios, so that drift of a
// shared machine cancels out of the ratios. README.md gives the commands and this machine's
// figures.
package benchmarks
