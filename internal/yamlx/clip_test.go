package yamlx

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClip: an error message repeats at most maxQuoted bytes of the input, cut at a rune
// boundary, and says how much it left out.
func TestClip(t *testing.T) {
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	long := strings.Repeat("a", maxQuoted-1) + "é" + strings.Repeat("b", 1000)
	got := clip(long)
	want := strings.Repeat("a", maxQuoted-1) + "...(1002 more bytes)"
	if got != want {
		t.Errorf("clip = %q, want %q", got, want)
	}
	if !utf8.ValidString(got) {
		t.Errorf("clip cut a rune: %q", got)
	}
}
