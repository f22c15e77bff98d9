package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/redstream-go/redstream/core"
)

// TestGeneratedUpToDate regenerates the package's files and fails when a committed one
// differs (go generate ./tools/jsgen/ rewrites them).
func TestGeneratedUpToDate(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("generate returned %d files, want 5", len(files))
	}
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join("../../js", filepath.FromSlash(f.path)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(old, f.data) {
			t.Errorf("js/%s is stale: run go generate ./tools/jsgen/ and commit the result", f.path)
		}
	}
}

func TestCalls(t *testing.T) {
	gcra := ""
	for sha, name := range scriptNames {
		if name == "gcra" && len(sha) == 40 {
			gcra = sha
		}
	}
	got, err := calls([][]string{
		{"EVALSHA", gcra, "1", "k", "a", "b"},
		{"EVAL", gcra, "1", "k", "a", "b"}, // the retry of the same call
		{"SCRIPT", "LOAD", "x"},
		{"EVALSHA_RO", gcra, "0"},
		{"DEL", "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Script: "gcra", Keys: []string{"k"}, Args: []string{"a", "b"}},
		{Script: "gcra", Keys: []string{}, Args: []string{}},
		{Command: []string{"DEL", "k"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %+v, want %+v", got, want)
	}
	if _, err := calls([][]string{{"EVALSHA", "0000", "0"}}); err == nil {
		t.Fatal("a call of an unknown script: no error")
	}
}

// TestShapeNames ranges over core's registry: every algorithm's shape has a TypeScript
// name, so algorithmsFile writes every row.
func TestShapeNames(t *testing.T) {
	for _, a := range core.Algorithms() {
		if _, ok := shapeNames[a.Shape]; !ok {
			t.Errorf("algorithm %q: shape %d has no TypeScript name in shapeNames", a.Name, a.Shape)
		}
	}
}
