package luagen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/redstream-go/redstream/core"
)

func TestAssemble(t *testing.T) {
	src := fstest.MapFS{
		"s.lua": {Data: []byte("-- s.lua: a script.\n-- KEYS none\n-- Reply: 1\n\n--@include lib/p.lua\nreturn now\n")},
		"lib/p.lua": {Data: []byte("-- p.lua: the fragment's documentation, dropped.\n--@constants\n" +
			"-- kept: a comment of the code\nlocal now = MAX_TIME\nif not now then return redis.error_reply('ERR {{script}}: bad') end\n")},
	}
	got, err := Assemble(src, "s.lua", "src/s.lua")
	if err != nil {
		t.Fatal(err)
	}
	want := Header("src/s.lua") + "\n" +
		"-- s.lua: a script.\n-- KEYS none\n-- Reply: 1\n\n" +
		"-- Constants from package core (internal/luagen.Constants).\n" +
		"local MAX_TIME = 4503599627370496 -- core.MaxTime\n" +
		"-- kept: a comment of the code\nlocal now = MAX_TIME\nif not now then return redis.error_reply('ERR s: bad') end\n\n" +
		"return now\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestAssembleErrors(t *testing.T) {
	tests := []struct {
		name string
		src  fstest.MapFS
		want string
	}{
		{"missing fragment", fstest.MapFS{"s.lua": {Data: []byte("--@include lib/none.lua\n")}}, "include lib/none.lua"},
		{"unknown directive", fstest.MapFS{"s.lua": {Data: []byte("--@inclde lib/p.lua\n")}}, "unknown directive"},
		{"cycle", fstest.MapFS{"s.lua": {Data: []byte("--@include lib/a.lua\n")}, "lib/a.lua": {Data: []byte("--@include lib/a.lua\n")}}, "nested deeper"},
		{"unknown template", fstest.MapFS{"s.lua": {Data: []byte("return '{{name}}'\n")}}, "unknown template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Assemble(tt.src, "s.lua", "src/s.lua")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestConstantLines: only the constants the code names, with their values from core.
func TestConstantLines(t *testing.T) {
	got := string(ConstantLines("local x = MICROS_PER_SECOND + KEY_TTL_MARGIN"))
	want := "local MICROS_PER_SECOND = 1000000 -- core.Second\nlocal KEY_TTL_MARGIN = 60000000 -- corekit.KeyTTLMargin\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := ConstantLines("local MAX_TIMES = 1"); len(got) != 0 {
		t.Errorf("a longer name matched: %s", got)
	}
}

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	srcDir, outDir := filepath.Join(dir, "src"), dir
	write := func(name, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(srcDir, "a.lua"), "-- a.lua: a.\n--@include lib/f.lua\n")
	write(filepath.Join(srcDir, "lib", "f.lua"), "return 1\n")
	stale, err := Generate(srcDir, outDir, true)
	if err != nil || strings.Join(stale, " ") != "a.lua "+goFile {
		t.Fatalf("check before generating: %v, %v; want [a.lua %s]", stale, err, goFile)
	}
	if _, err := os.Stat(filepath.Join(outDir, "a.lua")); err == nil {
		t.Fatal("check wrote the script")
	}
	if stale, err := Generate(srcDir, outDir, false); err != nil || len(stale) != 2 {
		t.Fatalf("generate: %v, %v", stale, err)
	}
	if g, err := os.ReadFile(filepath.Join(outDir, goFile)); err != nil || !strings.Contains(string(g), "//go:embed a.lua\n\ta string") {
		t.Fatalf("%s: %q, %v", goFile, g, err)
	}
	b, err := os.ReadFile(filepath.Join(outDir, "a.lua"))
	if err != nil || string(b) != Header("src/a.lua")+"\n-- a.lua: a.\n\nreturn 1\n" {
		t.Fatalf("generated %q, %v", b, err)
	}
	if stale, err := Generate(srcDir, outDir, true); err != nil || len(stale) != 0 {
		t.Errorf("check after generating: %v, %v; want nothing stale", stale, err)
	}
	write(filepath.Join(outDir, "a.lua"), "edited by hand\n")
	if stale, _ := Generate(srcDir, outDir, true); strings.Join(stale, " ") != "a.lua" {
		t.Errorf("a hand-edited script is not reported: %v", stale)
	}
	write(filepath.Join(outDir, "orphan.lua"), "return 2\n")
	if _, err := Generate(srcDir, outDir, false); err == nil || !strings.Contains(err.Error(), "orphan.lua") {
		t.Errorf("a script without a source: err = %v", err)
	}
}

// TestAlgorithmsCoverTheRegistry ranges over core's registry: the --@algorithms expansion
// includes every algorithm's fragment and dispatches its code to its Lua function, and a
// shape without Lua arguments is an error, not a silent window.
func TestAlgorithmsCoverTheRegistry(t *testing.T) {
	src, err := Algorithms(core.Algorithms())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range core.Algorithms() {
		for _, want := range []string{include + "algo/" + a.Lua + ".lua", "if alg == '" + a.Code + "' then return true,", "if alg == '" + a.Code + "' then return decided(" + a.Lua + ", key,"} {
			if !strings.Contains(src, want) {
				t.Errorf("%s: the expansion lacks %q", a.Name, want)
			}
		}
		if _, ok := shapeArgs[a.Shape]; !ok {
			t.Errorf("%s: shape %d has no Lua arguments", a.Name, a.Shape)
		}
	}
	if _, err := Algorithms([]core.Algorithm{{Name: "odd", Shape: core.Shape(99), Code: "od", Lua: "odd"}}); err == nil {
		t.Error("an unknown shape was accepted")
	}
}
