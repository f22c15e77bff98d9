package stream

import (
	"slices"
	"strings"
	"testing"

	"github.com/redstream-go/redstream/internal/streamwire"
)

// FuzzScheduledEntry: streamwire.DecodeFields (the Go twin of delay_move.lua's decoder) never panics,
// and reads back exactly what streamwire.EncodeFields wrote, whatever bytes the fields hold.
func FuzzScheduledEntry(f *testing.F) {
	f.Add("key\x00tag\x00enc\x00body\x00ts\x00", "3:key")
	f.Add("h:x\x00{\"a\":1}\x00", "")
	f.Add("\x00\x00", "0:0:")
	f.Add("a:b\x001:2\x00", "12345678901234:x")
	f.Fuzz(func(t *testing.T, joined, raw string) {
		_, _ = streamwire.DecodeFields(raw) // must not panic
		fields := strings.Split(joined, "\x00")
		if len(fields)%2 != 0 {
			fields = append(fields, "")
		}
		enc := streamwire.EncodeFields(fields)
		got, err := streamwire.DecodeFields(enc)
		if err != nil {
			t.Fatalf("streamwire.DecodeFields(streamwire.EncodeFields(%q)): %v", fields, err)
		}
		if !slices.Equal(got, fields) {
			t.Fatalf("round trip of %q = %q", fields, got)
		}
	})
}

func TestDecodeFieldsRejects(t *testing.T) {
	for _, s := range hostileEncodings {
		if got, err := streamwire.DecodeFields(s); err == nil {
			t.Errorf("streamwire.DecodeFields(%q) = %q, want an error", s, got)
		}
	}
}

// hostileEncodings are scheduled entries both decoders must reject: lengths in a form
// strtod or Atoi would take (sign, spaces, hex, fractions, exponents), wrong lengths, an odd
// number of strings.
var hostileEncodings = []string{"", "3:ab", "x:1", ":a", "1:a", "-1:a1:b", "1:a1:b1:c", "1234567890123:a",
	"+1:a1:b", " 1:a1:b", "1 :a1:b", "0x1:a1:b", "1.0:a1:b", "1e0:a1:b", "\t1:a1:b", "1:a+1:b"}
