package lua_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/luagen"
	"github.com/redstream-go/redstream/internal/lualint"
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

// TestContracts: every script is generated, then headed by its name and its
// KEYS/ARGV/reply contract.
func TestContracts(t *testing.T) {
	for _, s := range lua.Scripts() {
		t.Run(s.Name, func(t *testing.T) {
			first, rest, _ := strings.Cut(s.Source, "\n")
			if want := luagen.Header("src/" + s.Name + ".lua"); first != want {
				t.Errorf("first line %q, want %q", first, want)
			}
			if !strings.HasPrefix(rest, "-- "+s.Name+".lua: ") {
				t.Errorf("contract does not start with %q", "-- "+s.Name+".lua: ")
			}
			for _, want := range []string{"-- KEYS", "-- ARGV[", "-- Reply:"} {
				if !strings.Contains(s.Source, want) {
					t.Errorf("contract lacks %q", want)
				}
			}
		})
	}
}

// TestGeneratedUpToDate fails when a committed script differs from what its source in src/
// assembles to: run `go generate ./lua/...`.
func TestGeneratedUpToDate(t *testing.T) {
	src := os.DirFS("src")
	for _, s := range lua.Scripts() {
		want, err := luagen.Assemble(src, s.Name+".lua", "src/"+s.Name+".lua")
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if string(want) != s.Source {
			t.Errorf("%s.lua is stale; run go generate ./lua/...", s.Name)
		}
	}
	stale, err := luagen.Generate("src", ".", true)
	if err != nil || len(stale) != 0 {
		t.Errorf("luagen -check: stale %v, %v", stale, err)
	}
}

// TestSharedSources: each algorithm, the clock prelude and the helpers are written once, in
// src/; the scripts that use them include them rather than restate them.
func TestSharedSources(t *testing.T) {
	entries, err := filepath.Glob("src/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, restated := range []string{"redis.call('TIME')", "local function quo", "local function pexpire", "local function gcra", "local function sliding_log"} {
			if strings.Contains(string(b), restated) {
				t.Errorf("%s restates %q; include the fragment instead", e, restated)
			}
		}
	}
	uses := map[string]int{}
	for _, s := range lua.Scripts() {
		for _, frag := range []string{"local now\n", "local function gcra(", "local function sliding_log(", "local function sliding_counter(", "local function fixed_window(", "local function foreign(", "local function decided(", "local function sane(", "local function guard("} {
			if strings.Contains(s.Source, frag) {
				uses[frag]++
			}
		}
	}
	for frag, want := range map[string]int{"local now\n": 15, "local function gcra(": 6, "local function sliding_log(": 5, "local function sliding_counter(": 6, "local function fixed_window(": 6, "local function foreign(": 18, "local function decided(": 9, "local function sane(": 11, "local function guard(": 8} {
		if uses[frag] != want {
			t.Errorf("%q is in %d generated scripts, want %d", frag, uses[frag], want)
		}
	}
}

// TestNoUnusedFunctions: every function a generated script defines at its top level is
// used in it. A script-level function statement allocates a closure on every call of the
// script, so a fragment included for a helper the script never calls costs every decision.
func TestNoUnusedFunctions(t *testing.T) {
	def := regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z_0-9]*)\(`)
	for _, s := range lua.Scripts() {
		code := lualint.Code(s.Source)
		for _, m := range def.FindAllStringSubmatch(code, -1) {
			uses := regexp.MustCompile(`\b`+m[1]+`\b`).FindAllStringIndex(code, -1)
			if len(uses) < 2 {
				t.Errorf("%s.lua defines %s and never uses it", s.Name, m[1])
			}
		}
	}
}

// TestLint applies the repository's Lua rules (internal/lualint) to the embedded scripts.
func TestLint(t *testing.T) {
	for _, s := range lua.Scripts() {
		for _, f := range lualint.Check(s.Name+".lua", []byte(s.Source), lualint.Options{Contract: true}) {
			t.Errorf("%s.lua:%s", s.Name, f)
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
		{scriptSource("gcra"), []string{"k"}, []string{"-1", "1", "1000", "5000", "5", "1000", "0"}, "gcra: now out of range"},
		{scriptSource("gcra"), []string{"k"}, []string{"4503599627370497", "1", "1000", "5000", "5", "1000", "0"}, "gcra: now out of range"},
		{scriptSource("gcra"), []string{"k"}, []string{"1", "6", "1000", "5000", "5", "1000", "1"}, "gcra: cost out of range"},
		{scriptSource("sliding_log"), []string{"k"}, []string{"1", "0", "1000", "5", "1000"}, "sliding_log: cost out of range"},
		{scriptSource("sliding_counter"), []string{"k"}, []string{"x", "1", "1000", "5", "1000"}, "sliding_counter: now out of range"},
		{scriptSource("fixed_window"), []string{"k"}, []string{"1", "9", "1000", "5", "1000"}, "fixed_window: cost out of range"},
		{scriptSource("multi"), []string{"k"}, []string{"1", "1", "1000", "zz", "1", "1", "1"}, "multi: unknown algorithm"},
		{scriptSource("multi"), []string{"k"}, []string{"1", "1", "1000"}, "multi: bad arguments"},
		{scriptSource("dedup_window"), []string{"{d}z", "{d}m"}, []string{"1", "0", "e"}, "dedup_window: window out of range"},
		{scriptSource("bloom_add"), []string{"b"}, []string{"3", "1", "2"}, "bloom_add: bad arguments"},
		{scriptSource("bloom_exists"), []string{"b"}, []string{"inf"}, "bloom_exists: bad arguments"},
		{scriptSource("dedup_window_check"), []string{"{d}z", "{d}m"}, []string{"1", "2251799813685249", ""}, "dedup_window_check: window out of range"},
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
		vs, err := c.Do(ctx, c.B().Eval().Script(scriptSource("gcra")).Numkeys(1).Key(key).Arg(args...).Build()).AsIntSlice()
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

// scriptSource returns the source of package lua's script name.
func scriptSource(name string) string {
	for _, s := range lua.Scripts() {
		if s.Name == name {
			return s.Source
		}
	}
	panic("no script " + name)
}

// TestDispatchIsTheRegistry: multi.lua and peek.lua decide exactly the algorithms of core's
// registry (lua.Script.Algorithms, generated with their dispatch).
func TestDispatchIsTheRegistry(t *testing.T) {
	var want []string
	for _, a := range core.Algorithms() {
		want = append(want, a.Name)
	}
	for _, name := range []string{"multi", "peek"} {
		for _, s := range lua.Scripts() {
			if s.Name == name && !slices.Equal(s.Algorithms, want) {
				t.Errorf("%s decides %v, want the registry's %v (run go generate ./lua/...)", name, s.Algorithms, want)
			}
		}
	}
}
