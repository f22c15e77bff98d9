package metrics

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// FuzzExposition: any label value and any value survive a write and a re-read unchanged,
// and no input line makes the reader panic.
func FuzzExposition(f *testing.F) {
	f.Add("api1", 3.0, `x_total{name="a"} 1`)
	f.Add("q\"b\\s\nn} x=\"y\", é", 0.25, `x{a="\\"} 1 1700000000`)
	f.Add("", -1e300, `x{a="b",} 1`)
	f.Add("\x00\xff", 1e-300, `{a="b"} 1`)
	f.Fuzz(func(t *testing.T, label string, v float64, line string) {
		_, _ = parseLine(line) // must not panic
		_, _ = group([]byte(line+"\n"+line), "ns")

		if math.IsNaN(v) || strings.ContainsAny(label, "\r") {
			return
		}
		text := Name("redis_streaming_rl_denied_total", "name", label) + " " + formatValue(v) + "\n"
		fams, bad := group([]byte(text), "")
		if len(bad) != 0 || len(fams) != 1 || len(fams[0].Samples) != 1 {
			t.Fatalf("%q: families %+v, unreadable %q", text, fams, bad)
		}
		s := fams[0].Samples[0]
		if len(s.Labels) != 1 || s.Labels[0].Value != label || s.Value != v {
			t.Fatalf("%q read back as %+v, want label %q value %v", text, s, label, v)
		}
		var out bytes.Buffer
		writeFamily(&out, fams[0])
		again, bad := group(out.Bytes(), "")
		if len(bad) != 0 || len(again) != 1 || again[0].Samples[0].Labels[0].Value != label || again[0].Samples[0].Value != v {
			t.Fatalf("rewritten %q read back as %+v (unreadable %q)", out.String(), again, bad)
		}
	})
}
