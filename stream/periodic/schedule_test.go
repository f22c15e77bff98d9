package periodic

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

// TestCompileErrors checks that every bad definition is refused with an error wrapping
// redstream.ErrInvalidConfig that names the field (and, for cron, the cron field) at fault.
func TestCompileErrors(t *testing.T) {
	base := Schedule{Name: "n", Topic: "t"}
	with := func(f func(*Schedule)) Schedule { s := base; f(&s); return s }
	tests := []struct {
		name string
		s    Schedule
		want string
	}{
		{"no name", with(func(s *Schedule) { s.Name = ""; s.Every = time.Second }), "schedule name"},
		{"bad name", with(func(s *Schedule) { s.Name = "a b"; s.Every = time.Second }), `byte 1 (' ')`},
		{"no topic", with(func(s *Schedule) { s.Topic = ""; s.Every = time.Second }), "Topic: required"},
		{"neither", base, "Cron, Every: set one of them"},
		{"both", with(func(s *Schedule) { s.Cron = "* * * * *"; s.Every = time.Second }), "not both"},
		{"every sub-ms", with(func(s *Schedule) { s.Every = 1500 * time.Microsecond }), "Every: 1.5ms"},
		{"every negative", with(func(s *Schedule) { s.Every = -time.Second }), "Every: -1s"},
		{"every with zone", with(func(s *Schedule) { s.Every = time.Second; s.TimeZone = "UTC" }), "TimeZone: only with Cron"},
		{"minute out of range", with(func(s *Schedule) { s.Cron = "61 * * * *" }), "minute field \"61\""},
		{"seconds out of range", with(func(s *Schedule) { s.Cron = "99 0 * * * *" }), "seconds field \"99\""},
		{"hour", with(func(s *Schedule) { s.Cron = "0 25 * * *" }), "hour field \"25\""},
		{"day of month", with(func(s *Schedule) { s.Cron = "0 0 32 * *" }), "day-of-month field \"32\""},
		{"month name", with(func(s *Schedule) { s.Cron = "0 0 1 foo *" }), "month field \"foo\""},
		{"day of week", with(func(s *Schedule) { s.Cron = "0 0 * * 8" }), "day-of-week field \"8\""},
		{"field count", with(func(s *Schedule) { s.Cron = "* * *" }), "3 fields: want 5"},
		{"seven fields", with(func(s *Schedule) { s.Cron = "0 0 0 1 1 * 2030" }), "7 fields"},
		{"tz prefix", with(func(s *Schedule) { s.Cron = "TZ=UTC * * * * *" }), "TimeZone"},
		{"at every", with(func(s *Schedule) { s.Cron = "@every 1s" }), "Every"},
		{"bad descriptor", with(func(s *Schedule) { s.Cron = "@sometimes" }), "Cron"},
		{"never", with(func(s *Schedule) { s.Cron = "0 0 30 2 *" }), "never fires"},
		{"zone", with(func(s *Schedule) { s.Cron = "@daily"; s.TimeZone = "Mars/Olympus" }), "time zone \"Mars/Olympus\""},
		{"missed", with(func(s *Schedule) { s.Every = time.Second; s.Missed = "some" }), "Missed: \"some\""},
		{"catch-up", with(func(s *Schedule) { s.Every = time.Second; s.MaxCatchUp = -1 }), "MaxCatchUp: -1"},
		{"late", with(func(s *Schedule) { s.Every = time.Second; s.Late = 2 * time.Hour }), "Late: 2h0m0s"},
		{"body", with(func(s *Schedule) { s.Every = time.Second; s.Body = []byte("{") }), "Body: not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compile(tt.s)
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("compile = %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("compile error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestCronSeries checks the ticks of cron expressions: seconds, time zones and DST.
func TestCronSeries(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cron, tz string
		after          time.Time
		want           []time.Time
	}{
		{"every 15 s", "*/15 * * * * *", "", time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC),
			[]time.Time{time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)}},
		{"daily 09:00 Paris", "0 9 * * *", "Europe/Paris", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			[]time.Time{time.Date(2026, 1, 1, 9, 0, 0, 0, paris), time.Date(2026, 1, 2, 9, 0, 0, 0, paris)}},
		// 2026-03-29: Paris skips 02:00-03:00; a 02:30 tick fires at 03:30 that night.
		{"spring forward", "30 2 * * *", "Europe/Paris", time.Date(2026, 3, 28, 12, 0, 0, 0, paris),
			[]time.Time{time.Date(2026, 3, 29, 3, 30, 0, 0, paris), time.Date(2026, 3, 30, 2, 30, 0, 0, paris)}},
		// 2026-10-25: Paris repeats 02:00-03:00; a 02:30 tick fires once, the first time.
		{"fall back", "30 2 * * *", "Europe/Paris", time.Date(2026, 10, 24, 12, 0, 0, 0, paris),
			[]time.Time{time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 26, 2, 30, 0, 0, paris)}},
		// A wildcard hour fires on the clock: 02:30 CEST, then 02:30 CET an hour later.
		{"fall back, every hour", "30 * * * *", "Europe/Paris", time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC),
			[]time.Time{time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)}},
		{"day of month or week", "0 0 13 * FRI", "", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
			[]time.Time{time.Date(2026, 2, 6, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 13, 0, 0, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compile(Schedule{Name: "n", Topic: "t", Cron: tt.cron, TimeZone: tt.tz})
			if err != nil {
				t.Fatal(err)
			}
			at := tt.after
			for i, want := range tt.want {
				at = c.series.next(at)
				if !at.Equal(want) {
					t.Fatalf("tick %d: %v, want %v", i, at.UTC(), want.UTC())
				}
			}
		})
	}
}

// TestPlan checks the calls planned after an outage under each policy, for a fixed interval
// and for a cron expression.
func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(30*time.Second + 500*time.Millisecond) // 30 s outage after the tick at t0
	for _, src := range []Schedule{
		{Name: "n", Topic: "t", Every: time.Second, Late: 2 * time.Second},
		{Name: "n", Topic: "t", Cron: "* * * * * *", Late: 2 * time.Second},
	} {
		for _, tt := range []struct {
			missed     Missed
			catchUp    int
			sends      int   // ticks sent
			skipped    int64 // recorded as skipped
			firstTick  time.Duration
			firstSends bool
		}{
			// Ticks t0+1s..t0+30s are due; t0+29s and t0+30s are on time (Late 2 s).
			{MissedSkip, 0, 2, 28, 28 * time.Second, false},
			{MissedOne, 0, 3, 27, 28 * time.Second, true},
			{MissedAll, 5, 7, 23, 24 * time.Second, true},
			{MissedAll, 100, 30, 0, time.Second, true},
		} {
			s := src
			s.Missed, s.MaxCatchUp = tt.missed, tt.catchUp
			c, err := compile(s)
			if err != nil {
				t.Fatal(err)
			}
			calls := plan(c, t0, now)
			var sends int
			var skipped int64
			for i, cl := range calls {
				if i > 0 && !cl.tick.After(calls[i-1].tick) {
					t.Errorf("%v %s: ticks out of order: %v", s.Every, tt.missed, calls)
				}
				if cl.send {
					sends++
				}
				skipped += cl.skipped
			}
			if sends != tt.sends || skipped != tt.skipped {
				t.Errorf("%v %q %s/%d: %d sends, %d skipped; want %d, %d", s.Every, s.Cron, tt.missed, tt.catchUp, sends, skipped, tt.sends, tt.skipped)
			}
			if got := calls[0].tick.Sub(t0); got != tt.firstTick || calls[0].send != tt.firstSends {
				t.Errorf("%v %q %s: first call %v send=%v, want %v send=%v", s.Every, s.Cron, tt.missed, got, calls[0].send, tt.firstTick, tt.firstSends)
			}
			if last := calls[len(calls)-1]; !last.tick.Equal(t0.Add(30*time.Second)) || !last.send {
				t.Errorf("%v %q %s: last call %v, want the tick at +30s sent", s.Every, s.Cron, tt.missed, last)
			}
		}
	}
}

// TestPlanLongOutage checks that a fixed interval's plan after a very long outage does not
// walk the dropped ticks and keeps the bound.
func TestPlanLongOutage(t *testing.T) {
	c, err := compile(Schedule{Name: "n", Topic: "t", Every: time.Millisecond, Missed: MissedAll, MaxCatchUp: 10, Late: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	calls := plan(c, t0, t0.Add(30*24*time.Hour))
	if len(calls) != 15 || calls[0].skipped != 30*24*3600*1000-15 {
		t.Fatalf("%d calls, first skipped %d; want 15 calls, %d skipped", len(calls), calls[0].skipped, 30*24*3600*1000-15)
	}
}
