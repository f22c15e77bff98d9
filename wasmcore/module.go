package wasmcore

import (
	_ "embed"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

//go:generate go run ./internal/wasmgen -module core.wasm -info module_gen.go -vectors ../examples/node/vectors.json

// module is the redstream core module, built from wasmcore/internal/wasmguest by go generate.
//
//go:embed core.wasm
var module []byte

// ABIVersion is the ABI version of the embedded module (its redstream_abi_version export).
const ABIVersion = wasmabi.Version

// Module returns a copy of the embedded WebAssembly module: redstream's core compiled for
// GOOS=wasip1 GOARCH=wasm as a WASI reactor, described in ABI.md. Write it to a file to
// embed the cores in another runtime (Node.js, browsers, wasmtime, Envoy).
func Module() []byte { return append([]byte(nil), module...) }

var errInvalidConfig = redstream.ErrInvalidConfig
