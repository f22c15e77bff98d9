// Package wasmcore runs redstream's algorithms (package core) compiled to WebAssembly, hosted
// by wazero, and offers engines on top of them: [Limiter] (one limit or, by
// [NewMultiLimiter], several all-or-nothing) for every redstream.Algorithm and [Deduplicator]
// for every redstream.DedupStrategy, implementing the contracts of package redstream. They give exactly the answers of package memory (the
// conformance suites of package proptest prove both equal to core); what they add is that
// the algorithms run from one portable module, the same bytes another runtime embeds.
//
// # The module
//
// [Module] returns the embedded module, core.wasm: wasmcore/internal/wasmguest built with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -ldflags="-s -w"
//
// by go generate (reproducible: the same Go version, [ModuleGoVersion], rebuilds the same
// bytes, [ModuleSHA256]). It is a WASI reactor: instantiate it with the
// wasi_snapshot_preview1 imports and call its _initialize export once. Every algorithm step
// is one export taking its parameters and the key's state as arguments; the result comes
// back as a status code plus 16 int64 slots in guest memory. ABI.md, next to this file,
// documents every export for embedders in Node.js, browsers, wasmtime or Envoy; the Node.js
// package in js/ loads it with its own WASI imports, and examples/node runs the committed
// test vectors through that package.
//
// # Instances and state
//
// A wasm instance is not safe for concurrent use. A [Runtime] compiles the module once per
// process (through a compilation cache; Config.CacheDir keeps it on disk across processes)
// and keeps a fixed pool of Config.Instances instances (default GOMAXPROCS), created on first
// use; each decision takes an instance, calls one step and gives it back, waiting while all
// are busy. An instance that traps or misbehaves is closed and its slot refilled with a fresh
// instance; the failed call returns an error wrapping [ErrTrapped] and changes no state. Bad
// input never traps: it comes back as the documented status and then as the core sentinel
// error (ErrInvalidCost, ErrCostTooLarge, ErrInvalidTime, ErrInvalidConfig).
//
// The guest keeps no state between calls, so any instance serves any key: the engines keep
// every key's state on the host, in sharded maps, and pass it in and out of each step. A
// trapped instance therefore loses nothing.
//
// Engines whose Options.Runtime is nil share the process-wide [Default] Runtime.
package wasmcore
