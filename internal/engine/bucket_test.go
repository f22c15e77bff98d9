package engine

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// packShortRef is the layout packShort must produce: the key's bytes, zero padding, and
// the length in the last byte, read as two little-endian words.
func packShortRef(key string) shortKey {
	var b [16]byte
	copy(b[:maxShortKey], key)
	b[15] = byte(len(key))
	return shortKey{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

func TestPackShort(t *testing.T) {
	const alphabet = "\x00\x01az\x7f\x80\xff"
	for n := 0; n <= maxShortKey; n++ {
		for _, c := range alphabet {
			// Every byte distinct where possible, so a byte in the wrong place shows.
			var sb strings.Builder
			for i := range n {
				sb.WriteByte(byte(c) + byte(i*37))
			}
			key := sb.String()
			if got, want := packShort(key), packShortRef(key); got != want {
				t.Errorf("packShort(%q) = %#x, want %#x", key, got, want)
			}
		}
	}
}

// TestShortKeysDistinct: keys that differ only in trailing zero bytes or length stay
// distinct keys of the bucket table.
func TestShortKeysDistinct(t *testing.T) {
	c, err := Resolve("test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := redstream.TokenBucket(1, 1).Core()
	if err != nil {
		t.Fatal(err)
	}
	b, ok := NewBuckets(lim, c)
	if !ok {
		t.Fatal("NewBuckets: not a bucket")
	}
	keys := []string{"a", "a\x00", "a\x00\x00", "\x00", "\x00\x00", "abcdefgh", "abcdefgh\x00", "abcdefghijklmno", strings.Repeat("x", maxShortKey+1)}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var d redstream.Decision
	for _, k := range keys {
		if err := b.DecideInto(&d, k, now, 1); err != nil || !d.Allowed {
			t.Fatalf("first request of %q: %+v, %v", k, d, err)
		}
	}
	for _, k := range keys {
		if err := b.DecideInto(&d, k, now, 1); err != nil || d.Allowed {
			t.Fatalf("second request of %q: %+v, %v (a key shares another's state?)", k, d, err)
		}
	}
	if got := b.TrackedKeys(); got != len(keys) {
		t.Fatalf("TrackedKeys = %d, want %d", got, len(keys))
	}
	// Decide (core's decision) agrees with DecideInto.
	cd, err := b.Decide("a", now, 1)
	if err != nil || cd.Allowed || cd.RetryAfter != core.Second {
		t.Fatalf("Decide: %+v, %v", cd, err)
	}
}
