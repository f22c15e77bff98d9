//go:build wasip1

// Command wasmguest is redstream's core compiled to a WebAssembly module: a WASI reactor
// (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) whose exports are documented in
// wasmcore/ABI.md. Every export is a thin wrapper over package internal/wasmabi, which
// implements the ABI on package core.
//
// The reactor keeps no state between calls except its results area, its scratch buffer and
// a cache of the last limit: every step takes its parameters and the key's
// state as arguments and returns the new state, so any instance can serve any call. Bad
// input is a status code, never a panic (core's steps do not panic); a panic would be a bug,
// and the Go runtime would then abort the instance (the call traps), which embedders handle
// by replacing the instance.
package main

import (
	"unsafe"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

func main() {}

var (
	// results is the results area; its address never changes.
	results wasmabi.Results
	// scratch backs the scratch buffer as uint64s so that it is 8-byte aligned. buf is its
	// byte view, as long as the largest size requested from redstream_buffer: lengths
	// beyond it are StatusBuffer whatever the capacity, so answers never depend on how the
	// buffer grew. The Go garbage collector does not move objects, so the address handed out
	// stays valid while scratch refers to it.
	scratch []uint64
	buf     []byte
	// log and pos are reused by the sliding log and Bloom steps.
	log core.Log
	pos []uint64
	// limits keeps the limit of the last spec.
	limits wasmabi.LimitCache
)

// grow makes the scratch buffer size bytes long if it is shorter, reallocating (and so
// moving it) only when its capacity is exceeded.
func grow(size int) {
	if size <= len(buf) {
		return
	}
	if size > 8*len(scratch) {
		c := max(size, 2*8*len(scratch), 4096)
		if c > wasmabi.MaxBuffer {
			c = size
		}
		old := buf
		scratch = make([]uint64, (c+7)/8)
		buf = unsafe.Slice((*byte)(unsafe.Pointer(&scratch[0])), 8*len(scratch))[:len(old)]
		copy(buf, old)
	}
	buf = buf[:size]
}

func addr(p unsafe.Pointer) int32 { return int32(uintptr(p)) }

//go:wasmexport redstream_abi_version
func abiVersion() int32 { return wasmabi.Version }

//go:wasmexport redstream_results
func resultsAddr() int32 { return addr(unsafe.Pointer(&results[0])) }

//go:wasmexport redstream_buffer
func bufferAddr(size int32) int32 {
	if size < 0 || size > wasmabi.MaxBuffer {
		return 0
	}
	grow(int(size))
	if len(scratch) == 0 {
		grow(8) // a zero-size request still needs an address
		buf = buf[:0]
	}
	return addr(unsafe.Pointer(&scratch[0]))
}

//go:wasmexport redstream_limit_params
func limitParams(alg int32, capacity, rate float64, window, limit int64) int32 {
	return wasmabi.LimitParams(&results, &limits, alg, capacity, rate, window, limit)
}

//go:wasmexport redstream_limit_step
func limitStep(alg int32, capacity, rate float64, window, limit, s0, s1, s2 int64, length int32, now, n int64) int32 {
	return wasmabi.LimitStep(&results, &limits, &log, buf, alg, capacity, rate, window, limit, s0, s1, s2, length, now, n)
}

//go:wasmexport redstream_limit_idle
func limitIdle(alg int32, capacity, rate float64, window, limit, s0, s1, s2 int64, length int32, now int64) int32 {
	return wasmabi.LimitIdle(&results, &limits, &log, buf, alg, capacity, rate, window, limit, s0, s1, s2, length, now)
}

//go:wasmexport redstream_window_dedup_check
func windowDedupCheck(window, high, last int64, seen int32, now int64) int32 {
	return wasmabi.WindowDedupCheck(&results, window, high, last, seen, now)
}

//go:wasmexport redstream_window_dedup_expired
func windowDedupExpired(window, last, t int64) int32 {
	return wasmabi.WindowDedupExpired(&results, window, last, t)
}

//go:wasmexport redstream_bloom_params
func bloomParams(insertions int64, fpRate float64, shards int32) int32 {
	return wasmabi.BloomParams(&results, insertions, fpRate, shards)
}

//go:wasmexport redstream_bloom_positions
func bloomPositions(k int32, shardBits int64, shards, length int32) int32 {
	var s int32
	pos, s = wasmabi.BloomPositions(&results, pos, buf, k, shardBits, shards, length)
	return s
}

//go:wasmexport redstream_bloom_estimate_count
func bloomEstimateCount(k int32, shardBits, ones int64) int32 {
	return wasmabi.BloomEstimateCount(&results, k, shardBits, ones)
}

//go:wasmexport redstream_murmur3_x64_128
func murmur3(length, seed int32) int32 {
	return wasmabi.Murmur3(&results, buf, length, seed)
}

//go:wasmexport redstream_backoff_base
func backoffBase(initial, max int64, multiplier float64, attempt int64) int32 {
	return wasmabi.BackoffBase(&results, initial, max, multiplier, attempt)
}

//go:wasmexport redstream_backoff_delay
func backoffDelay(initial, max int64, multiplier float64, jitter int32, attempt, prev, random int64) int32 {
	return wasmabi.BackoffDelay(&results, initial, max, multiplier, jitter, attempt, prev, random)
}

//go:wasmexport redstream_limit_charge
func limitCharge(alg int32, capacity, rate float64, window, limit, now, n int64, allowed int32, dLimit, remaining, retryAfter, resetAfter, delay int64) int32 {
	return wasmabi.LimitCharge(&results, &limits, alg, capacity, rate, window, limit, now, n, allowed, dLimit, remaining, retryAfter, resetAfter, delay)
}

//go:wasmexport redstream_limit_settle
func limitSettle(alg int32, capacity, rate float64, window, limit, s0, s1, s2 int64, length int32, at, charged, now, actual int64) int32 {
	return wasmabi.LimitSettle(&results, &limits, &log, buf, alg, capacity, rate, window, limit, s0, s1, s2, length, at, charged, now, actual)
}

//go:wasmexport redstream_lease_release
func leaseRelease(alg int32, capacity, rate float64, window, limit int64, length int32, at, now, n int64) int32 {
	return wasmabi.LeaseRelease(&results, &limits, &log, buf, alg, capacity, rate, window, limit, length, at, now, n)
}

//go:wasmexport redstream_lease_extend
func leaseExtend(alg int32, capacity, rate float64, window, limit int64, length int32, at, now, n int64) int32 {
	return wasmabi.LeaseExtend(&results, &limits, &log, buf, alg, capacity, rate, window, limit, length, at, now, n)
}

//go:wasmexport redstream_limit_seed
func limitSeed(alg int32, capacity, rate float64, window, limit int64, fromAlg int32, fromCapacity, fromRate float64, fromWindow, fromLimit, s0, s1, s2, now int64, carry int32) int32 {
	return wasmabi.LimitSeed(&results, &limits, alg, capacity, rate, window, limit, fromAlg, fromCapacity, fromRate, fromWindow, fromLimit, s0, s1, s2, now, carry)
}
