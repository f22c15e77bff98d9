// Package lua holds redstream's Redis scripts, one operation per .lua file, each embedded
// into a named string and headed by its contract: KEYS, ARGV, the reply and the errors.
// Package redisbackend wraps each once in a rueidis.Lua and runs it; other runtimes may load
// the same files (see [Scripts]). Each file is self-contained (Redis runs one script text) and
// generated: do not edit it, edit its source in src/ and run `go generate ./lua/...`.
//
// Every limiter script decides exactly as its counterpart in package core (the
// specification), bit for bit:
//
//   - [GCRA]: token bucket and leaky bucket (both GCRA), one integer of state (the TAT).
//   - [SlidingLog]: the exact sliding window log, a sorted set with one entry per admission
//     time and cumulative counts as members (O(log N) per decision).
//   - [SlidingCounter], [FixedWindow]: O(1) state in one string.
//   - [Multi]: several of the above on one key, all-or-nothing, in one round trip.
//
// The deduplication scripts implement core.WindowDedup ([DedupWindow],
// [DedupWindowCheck]), an exact set ([DedupSet]) and a Bloom filter whose bit positions the
// client computes with core.Bloom ([BloomAdd], [BloomExists], [BloomCount]).
//
// Every limiter script decides each key under pcall (src/lib/guard.lua): a key holding
// state it cannot read (another type, another format, out-of-range numbers) is an error reply
// "<script>: foreign state: key ... holds ...", and nothing of that key is written.
//
// [JavaSlidingWindow] and [JavaTokenBucket] decide in the Java implementation's layout and
// arithmetic (milliseconds; the token bucket's fractional tokens are the one use of floating
// point), for limiters shared with Java processes; they are not core's algorithms.
//
// The five single-limit scripts take one or more keys (of one cluster slot) and decide them
// in turn, which lets a client batch many decisions into one call; a denial writes nothing.
//
// Conventions every script follows, because Lua numbers are doubles and Redis converts them
// lossily: all arithmetic is on integers below 2^53 (core guarantees the bounds); division
// and remainders use math.fmod, which is exact, never '/' followed by math.floor or '%';
// numbers sent to Redis are formatted with string.format('%d', x), never tostring; replies
// are integers or strings, never fractions; every key is declared in KEYS, and all the keys
// of one call share a hash tag. No multiple assignment reads a variable it assigns
// (a, b = b, a): gopher-lua, which miniredis embeds, assigns left to right. internal/lualint
// checks these rules on every .lua file of the repository. Time is µs since the Unix epoch; an empty ARGV now
// means "read the server's TIME", which Redis (6.2 and later) replicates by effects. The scripts use only commands of Redis
// 6.2; CI runs them on Redis 7.0 and later and on Valkey (see the README's supported versions).
//
// The sources are in src/: src/<script>.lua holds a script's contract and wiring, src/algo/
// each limit algorithm once (used by its single-limit script and by multi.lua), src/lib/ the
// clock prelude, the helpers and the per-key loop. tools/luagen (internal/luagen) assembles
// them, with the constants shared with core (MICROS_PER_SECOND, MAX_TIME, KEY_TTL_MARGIN, ...)
// that a script uses; the package's tests fail when a committed script is stale.
package lua
