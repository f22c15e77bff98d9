package lua_test

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/lua"
	"pgregory.net/rapid"
)

// baseline holds the scripts as they were before their structure was made cheaper (one
// closure per helper, a wrapper per algorithm, the per-key loop for every call), so that
// TestDifferentialAgainstBaseline can prove the current scripts answer and store exactly
// what those did. Refresh it only for a change meant to be behaviour-preserving; a change
// of behaviour updates the conformance suites instead.
//
//go:embed testdata/previous/*.lua
var baseline embed.FS

// diffKeys is the pool of user keys a sequence draws from: few, so that keys are decided
// many times; a call names a key of its own family (diffFamilies) three times in four, and
// a key every script shares otherwise, so that the scripts also read each other's state.
// share keys and read each other's state (foreign state) as often as their own.
var diffKeys = []string{"k0", "k1", "k2", "k3"}

// diffFamilies names the key families: one per state layout (the multi-limit and peek
// scripts use the family of each limit's algorithm), and "" for the shared keys.
var diffFamilies = []string{"", "gcra:", "sl:", "sc:", "fw:", "dw:", "ds:", "bloom:", "jtb:", "jsw:"}

// diffPoke is the foreign state a sequence writes into a key before a call: other types,
// and strings that parse as numbers out of every range or do not parse at all.
var diffPoke = [][]string{
	{"SET", "abc"}, {"SET", "1e300"}, {"SET", "nan"}, {"SET", "-inf"}, {"SET", "inf"},
	{"SET", "-5"}, {"SET", "1.5"}, {"SET", "99999999999999999999"}, {"SET", "12:x"},
	{"SET", "5:5"}, {"SET", "1767225600000000:3:2"}, {"SET", "9007199254740993:1"},
	{"SET", ""}, {"SET", "\x00\xff\"\\"}, {"HSET", "tokens", "3"}, {"HSET", "tokens", "x", "ts", "1"},
	{"ZADD", "1767225600000000", "7"}, {"ZADD", "1e300", "x"}, {"ZADD", "5", "1:2"},
	{"SADD", "m"}, {"RPUSH", "a"}, {"DEL"},
}

// diffCall is one script call drawn by a sequence.
type diffCall struct {
	script string
	keys   []string // user keys, prefixed per side when sent
	args   []string
}

const diffBase = int64(1767225600000000) // 2026-01-01, µs

// drawCall draws a call of any script with explicit times, costs in and out of range and a
// few parameter sets per algorithm (so that keys are also read with other parameters).
func drawCall(t *rapid.T, now int64) diffCall {
	family := ""
	key := func(label string) string {
		k := rapid.SampledFrom(diffKeys).Draw(t, label)
		if rapid.IntRange(0, 3).Draw(t, "shared") == 0 {
			return k
		}
		return family + k
	}
	fams := map[string]string{"tb": "gcra:", "lb": "gcra:", "sl": "sl:", "sc": "sc:", "fw": "fw:"}
	script := rapid.IntRange(0, 15).Draw(t, "script")
	switch {
	case script <= 1:
		family = "gcra:"
	case script <= 5:
		family = "window"
	case script <= 10:
		family = "dw:"
	case script == 11:
		family = "ds:"
	case script == 12:
		family = "bloom:"
	case script == 13:
		family = "jtb:"
	case script == 14:
		family = "jsw:"
	}
	keys := func() []string {
		n := rapid.IntRange(1, 3).Draw(t, "nkeys")
		if rapid.IntRange(0, 3).Draw(t, "multikey") != 0 {
			n = 1
		}
		ks := make([]string, n)
		for i := range ks {
			ks[i] = key("key")
		}
		return ks
	}
	ts := strconv.FormatInt(now, 10)
	margin := "600000" // ms: nothing expires while a sequence runs
	switch script {
	case 0, 1: // token bucket, leaky bucket
		p := rapid.SampledFrom([][3]int64{{1000, 5000, 5}, {250000, 1000000, 4}, {1, 7, 7}, {333333, 3333330, 10}}).Draw(t, "gcra")
		n := rapid.Int64Range(1, p[2]+1).Draw(t, "n")
		shaping := rapid.SampledFrom([]string{"0", "1"}).Draw(t, "shaping")
		return diffCall{"gcra", keys(), []string{ts, fmt.Sprint(n), fmt.Sprint(p[0]), fmt.Sprint(p[1]), fmt.Sprint(p[2]), margin, shaping}}
	case 2, 3, 4, 5:
		script := rapid.SampledFrom([]string{"sliding_log", "sliding_counter", "fixed_window"}).Draw(t, "window script")
		family = map[string]string{"sliding_log": "sl:", "sliding_counter": "sc:", "fixed_window": "fw:"}[script]
		p := rapid.SampledFrom([][2]int64{{1000000, 5}, {3000, 3}, {7777, 10}, {60000000, 2}}).Draw(t, "window")
		n := rapid.Int64Range(1, p[1]+1).Draw(t, "n")
		return diffCall{script, keys(), []string{ts, fmt.Sprint(n), fmt.Sprint(p[0]), fmt.Sprint(p[1]), margin}}
	case 6, 7, 8: // multi and peek: one key per limit
		limits := rapid.IntRange(1, 3).Draw(t, "limits")
		var ks, spec []string
		lo := int64(1 << 40)
		for i := 0; i < limits; i++ {
			alg := rapid.SampledFrom([]string{"tb", "lb", "sl", "sc", "fw"}).Draw(t, "alg")
			family = fams[alg]
			ks = append(ks, key("key"))
			if alg == "tb" || alg == "lb" {
				p := rapid.SampledFrom([][3]int64{{1000, 5000, 5}, {250000, 1000000, 4}}).Draw(t, "gcra")
				spec = append(spec, alg, fmt.Sprint(p[0]), fmt.Sprint(p[1]), fmt.Sprint(p[2]))
				lo = min(lo, p[2])
			} else {
				p := rapid.SampledFrom([][2]int64{{1000000, 5}, {3000, 3}, {7777, 10}}).Draw(t, "window")
				spec = append(spec, alg, fmt.Sprint(p[0]), fmt.Sprint(p[1]), "0")
				lo = min(lo, p[1])
			}
		}
		n := rapid.Int64Range(1, lo+1).Draw(t, "n")
		if rapid.Bool().Draw(t, "peek") {
			return diffCall{"peek", ks, append([]string{ts, fmt.Sprint(n)}, spec...)}
		}
		return diffCall{"multi", ks, append([]string{ts, fmt.Sprint(n), margin}, spec...)}
	case 9, 10: // windowed dedup: the set and the mark of one user key
		k := key("key")
		w := rapid.SampledFrom([]string{"1000", "1000000", "600000000"}).Draw(t, "dedup window")
		e := rapid.SampledFrom([]string{"a", "b", "c", ""}).Draw(t, "element")
		script := "dedup_window_check"
		if e != "" && rapid.Bool().Draw(t, "mark") {
			script = "dedup_window"
		}
		return diffCall{script, []string{k, k + ":mark"}, []string{ts, w, e}}
	case 11:
		ttl := rapid.SampledFrom([]string{"0", "600000"}).Draw(t, "ttl")
		es := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "c"}), 1, 3).Draw(t, "elements")
		return diffCall{"dedup_set", []string{key("key")}, append([]string{ttl}, es...)}
	case 12: // Bloom shard
		k := rapid.IntRange(1, 3).Draw(t, "k")
		args := []string{fmt.Sprint(k)}
		if s := rapid.SampledFrom([]string{"bloom_add", "bloom_exists", "bloom_count"}).Draw(t, "bloom"); s != "bloom_count" {
			// k positions per element, and now and then one too many (bad arguments).
			positions := k*rapid.IntRange(1, 2).Draw(t, "elements") + rapid.IntRange(0, 9).Draw(t, "extra")/9
			for i := 0; i < positions; i++ {
				args = append(args, fmt.Sprint(rapid.IntRange(0, 200).Draw(t, "bit")))
			}
			return diffCall{s, []string{key("key")}, args}
		}
		return diffCall{"bloom_count", []string{key("key")}, nil}
	case 13: // the Java layout's token bucket
		n := rapid.IntRange(1, 6).Draw(t, "n")
		return diffCall{"java_token_bucket", keys(), []string{ts, fmt.Sprint(n), "5", "2.5", "5", "600000"}}
	default: // the Java layout's sliding window: a log and its sequence per user key
		k := key("key")
		n := rapid.IntRange(1, 4).Draw(t, "n")
		return diffCall{"java_sliding_window", []string{k, k + ":seq"}, []string{ts, fmt.Sprint(n), "60000", "3"}}
	}
}

var (
	reSHA        = regexp.MustCompile(`[0-9a-f]{40}`)
	reScriptLine = regexp.MustCompile(`user_script:\d+`)
)

// neutral returns an error reply with the side's key prefix and the script's SHA and line
// numbers (the only things the two texts may differ in) made neutral.
func neutral(err error, prefix string) string {
	s := reSHA.ReplaceAllString(strings.ReplaceAll(err.Error(), prefix, "<p>"), "<sha>")
	return "error: " + reScriptLine.ReplaceAllString(s, "user_script:N")
}

// renderMessage renders a reply for comparison.
func renderMessage(m rueidis.RedisMessage) string {
	if vs, err := m.ToArray(); err == nil {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = renderMessage(v)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	if m.IsInt64() {
		v, _ := m.AsInt64()
		return strconv.FormatInt(v, 10)
	}
	if m.IsNil() {
		return "nil"
	}
	s, err := m.ToString()
	if err != nil {
		return "?" + err.Error()
	}
	return strconv.Quote(s)
}

// TestDifferentialAgainstBaseline runs random call sequences (explicit times, forward and
// backward steps, costs in and out of range, several keys per call, every algorithm on
// every key, and foreign state written between calls) through the committed scripts and
// through the baseline ones on a real redis-server, on two key spaces, and requires the
// same reply for every call and the same stored bytes (DUMP) and expiry for every key after
// it. The two calls of a step run back to back in one MULTI, in alternating order; a key's
// absolute expiry (PEXPIRETIME, ms) may then differ only by the millisecond tick between
// them, in the direction they ran: an expiry one millisecond off in either direction fails
// on about every other step.
func TestDifferentialAgainstBaseline(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	shas := map[string][2]string{} // script -> {baseline, current}
	for _, s := range lua.Scripts() {
		old, err := baseline.ReadFile("testdata/previous/" + s.Name + ".lua")
		if err != nil {
			// A script added after the baseline was taken has nothing to be compared with.
			t.Logf("%s: no baseline in testdata/previous, not compared", s.Name)
			continue
		}
		var pair [2]string
		for i, src := range []string{string(old), s.Source} {
			sha, err := c.Do(ctx, c.B().ScriptLoad().Script(src).Build()).ToString()
			if err != nil {
				t.Fatalf("%s: SCRIPT LOAD: %v", s.Name, err)
			}
			pair[i] = sha
		}
		shas[s.Name] = pair
	}
	// The sequences pass explicit times only (the two sides would read different server
	// times); the clock prelude, which reads TIME for '', must then be the same text.
	for _, s := range lua.Scripts() {
		old, err := baseline.ReadFile("testdata/previous/" + s.Name + ".lua")
		if err != nil {
			continue
		}
		prelude := func(src string) string {
			i := strings.Index(src, "local now\n")
			if i < 0 {
				return ""
			}
			j := strings.Index(src[i:], "\nend\n")
			return src[i : i+j]
		}
		if p := prelude(s.Source); p != prelude(string(old)) {
			t.Errorf("%s: the clock prelude differs from the baseline's:\n%s", s.Name, p)
		}
	}
	// Every key a call may name, per side.
	var all []string
	for _, f := range diffFamilies {
		for _, k := range diffKeys {
			all = append(all, f+k, f+k+":mark", f+k+":seq")
		}
	}
	prefixes := [2]string{"difftest:{o}:", "difftest:{n}:"}
	var calls, errs, foreign, allowed, steps, keysCompared, expiries, tightExpiry int
	perScript, errKinds := map[string]int{}, map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		var del []rueidis.Completed
		for _, p := range prefixes {
			for _, k := range all {
				del = append(del, c.B().Del().Key(p+k).Build())
			}
		}
		for _, r := range c.DoMulti(ctx, del...) {
			if err := r.Error(); err != nil {
				rt.Fatal(err)
			}
		}
		expiry := map[string][2]int64{} // per key, as last compared
		for _, k := range all {
			expiry[k] = [2]int64{-2, -2} // absent
		}
		now := diffBase + rapid.Int64Range(0, 1_000_000).Draw(rt, "start")
		ops := rapid.IntRange(1, 300).Draw(rt, "ops")
		for step := 0; step < ops; step++ {
			steps++
			// Time: mostly forward, sometimes a long gap, sometimes backwards.
			switch rapid.IntRange(0, 9).Draw(rt, "clock") {
			case 0:
				now -= rapid.Int64Range(0, 5_000_000).Draw(rt, "back")
			case 1:
				now += rapid.Int64Range(0, 120_000_000).Draw(rt, "gap")
			default:
				now += rapid.Int64Range(0, 600_000).Draw(rt, "forward")
			}
			if rapid.IntRange(0, 11).Draw(rt, "poke?") == 0 {
				k := rapid.SampledFrom(all).Draw(rt, "poke key")
				poke := rapid.SampledFrom(diffPoke).Draw(rt, "poke")
				for _, p := range prefixes {
					c.Do(ctx, c.B().Del().Key(p+k).Build())
					if poke[0] == "DEL" {
						continue
					}
					cmd := c.B().Arbitrary(poke[0]).Keys(p + k).Args(poke[1:]...).Build()
					if err := c.Do(ctx, cmd).Error(); err != nil {
						rt.Fatalf("poke %v: %v", poke, err)
					}
				}
			}
			call := drawCall(rt, now)
			if _, ok := shas[call.script]; !ok {
				continue
			}
			perScript[call.script]++
			calls++
			order := [2]int{0, 1}
			if step%2 == 1 {
				order = [2]int{1, 0}
			}
			// MULTI, TIME, first side, TIME, second side, TIME, EXEC: the server times
			// around each call bound the clock its PX expiries were taken from.
			cmds := []rueidis.Completed{c.B().Multi().Build(), c.B().Time().Build()}
			for _, side := range order {
				keys := make([]string, len(call.keys))
				for i, k := range call.keys {
					keys[i] = prefixes[side] + k
				}
				cmds = append(cmds, c.B().Evalsha().Sha1(shas[call.script][side]).Numkeys(int64(len(keys))).Key(keys...).Arg(call.args...).Build(), c.B().Time().Build())
			}
			cmds = append(cmds, c.B().Exec().Build())
			res := c.DoMulti(ctx, cmds...)
			exec, err := res[len(res)-1].ToArray()
			if err != nil || len(exec) != 5 {
				rt.Fatalf("EXEC: %v %v", exec, err)
			}
			var clock [3]int64 // ms
			for i := range clock {
				tv, err := exec[2*i].AsStrSlice()
				if err != nil || len(tv) != 2 {
					rt.Fatalf("TIME: %v %v", tv, err)
				}
				sec, _ := strconv.ParseInt(tv[0], 10, 64)
				usec, _ := strconv.ParseInt(tv[1], 10, 64)
				clock[i] = sec*1000 + usec/1000
			}
			exec = []rueidis.RedisMessage{exec[1], exec[3]}
			var got [2]string
			for i, side := range order {
				if e := exec[i].Error(); e != nil {
					got[side] = neutral(e, prefixes[side])
				} else {
					got[side] = renderMessage(exec[i])
				}
			}
			if got[0] != got[1] {
				rt.Fatalf("%s %v %v: baseline replied %s, current %s", call.script, call.keys, call.args, got[0], got[1])
			}
			switch {
			case strings.Contains(got[0], "foreign state"):
				foreign++
			case strings.HasPrefix(got[0], "error"):
				errs++
				errKinds[got[0][:min(len(got[0]), 60)]]++
			case strings.HasPrefix(got[0], "[1 "):
				allowed++
			}
			// Every key's bytes and expiry on both sides.
			var reads []rueidis.Completed
			for _, k := range all {
				for _, p := range prefixes {
					reads = append(reads, c.B().Dump().Key(p+k).Build(), c.B().Pexpiretime().Key(p+k).Build())
				}
			}
			rs := c.DoMulti(ctx, reads...)
			for i, k := range all {
				r := rs[4*i : 4*i+4]
				var dump [2]string
				var exp [2]int64
				for side := 0; side < 2; side++ {
					d, err := r[2*side].ToString()
					if err != nil && !rueidis.IsRedisNil(err) {
						rt.Fatalf("DUMP %s: %v", k, err)
					}
					dump[side] = d
					if exp[side], err = r[2*side+1].AsInt64(); err != nil {
						rt.Fatalf("PEXPIRETIME %s: %v", k, err)
					}
				}
				keysCompared++
				if dump[0] != dump[1] {
					rt.Fatalf("after %s %v %v: key %s holds %q (baseline) and %q (current)", call.script, call.keys, call.args, k, dump[0], dump[1])
				}
				// An expiry set by this step (one left alone was compared when set): the two
				// sides' PX must be able to be equal, given that the side that ran first took
				// its clock in [clock[0], clock[1]] and the other in [clock[1], clock[2]].
				if exp == expiry[k] {
					continue
				}
				expiry[k] = exp
				expiries++
				if exp[0] < 0 || exp[1] < 0 {
					if exp[0] != exp[1] {
						rt.Fatalf("after %s %v %v: key %s expiry %d (baseline), %d (current)", call.script, call.keys, call.args, k, exp[0], exp[1])
					}
					continue
				}
				first, second := exp[order[0]], exp[order[1]]
				// px of the first side in [first - clock[1], first - clock[0]], of the second
				// in [second - clock[2], second - clock[1]].
				if first-clock[0] < second-clock[2] || second-clock[1] < first-clock[1] {
					rt.Fatalf("after %s %v %v: key %s expires at %d ms (baseline) and %d ms (current): not the same PX (server clock %v, %s ran first)",
						call.script, call.keys, call.args, k, exp[0], exp[1], clock, [2]string{"baseline", "current"}[order[0]])
				}
				if clock[2]-clock[0] <= 1 {
					tightExpiry++
				}
			}
		}
	})
	names := make([]string, 0, len(perScript))
	for s := range perScript {
		names = append(names, s)
	}
	sort.Strings(names)
	var per []string
	for _, s := range names {
		per = append(per, fmt.Sprintf("%s %d", s, perScript[s]))
	}
	t.Logf("%d calls in %d steps, replies equal; %d admitted, %d foreign-state errors, %d other errors; %d key comparisons (DUMP) equal; %d expiries set and equal (%d of them within a server clock span of <= 1 ms, so to the millisecond); per script: %s",
		calls, steps, allowed, foreign, errs, keysCompared, expiries, tightExpiry, strings.Join(per, ", "))
	t.Logf("other errors: %v", errKinds)
	for s := range shas {
		if perScript[s] == 0 {
			t.Errorf("%s has a baseline but the sequences never call it", s)
		}
	}
	if foreign == 0 || allowed == 0 || errs == 0 {
		t.Errorf("the sequences never reached a path: %d admitted, %d foreign, %d errors", allowed, foreign, errs)
	}
}
