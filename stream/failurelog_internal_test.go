package stream

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestLogGate(t *testing.T) {
	var g logGate
	t0 := time.Unix(1000, 0)
	for i := 0; i < failureLogBurst; i++ {
		if ok, s := g.admit(t0.Add(time.Duration(i) * time.Millisecond)); !ok || s != 0 {
			t.Fatalf("event %d: admit = %v, %d; want true, 0", i, ok, s)
		}
	}
	for i := 0; i < 5; i++ {
		if ok, _ := g.admit(t0.Add(time.Second)); ok {
			t.Fatalf("event %d past the burst admitted", failureLogBurst+i)
		}
	}
	if ok, s := g.admit(t0.Add(failureLogPeriod)); !ok || s != 5 {
		t.Errorf("first event of the next period: admit = %v, %d; want true, 5", ok, s)
	}
	if ok, s := g.admit(t0.Add(failureLogPeriod + time.Millisecond)); !ok || s != 0 {
		t.Errorf("second event: admit = %v, %d; want true, 0", ok, s)
	}
	// A clock that steps back starts a new period rather than muting the gate.
	if ok, _ := g.admit(t0.Add(-time.Hour)); !ok {
		t.Error("event after the clock stepped back not admitted")
	}
}

func panicHere() (stack []byte) {
	defer func() {
		recover()
		stack = debug.Stack()
	}()
	panic("x")
}

func TestPanicSite(t *testing.T) {
	site := panicSite(panicHere())
	if !strings.HasPrefix(site, "github.com/redstream-go/redstream/stream.panicHere ") || !strings.Contains(site, "failurelog_internal_test.go:") ||
		strings.Contains(site, "+0x") {
		t.Errorf("panicSite = %q, want panicHere and its file:line", site)
	}
	for _, s := range []string{"", "goroutine 1 [running]:\nmain.main()\n", "panic(\n"} {
		if got := panicSite([]byte(s)); got != "" {
			t.Errorf("panicSite(%q) = %q, want \"\"", s, got)
		}
	}
	if got := firstLine("a\nb"); got != "a …" {
		t.Errorf("firstLine = %q", got)
	}
}

// TestDeadLetterTimeRule: a dl_ts that is missing or not whole milliseconds reads as the
// time of reading (the seed's rule), a valid one as itself.
func TestDeadLetterTimeRule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []string
		want   time.Time // zero: "now"
	}{
		{"valid", []string{"dl_ts", "1700000000123"}, time.UnixMilli(1700000000123)},
		{"garbage", []string{"dl_ts", "yesterday"}, time.Time{}},
		{"fractional", []string{"dl_ts", "1700000000123.5"}, time.Time{}},
		{"missing", []string{"body", "{}"}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			got := toDeadLetter(entry{id: "1-0", fields: tc.fields}).Time
			switch {
			case !tc.want.IsZero() && !got.Equal(tc.want):
				t.Errorf("Time = %v, want %v", got, tc.want)
			case tc.want.IsZero() && (got.Before(before) || got.After(time.Now())):
				t.Errorf("Time = %v, want the time of reading", got)
			}
		})
	}
}
