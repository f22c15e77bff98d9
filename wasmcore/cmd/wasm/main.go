// Command wasm writes redstream's core WebAssembly module (the one package wasmcore embeds;
// ABI in wasmcore/ABI.md) to a file, for runtimes other than Go:
//
//	go run github.com/redstream-go/redstream/wasmcore/cmd/wasm -o core.wasm
//	go run github.com/redstream-go/redstream/wasmcore/cmd/wasm -o - > core.wasm
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/redstream-go/redstream/wasmcore"
)

func main() {
	if err := runWasm(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wasm:", err)
		os.Exit(1)
	}
}

// runWasm writes the embedded core module to a file (-o, default core.wasm) or, with -o -,
// to out, and reports its size, digest and ABI version.
func runWasm(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("wasm", flag.ContinueOnError)
	fs.SetOutput(out)
	path := fs.String("o", "core.wasm", "file to write the module to; - writes it to standard output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("wasm: unexpected arguments %v", fs.Args())
	}
	if *path == "" {
		return errors.New("wasm: -o needs a file name (or - for standard output)")
	}
	wasm := wasmcore.Module()
	if *path == "-" {
		_, err := out.Write(wasm)
		return err
	}
	if err := os.WriteFile(*path, wasm, 0o644); err != nil {
		return fmt.Errorf("wasm: %w", err)
	}
	fmt.Fprintf(out, "wrote %s: %d bytes, sha256 %x, ABI version %d, built with %s\n",
		*path, len(wasm), sha256.Sum256(wasm), wasmcore.ABIVersion, wasmcore.ModuleGoVersion)
	fmt.Fprintln(out, "load it as a WASI preview1 reactor and call _initialize first; exports: see wasmcore/ABI.md")
	return nil
}
