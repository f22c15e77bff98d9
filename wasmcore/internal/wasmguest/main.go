//go:build !wasip1

// Command wasmguest is redstream's core compiled to a WebAssembly module: a WASI reactor
// whose exports are documented in wasmcore/ABI.md. It is meant to be built with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -ldflags=-s\ -w -o core.wasm ./wasmcore/internal/wasmguest
//
// (go generate ./... in wasmcore does exactly that). Built for any other platform it only says so.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "wasmguest: build with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared (see go generate ./... in wasmcore)")
	os.Exit(2)
}
