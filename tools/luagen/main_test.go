package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/redstream-go/redstream/internal/luagen"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	stale := "-- a.lua\n-- BEGIN luagen\nlocal MAX_TIME = 1\n-- END luagen\nreturn 1\n"
	unmarked := "return 2\n"
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.lua", stale)
	write("b.lua", unmarked)

	got, err := run(dir, true)
	if err != nil || !slices.Equal(got, []string{"a.lua"}) {
		t.Fatalf("check: %v, %v; want [a.lua]", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.lua")); string(b) != stale {
		t.Fatal("-check wrote the file")
	}
	if got, err := run(dir, false); err != nil || !slices.Equal(got, []string{"a.lua"}) {
		t.Fatalf("generate: %v, %v", got, err)
	}
	want, _, _ := luagen.Rewrite([]byte(stale))
	if b, _ := os.ReadFile(filepath.Join(dir, "a.lua")); string(b) != string(want) {
		t.Errorf("a.lua after generate:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.lua")); string(b) != unmarked {
		t.Error("an unmarked script was rewritten")
	}
	if got, err := run(dir, true); err != nil || len(got) != 0 {
		t.Errorf("check after generate: %v, %v; want nothing stale", got, err)
	}
	write("c.lua", "-- BEGIN luagen\nno end marker\n")
	if _, err := run(dir, false); err == nil {
		t.Error("a script without an END marker was accepted")
	}
}
