package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(filepath.Join(src, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a.lua"), []byte("-- a.lua: a.\n--@include lib/f.lua\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "lib", "f.lua"), []byte("return 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(src, dir, true); got != 1 {
		t.Errorf("check with a missing script: exit %d, want 1", got)
	}
	if got := run(src, dir, false); got != 0 {
		t.Errorf("generate: exit %d, want 0", got)
	}
	if got := run(src, dir, true); got != 0 {
		t.Errorf("check after generate: exit %d, want 0", got)
	}
	if got := run(filepath.Join(dir, "none"), dir, false); got != 2 {
		t.Errorf("no sources: exit %d, want 2", got)
	}
}
