package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redstream-go/redstream/wasmcore"
)

func TestWasmCommand(t *testing.T) {
	ctx := context.Background()
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "core.wasm")
		var out bytes.Buffer
		if err := runWasm(ctx, []string{"-o", path}, &out); err != nil {
			t.Fatalf("wasm -o: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wasmcore.Module()) {
			t.Fatalf("wrote %d bytes that differ from the embedded module (%d bytes)", len(got), len(wasmcore.Module()))
		}
		if !strings.Contains(out.String(), wasmcore.ModuleSHA256) || !strings.Contains(out.String(), "ABI version 2") {
			t.Fatalf("report lacks the digest or the ABI version: %q", out.String())
		}
	})
	t.Run("stdout", func(t *testing.T) {
		var out bytes.Buffer
		if err := runWasm(ctx, []string{"-o", "-"}, &out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), wasmcore.Module()) {
			t.Fatal("-o - did not write exactly the module")
		}
	})
	for _, args := range [][]string{{"-o", ""}, {"extra"}, {"-x"}, {"-o", filepath.Join(t.TempDir(), "missing", "dir", "core.wasm")}} {
		t.Run("bad "+strings.Join(args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if err := runWasm(ctx, args, &out); err == nil {
				t.Fatalf("wasm %v succeeded", args)
			}
		})
	}
}
