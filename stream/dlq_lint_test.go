package stream

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/redstream-go/redstream/internal/redistest"
)

// dlqScripts are the dead-letter scripts, by file name.
var dlqScripts = map[string]string{
	"deadletter.lua": deadLetterLua,
	"replay.lua":     replayLua,
	"dlq_mark.lua":   dlqMarkLua,
	"dlq_move.lua":   dlqMoveLua,
	"dlq_replay.lua": dlqReplayLua,
	"dlq_last.lua":   dlqLastLua,
}

// TestDLQScriptsLint applies package lua's rules to the dead-letter scripts: a contract
// header, no tostring or math.floor/ceil (numbers are formatted with string.format('%d')),
// no global assignments, and no tonumber(...) handed straight to redis.call (Redis would
// format the number itself, possibly in exponent notation).
func TestDLQScriptsLint(t *testing.T) {
	rules := []struct {
		re  *regexp.Regexp
		why string
	}{
		{regexp.MustCompile(`\btostring\s*\(`), "tostring prints large numbers as 1.7e+15; use string.format('%d', x)"},
		{regexp.MustCompile(`math\.(floor|ceil)\s*\(`), "floor/ceil of a float quotient can be off by one; use math.fmod"},
		{regexp.MustCompile(`redis\.call\([^)]*\btonumber\(`), "a number passed to redis.call is formatted by Redis, possibly as 1e+15; pass the string"},
	}
	assign := regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z_0-9]*)\s*=[^=]`)
	local := regexp.MustCompile(`\blocal\s+(function\s+)?([a-zA-Z_][a-zA-Z_0-9 ,]*)`)
	for name, src := range dlqScripts {
		if !strings.HasPrefix(src, "-- "+name+": ") {
			t.Errorf("%s does not start with its name", name)
		}
		for _, want := range []string{"-- KEYS[1]", "-- Reply:"} {
			if !strings.Contains(src, want) {
				t.Errorf("%s: contract lacks %q", name, want)
			}
		}
		declared := map[string]bool{}
		for _, line := range strings.Split(src, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			for _, m := range local.FindAllStringSubmatch(line, -1) {
				for _, n := range strings.Split(m[2], ",") {
					declared[strings.TrimSpace(n)] = true
				}
			}
			if m := assign.FindStringSubmatch(line); m != nil && !declared[m[1]] {
				t.Errorf("%s: %q assigns the global %s", name, strings.TrimSpace(line), m[1])
			}
			for _, r := range rules {
				if r.re.MatchString(line) {
					t.Errorf("%s: %q: %s", name, strings.TrimSpace(line), r.why)
				}
			}
		}
	}
}

// TestDLQScriptsCompile loads every dead-letter script into a real redis-server.
func TestDLQScriptsCompile(t *testing.T) {
	c := redistest.Client(t)
	for name, src := range dlqScripts {
		if err := c.Do(context.Background(), c.B().ScriptLoad().Script(src).Build()).Error(); err != nil {
			t.Errorf("%s: SCRIPT LOAD: %v", name, err)
		}
	}
}
