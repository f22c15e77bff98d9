package lua_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/luagen"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/lua"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestScriptsListsEveryFile: Scripts() covers every .lua file of the package, by name.
func TestScriptsListsEveryFile(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range lua.Scripts() {
		names = append(names, s.Name+".lua")
		src, err := os.ReadFile(s.Name + ".lua")
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if string(src) != s.Source {
			t.Errorf("%s: embedded source differs from the file", s.Name)
		}
	}
	sort.Strings(files)
	sort.Strings(names)
	if strings.Join(files, " ") != strings.Join(names, " ") {
		t.Errorf("files %v, Scripts() %v", files, names)
	}
}

// TestContracts: every script is headed by its name and its KEYS/ARGV/reply contract.
func TestContracts(t *testing.T) {
	for _, s := range lua.Scripts() {
		t.Run(s.Name, func(t *testing.T) {
			if !strings.HasPrefix(s.Source, "-- "+s.Name+".lua: ") {
				t.Errorf("does not start with %q", "-- "+s.Name+".lua: ")
			}
			head := s.Source[:strings.Index(s.Source, "\n\n")+1]
			for _, want := range []string{"-- KEYS", "-- ARGV[", "-- Reply:"} {
				if !strings.Contains(s.Source, want) {
					t.Errorf("contract lacks %q", want)
				}
			}
			if head == "" {
				t.Error("no header paragraph")
			}
		})
	}
}

// TestGeneratedUpToDate fails when a script's luagen region is stale: run
// `go generate ./lua/...`.
func TestGeneratedUpToDate(t *testing.T) {
	marked := 0
	for _, s := range lua.Scripts() {
		out, ok, err := luagen.Rewrite([]byte(s.Source))
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if !ok {
			continue
		}
		marked++
		if string(out) != s.Source {
			t.Errorf("%s.lua: generated constants are stale; run go generate ./lua/...", s.Name)
		}
	}
	if marked < 6 {
		t.Errorf("only %d scripts carry generated constants, want every script that reads the clock", marked)
	}
}

// TestLint enforces the package's Lua rules on the source text.
func TestLint(t *testing.T) {
	rules := []struct {
		re  *regexp.Regexp
		why string
	}{
		{regexp.MustCompile(`\btostring\s*\(`), "tostring prints large numbers as 1.7e+15; use string.format('%d', x)"},
		{regexp.MustCompile(`math\.(floor|ceil)\s*\(`), "floor/ceil of a float quotient can be off by one; use math.fmod"},
	}
	assign := regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z_0-9]*)\s*=[^=]`)
	local := regexp.MustCompile(`\blocal\s+(function\s+)?([a-zA-Z_][a-zA-Z_0-9 ,]*)`)
	for _, s := range lua.Scripts() {
		declared := map[string]bool{}
		for _, line := range strings.Split(s.Source, "\n") {
			for _, m := range local.FindAllStringSubmatch(line, -1) {
				for _, name := range strings.Split(m[2], ",") {
					declared[strings.TrimSpace(name)] = true
				}
			}
			if lhs, rhs, ok := multiAssign(line); ok {
				for _, name := range lhs {
					if regexp.MustCompile(`\b` + name + `\b`).MatchString(rhs) {
						t.Errorf("%s.lua: %q reads %s, which it also assigns: gopher-lua (miniredis) assigns left to right; use a temporary", s.Name, strings.TrimSpace(line), name)
					}
				}
			}
			if m := assign.FindStringSubmatch(line); m != nil && !declared[m[1]] {
				t.Errorf("%s.lua: %q assigns the global %s; declare it local", s.Name, strings.TrimSpace(line), m[1])
			}
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			for _, r := range rules {
				if r.re.MatchString(line) {
					t.Errorf("%s.lua: %q: %s", s.Name, strings.TrimSpace(line), r.why)
				}
			}
		}
	}
}

// TestCompileOnRealRedis loads every script into a real redis-server (SCRIPT LOAD compiles
// it with Redis's own Lua 5.1) and checks the SHA-1 the client computes.
func TestCompileOnRealRedis(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	for _, s := range lua.Scripts() {
		sha, err := c.Do(ctx, c.B().ScriptLoad().Script(s.Source).Build()).ToString()
		if err != nil {
			t.Errorf("%s: SCRIPT LOAD: %v", s.Name, err)
			continue
		}
		if len(sha) != 40 {
			t.Errorf("%s: SHA %q", s.Name, sha)
		}
	}
}

// TestErrorReplies: malformed arguments are error replies naming the script, on real Redis
// and on miniredis.
func TestErrorReplies(t *testing.T) {
	m := miniredis.RunT(t)
	mini, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mini.Close)
	ctx := context.Background()
	tests := []struct {
		src  string
		keys []string
		args []string
		want string
	}{
		{lua.GCRA, []string{"k"}, []string{"-1", "1", "1000", "5000", "5", "1000", "0"}, "gcra: now out of range"},
		{lua.GCRA, []string{"k"}, []string{"4503599627370497", "1", "1000", "5000", "5", "1000", "0"}, "gcra: now out of range"},
		{lua.GCRA, []string{"k"}, []string{"1", "6", "1000", "5000", "5", "1000", "1"}, "gcra: cost out of range"},
		{lua.SlidingLog, []string{"k"}, []string{"1", "0", "1000", "5", "1000"}, "sliding_log: cost out of range"},
		{lua.SlidingCounter, []string{"k"}, []string{"x", "1", "1000", "5", "1000"}, "sliding_counter: now out of range"},
		{lua.FixedWindow, []string{"k"}, []string{"1", "9", "1000", "5", "1000"}, "fixed_window: cost out of range"},
		{lua.Multi, []string{"k"}, []string{"1", "1", "1000", "zz", "1", "1", "1"}, "multi: unknown algorithm"},
		{lua.Multi, []string{"k"}, []string{"1", "1", "1000"}, "multi: bad arguments"},
		{lua.DedupWindow, []string{"{d}z", "{d}m"}, []string{"1", "0", "e"}, "dedup_window: window out of range"},
		{lua.BloomAdd, []string{"b"}, []string{"3", "1", "2"}, "bloom_add: bad arguments"},
	}
	for _, c := range []struct {
		name   string
		client func() rueidis.Client
	}{{"miniredis", func() rueidis.Client { return mini }}, {"redis", func() rueidis.Client { return redistest.Client(t) }}} {
		t.Run(c.name, func(t *testing.T) {
			cl := c.client()
			for _, tt := range tests {
				err := cl.Do(ctx, cl.B().Eval().Script(tt.src).Numkeys(int64(len(tt.keys))).Key(tt.keys...).Arg(tt.args...).Build()).Error()
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("args %v: err = %v, want one containing %q", tt.args, err, tt.want)
				}
			}
		})
	}
}

// TestTokenBucketReply runs gcra.lua as a token bucket directly: a reply in core's units.
func TestTokenBucketReply(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	key := "lua-test:{tb}:" + t.Name()
	c.Do(ctx, c.B().Del().Key(key).Build())
	// capacity 5, 1/s: T = 1e6 µs, tau = 5e6 µs; now = 2026-01-01 (µs, above 2^50).
	args := []string{"1767225600000000", "5", "1000000", "5000000", "5", "1000", "0"}
	run := func() []int64 {
		vs, err := c.Do(ctx, c.B().Eval().Script(lua.GCRA).Numkeys(1).Key(key).Arg(args...).Build()).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	if got, want := run(), []int64{1, 5, 0, 0, 5000000, 0}; !equal(got, want) {
		t.Errorf("first reply %v, want %v", got, want)
	}
	if got, want := run(), []int64{0, 5, 0, 5000000, 5000000, 0}; !equal(got, want) {
		t.Errorf("second reply %v, want %v", got, want)
	}
	stored, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	if err != nil || stored != "1767225605000000" {
		t.Errorf("stored TAT %q, %v; want the exact integer 1767225605000000", stored, err)
	}
}

// multiAssign splits "a, b = x, y" (not a local declaration) into its targets and values.
func multiAssign(line string) (lhs []string, rhs string, ok bool) {
	l, r, found := strings.Cut(line, "=")
	if !found || strings.HasPrefix(r, "=") || strings.ContainsAny(l, "<>~(") || !strings.Contains(l, ",") {
		return nil, "", false
	}
	l = strings.TrimSpace(l)
	if strings.HasPrefix(l, "local ") {
		return nil, "", false
	}
	for _, n := range strings.Split(l, ",") {
		lhs = append(lhs, strings.TrimSpace(n))
	}
	return lhs, r, true
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
