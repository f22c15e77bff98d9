package corekit

import (
	"strings"
	"testing"
)

func TestMurmur3Vectors(t *testing.T) {
	for _, c := range []struct {
		in     string
		seed   uint32
		h1, h2 uint64
	}{
		{"", 0, 0, 0},
		{"hello", 0, 0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19},
		{"hello", 42, 0xc4b8b3c960af6f08, 0x2334b875b0efbc7a},
		{strings.Repeat("a", 17), 0, 0x6f7214c7cef2d698, 0xa4fdbc534edea5bb},
		{"abcdefghijklmnopqrstuvwxyz", 0, 0x749c9d7e516f4aa9, 0xe9ad9c89b6a7d529},
		{"The quick brown fox jumps over the lazy dog", 0, 0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347},
		{"The quick brown fox jumps over the lazy eog", 0, 0x362108102c62d1c9, 0x3285cd100292b305},
		{"", 5381, 0xef2b598707a4bc70, 0x702e1ccf5cc2c6d8},
		{"abc", 5381, 0x5ff46b62f90afefa, 0xa5d8a2001713a02e},
	} {
		h1, h2 := Murmur3x64_128([]byte(c.in), c.seed)
		if h1 != c.h1 || h2 != c.h2 {
			t.Errorf("Murmur3x64_128(%q, %d) = %016x %016x, want %016x %016x", c.in, c.seed, h1, h2, c.h1, c.h2)
		}
	}
}
