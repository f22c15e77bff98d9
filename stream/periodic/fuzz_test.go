package periodic

import (
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

// FuzzSchedule feeds arbitrary definitions to the schedule parser: each is refused with an
// error wrapping redstream.ErrInvalidConfig, or accepted with ticks that increase and plans
// whose calls are in tick order and within bounds. Its corpus is testdata/fuzz/FuzzSchedule.
func FuzzSchedule(f *testing.F) {
	f.Add("*/5 * * * *", "", int64(0), "skip", int64(0), 0, []byte(nil))
	f.Add("0 30 9 * * MON-FRI", "Europe/Paris", int64(0), "all", int64(2000), 5, []byte(`{"a":1}`))
	f.Add("", "", int64(10), "one", int64(0), 0, []byte(`[]`))
	f.Add("30 2 * * *", "America/New_York", int64(0), "", int64(0), 0, []byte(nil))
	f.Add("@daily", "Asia/Kolkata", int64(0), "all", int64(0), 100000, []byte(`"x"`))
	f.Add("TZ=x", "", int64(0), "", int64(0), 0, []byte(nil))
	f.Add("0 0 L * *", "", int64(0), "", int64(0), 0, []byte(nil))
	f.Fuzz(func(t *testing.T, expr, tz string, everyMs int64, missed string, lateMs int64, catchUp int, body []byte) {
		s := Schedule{Name: "f", Topic: "t", Cron: expr, TimeZone: tz, Missed: Missed(missed),
			MaxCatchUp: catchUp, Body: body}
		if everyMs > -1<<40 && everyMs < 1<<40 {
			s.Every = time.Duration(everyMs) * time.Millisecond
		}
		if lateMs > -1<<40 && lateMs < 1<<40 {
			s.Late = time.Duration(lateMs) * time.Millisecond
		}
		c, err := compile(s)
		if err != nil {
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("compile error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		at := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
		for range 5 {
			n := c.series.next(at)
			if n.IsZero() {
				break
			}
			if !n.After(at) {
				t.Fatalf("next(%v) = %v, not after", at, n)
			}
			at = n
		}
		start := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
		calls := plan(c, start, start.Add(2*time.Hour))
		if len(calls) > maxPlanSends+1 {
			t.Fatalf("%d calls, more than %d", len(calls), maxPlanSends+1)
		}
		for i, cl := range calls {
			if !cl.tick.After(start) || i > 0 && !cl.tick.After(calls[i-1].tick) || cl.skipped < 0 {
				t.Fatalf("call %d of %d: %+v", i, len(calls), cl)
			}
		}
	})
}
