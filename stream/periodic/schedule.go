package periodic

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"

	"github.com/redstream-go/redstream"
)

// Defaults of Schedule's fields and Options.
const (
	// DefaultLate is the default of Schedule.Late: a tick sent more than 1 s after its time
	// is missed.
	DefaultLate = time.Second
	// DefaultMaxCatchUp is the default of Schedule.MaxCatchUp: MissedAll sends at most the
	// 100 latest missed ticks.
	DefaultMaxCatchUp = 100
	// DefaultTimeout is the default of Options.Timeout: the deadline of each Redis call.
	DefaultTimeout = 2 * time.Second
)

// Limits of a schedule's definition.
const (
	maxNameLen    = 128
	maxEvery      = 366 * 24 * time.Hour
	maxLate       = time.Hour
	maxCatchUpCap = 100000
	maxBody       = 1 << 20
)

// Missed is the policy for the ticks a schedule missed: ticks more than Schedule.Late past
// their time when a process comes to them, after an outage of Redis or of every process.
// The zero value is MissedSkip.
type Missed string

const (
	// MissedSkip drops every missed tick; delivery goes on with the next tick on time.
	MissedSkip Missed = "skip"
	// MissedOne sends the latest missed tick, once, and drops the others.
	MissedOne Missed = "one"
	// MissedAll sends the missed ticks, oldest first, at most Schedule.MaxCatchUp of them
	// (the latest ones); older missed ticks are dropped.
	MissedAll Missed = "all"
)

// Schedule is one periodic message: a topic, when its ticks are (Cron or Every), what each
// tick sends, and what to do with missed ticks. Every process that adds the same Schedule
// (same Topic and Name) shares it: each tick is sent once across them. The zero value of
// each optional field means its default.
type Schedule struct {
	// Name identifies the schedule within its topic: 1 to 128 bytes of letters, digits and
	// "._:/-". Required.
	Name string `json:"name"`
	// Topic is the topic each tick is sent to (an unpartitioned topic). Required.
	Topic string `json:"topic"`
	// Cron is a cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6
	// (a seconds field first), or one of @yearly, @monthly, @weekly, @daily, @hourly. A
	// day-of-month and a day-of-week that are both restricted match either (crontab(5)).
	// Exactly one of Cron and Every is set.
	Cron string `json:"cron,omitempty"`
	// Every is a fixed interval, a whole number of milliseconds from 1 ms to 366 days; its
	// ticks are the multiples of Every since the Unix epoch, so every process agrees on them.
	Every time.Duration `json:"every,omitempty"`
	// TimeZone is the IANA time zone (Europe/Paris) Cron is read in; "" means UTC. Only with
	// Cron. A wall time that a DST change skips (02:30 on a night that goes from 02:00 to
	// 03:00) fires an hour later in wall time (03:30) that night; with a fixed hour field (no
	// "*" or "/"), a wall time that a DST change repeats fires once, at its first occurrence,
	// and with a wildcard hour, on the clock in both occurrences.
	TimeZone string `json:"time_zone,omitempty"`
	// Missed is the policy for missed ticks; "" means MissedSkip.
	Missed Missed `json:"missed,omitempty"`
	// MaxCatchUp bounds MissedAll: the most missed ticks sent after an outage. 0 means
	// DefaultMaxCatchUp (100); at most 100,000.
	MaxCatchUp int `json:"max_catch_up,omitempty"`
	// Late is how long after its time a tick is still on time (sent whatever the policy);
	// later ticks are missed. 0 means DefaultLate (1 s); at most 1 h.
	Late time.Duration `json:"late,omitempty"`
	// Body is the JSON body of each tick's message, written as is; nil means {}. At most
	// 1 MiB.
	Body json.RawMessage `json:"body,omitempty"`
	// Tag is the tag of each tick's message. Optional.
	Tag string `json:"tag,omitempty"`
}

// series is the ticks of a schedule.
type series interface {
	// next returns the first tick strictly after t, or the zero time when there is none.
	next(t time.Time) time.Time
}

// every is the series of the multiples of an interval of ms milliseconds since the epoch.
type every struct{ ms int64 }

func (e every) next(t time.Time) time.Time {
	ms := t.UnixMilli()
	n := ms / e.ms
	if ms < 0 && ms%e.ms != 0 {
		n--
	}
	return time.UnixMilli((n + 1) * e.ms)
}

// count returns how many ticks are in (after, upTo].
func (e every) count(after, upTo time.Time) int64 {
	if !upTo.After(after) {
		return 0
	}
	return floorDiv(upTo.UnixMilli(), e.ms) - floorDiv(after.UnixMilli(), e.ms)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a < 0 && a%b != 0 {
		q--
	}
	return q
}

// cronSeries is the series of a parsed cron expression. With a fixed hour field (no "*" or
// "/"), a wall time that a DST change repeats fires once, at its first occurrence, as
// crontab(5) runs fixed-time jobs; an expression with a wildcard hour fires on the clock, in
// the repeated hour too.
type cronSeries struct {
	s         cron.Schedule
	fixedHour bool
}

// maxRepeatedSkips bounds the repeated hours next passes over in one call.
const maxRepeatedSkips = 8

func (c cronSeries) next(t time.Time) time.Time {
	for range maxRepeatedSkips {
		n := c.s.Next(t)
		if n.IsZero() || !c.fixedHour {
			return n
		}
		end, repeated := repeatedWall(n)
		if !repeated {
			return n
		}
		t = end.Add(-time.Second) // the next tick at or after end
	}
	return c.s.Next(t)
}

// repeatedWall reports whether the wall time of n (in its location) occurred before, in the
// hours a DST change repeats (some time shortly before n has the same wall time), and when
// the repeated wall times end.
func repeatedWall(n time.Time) (end time.Time, repeated bool) {
	_, off := n.Zone()
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if _, poff := n.Add(-back).Zone(); poff-off == int(back/time.Second) {
			// The change is in (n-back, n]: find its instant, to the second.
			lo, hi := n.Add(-back), n
			for hi.Sub(lo) > time.Second {
				mid := lo.Add(hi.Sub(lo) / 2)
				if _, o := mid.Zone(); o == off {
					hi = mid
				} else {
					lo = mid
				}
			}
			return hi.Add(back), true
		}
	}
	return time.Time{}, false
}

// compiled is a validated Schedule with its defaults applied and its series.
type compiled struct {
	Schedule
	series series
}

// cronParser reads 5 or 6 fields and descriptors, with crontab(5)'s day-of-month OR
// day-of-week rule.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month |
	cron.Dow | cron.Descriptor | cron.DowOrDom)

// cronFields names the fields of a 6-field expression; a 5-field one lacks the first.
var cronFields = []string{"seconds", "minute", "hour", "day-of-month", "month", "day-of-week"}

// configError is an invalid definition or argument: "periodic: <msg>", wrapping
// redstream.ErrInvalidConfig.
type configError struct{ msg string }

func (e *configError) Error() string { return "periodic: " + e.msg }

func (e *configError) Unwrap() error { return redstream.ErrInvalidConfig }

// invalid returns an error wrapping redstream.ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// compile validates s and returns it with its defaults applied. Its errors wrap
// redstream.ErrInvalidConfig and name the schedule and the field.
func compile(s Schedule) (compiled, error) {
	if err := checkName(s.Name); err != nil {
		return compiled{}, err
	}
	bad := func(field, format string, args ...any) error {
		return invalid("schedule %q: %s: %s", s.Name, field, fmt.Sprintf(format, args...))
	}
	if s.Topic == "" {
		return compiled{}, bad("Topic", "required")
	}
	c := compiled{Schedule: s}
	switch {
	case s.Cron == "" && s.Every == 0:
		return compiled{}, bad("Cron, Every", "set one of them")
	case s.Cron != "" && s.Every != 0:
		return compiled{}, bad("Cron, Every", "set one of them, not both")
	case s.Every != 0:
		if s.Every < time.Millisecond || s.Every > maxEvery || s.Every%time.Millisecond != 0 {
			return compiled{}, bad("Every", "%v: want a whole number of milliseconds from 1ms to %v", s.Every, maxEvery)
		}
		if s.TimeZone != "" {
			return compiled{}, bad("TimeZone", "only with Cron (Every counts from the Unix epoch)")
		}
		c.series = every{ms: s.Every.Milliseconds()}
	default:
		sched, err := parseCron(s.Cron, s.TimeZone)
		if err != nil {
			return compiled{}, bad("Cron", "%v", err)
		}
		c.series = sched
	}
	if err := c.defaults(bad); err != nil {
		return compiled{}, err
	}
	return c, nil
}

// defaults checks the optional fields of c and applies their defaults.
func (c *compiled) defaults(bad func(field, format string, args ...any) error) error {
	switch c.Missed {
	case "":
		c.Missed = MissedSkip
	case MissedSkip, MissedOne, MissedAll:
	default:
		return bad("Missed", "%q: want %q, %q or %q", c.Missed, MissedSkip, MissedOne, MissedAll)
	}
	switch {
	case c.MaxCatchUp < 0 || c.MaxCatchUp > maxCatchUpCap:
		return bad("MaxCatchUp", "%d: want 0 (default %d) to %d", c.MaxCatchUp, DefaultMaxCatchUp, maxCatchUpCap)
	case c.MaxCatchUp == 0:
		c.MaxCatchUp = DefaultMaxCatchUp
	}
	switch {
	case c.Late < 0 || c.Late > maxLate:
		return bad("Late", "%v: want 0 (default %v) to %v", c.Late, DefaultLate, maxLate)
	case c.Late == 0:
		c.Late = DefaultLate
	}
	switch {
	case len(c.Body) > maxBody:
		return bad("Body", "%d bytes: at most %d", len(c.Body), maxBody)
	case c.Body == nil:
		c.Body = json.RawMessage("{}")
	case !json.Valid(c.Body):
		return bad("Body", "not valid JSON")
	}
	return nil
}

// checkName validates a schedule name.
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return invalid("schedule name %q: want 1 to %d bytes", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("._:/-", b) >= 0) {
			return invalid("schedule name %q: byte %d (%q): want letters, digits and \"._:/-\"", name, i, b)
		}
	}
	return nil
}

// parseCron parses expr in time zone tz ("" is UTC). Its errors name the field at fault.
func parseCron(expr, tz string) (series, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, fmt.Errorf("time zone %q: want an IANA name such as Europe/Paris", tz)
		}
		loc = l
	}
	t := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ="):
		return nil, fmt.Errorf("%q: give the time zone in TimeZone, not in the expression", expr)
	case strings.HasPrefix(t, "@every"):
		return nil, fmt.Errorf("%q: give a fixed interval in Every", expr)
	case strings.HasPrefix(t, "@"):
	default:
		fields := strings.Fields(t)
		if len(fields) != 5 && len(fields) != 6 {
			return nil, fmt.Errorf("%q: %d fields: want 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)", expr, len(fields))
		}
		if err := checkFields(fields); err != nil {
			return nil, fmt.Errorf("%q: %w", expr, err)
		}
	}
	s, err := cronParser.Parse("CRON_TZ=" + loc.String() + " " + t)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", expr, err)
	}
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%q: never fires", expr)
	}
	return cronSeries{s: s, fixedHour: fixedHour(t)}, nil
}

// fixedHour reports whether a cron expression (fields or a descriptor) fires at fixed hours.
func fixedHour(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		return expr != "@hourly"
	}
	f := strings.Fields(expr)
	h := f[len(f)-4]
	return !strings.ContainsAny(h, "*/")
}

// checkFields parses each field of a cron expression alone (every other field "*") and
// names the first that is wrong.
func checkFields(fields []string) error {
	names := cronFields[6-len(fields):]
	probe := make([]string, len(fields))
	for i, f := range fields {
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = f
		if _, err := cronParser.Parse(strings.Join(probe, " ")); err != nil {
			return fmt.Errorf("%s field %q: %v", names[i], f, err)
		}
	}
	return nil
}
