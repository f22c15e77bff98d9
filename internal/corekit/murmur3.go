package corekit

import (
	"encoding/binary"
	"math/bits"
)

// Murmur3x64_128 is MurmurHash3_x64_128 by Austin Appleby (public domain), the 128-bit
// variant for x64, on data with the given seed. It returns the two 64-bit halves h1 and h2
// in the order of the reference implementation's output (out[0], out[1]); the bytes of the
// digest are h1 then h2, each little-endian. For the empty input with seed 0 both are 0.
//
// The algorithm, for any runtime that needs the same Bloom positions:
//
//	c1 = 0x87c37b91114253d5, c2 = 0x4cf5ad432745937f, h1 = h2 = seed
//	for each 16-byte block (k1, k2 little-endian uint64):
//	  k1 *= c1; k1 = rotl(k1,31); k1 *= c2; h1 ^= k1
//	  h1 = rotl(h1,27); h1 += h2; h1 = h1*5 + 0x52dce729
//	  k2 *= c2; k2 = rotl(k2,33); k2 *= c1; h2 ^= k2
//	  h2 = rotl(h2,31); h2 += h1; h2 = h2*5 + 0x38495ab5
//	tail (len%16 bytes): bytes 8..15 little-endian into k2, k2 *= c2, rotl 33, *= c1, h2 ^= k2;
//	  bytes 0..7 into k1, k1 *= c1, rotl 31, *= c2, h1 ^= k1
//	h1 ^= len; h2 ^= len; h1 += h2; h2 += h1
//	h1 = fmix64(h1); h2 = fmix64(h2); h1 += h2; h2 += h1
//	fmix64(k): k ^= k>>33; k *= 0xff51afd7ed558ccd; k ^= k>>33; k *= 0xc4ceb9fe1a85ec53; k ^= k>>33
//
// All arithmetic is modulo 2^64.
func Murmur3x64_128(data []byte, seed uint32) (h1, h2 uint64) {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	h1, h2 = uint64(seed), uint64(seed)
	n := len(data)
	nblocks := n / 16
	for i := 0; i < nblocks; i++ {
		k1 := binary.LittleEndian.Uint64(data[i*16:])
		k2 := binary.LittleEndian.Uint64(data[i*16+8:])
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}
	tail := data[nblocks*16:]
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 8; i-- {
		k2 ^= uint64(tail[i]) << (8 * uint(i-8))
	}
	if len(tail) > 8 {
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
	}
	for i := min(len(tail), 8) - 1; i >= 0; i-- {
		k1 ^= uint64(tail[i]) << (8 * uint(i))
	}
	if len(tail) > 0 {
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
	}
	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
