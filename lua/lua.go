package lua

import _ "embed" // the scripts are embedded

// The scripts, generated from src/ (see the package doc). Each file's head documents its
// KEYS, ARGV and reply.
var (

	// GCRA is gcra.lua: one core.TokenBucket or core.LeakyBucket decision (ARGV[7] selects the
	// leaky bucket's shaping delay).
	//go:embed gcra.lua
	GCRA string

	// SlidingLog is sliding_log.lua: one core.SlidingLog decision on a sorted set.
	//go:embed sliding_log.lua
	SlidingLog string

	// SlidingCounter is sliding_counter.lua: one core.SlidingCounter decision.
	//go:embed sliding_counter.lua
	SlidingCounter string

	// FixedWindow is fixed_window.lua: one core.FixedWindow decision.
	//go:embed fixed_window.lua
	FixedWindow string

	// Multi is multi.lua: several limits on one key, all-or-nothing.
	//go:embed multi.lua
	Multi string

	// DedupWindow is dedup_window.lua: windowed check-and-mark (core.WindowDedup).
	//go:embed dedup_window.lua
	DedupWindow string

	// DedupWindowCheck is dedup_window_check.lua: the read-only windowed check and count.
	//go:embed dedup_window_check.lua
	DedupWindowCheck string

	// DedupSet is dedup_set.lua: exact set check-and-mark (SADD) with an optional TTL.
	//go:embed dedup_set.lua
	DedupSet string

	// BloomAdd is bloom_add.lua: atomic Bloom check-and-add of one or more elements.
	//go:embed bloom_add.lua
	BloomAdd string

	// BloomExists is bloom_exists.lua: read-only Bloom membership of one or more elements.
	//go:embed bloom_exists.lua
	BloomExists string

	// BloomCount is bloom_count.lua: the set bits of one Bloom shard (BITCOUNT).
	//go:embed bloom_count.lua
	BloomCount string

	// JavaSlidingWindow is java_sliding_window.lua: one decision of the Java
	// implementation's Redis sliding window, in its layout ('<ms>:<seq>' members).
	//go:embed java_sliding_window.lua
	JavaSlidingWindow string

	// JavaTokenBucket is java_token_bucket.lua: one decision of the Java implementation's
	// Redis token bucket, in its layout (a hash of tokens and ts).
	//go:embed java_token_bucket.lua
	JavaTokenBucket string
)

// Script describes one embedded script.
type Script struct {
	// Name is the file name without ".lua", e.g. "gcra"; error replies and
	// redisbackend's errors name the script by it.
	Name string
	// Source is the script text.
	Source string
	// ReadOnly reports that the script writes nothing, so it may run with EVALSHA_RO.
	ReadOnly bool
}

// Scripts returns every script, in a fixed order, in a new slice.
func Scripts() []Script {
	return []Script{
		{"gcra", GCRA, false},
		{"sliding_log", SlidingLog, false},
		{"sliding_counter", SlidingCounter, false},
		{"fixed_window", FixedWindow, false},
		{"multi", Multi, false},
		{"dedup_window", DedupWindow, false},
		{"dedup_window_check", DedupWindowCheck, true},
		{"dedup_set", DedupSet, false},
		{"bloom_add", BloomAdd, false},
		{"bloom_exists", BloomExists, true},
		{"bloom_count", BloomCount, true},
		{"java_sliding_window", JavaSlidingWindow, false},
		{"java_token_bucket", JavaTokenBucket, false},
	}
}
