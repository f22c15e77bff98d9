package wasmcore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestModuleMatchesInfo checks the embedded module against the digest recorded with it.
func TestModuleMatchesInfo(t *testing.T) {
	sum := sha256.Sum256(module)
	if got := hex.EncodeToString(sum[:]); got != ModuleSHA256 || len(module) != moduleSize {
		t.Fatalf("core.wasm has digest %s and %d bytes; module_gen.go records %s and %d: run cd wasmcore && go generate ./...",
			got, len(module), ModuleSHA256, moduleSize)
	}
	if got := Module(); !bytes.Equal(got, module) || &got[0] == &module[0] {
		t.Fatal("Module() must return a copy of the embedded module")
	}
}

// TestGeneratedUpToDate rebuilds the module and the vectors with wasmcore/internal/wasmgen -check and
// fails if the committed files differ. The module is compared only when this Go version
// built it (wasmcore/internal/wasmgen says SKIP otherwise); go test -short skips the rebuild.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds the module; skipped with -short")
	}
	if runtime.Version() != ModuleGoVersion {
		t.Logf("core.wasm was built with %s, this is %s: only the vectors are compared", ModuleGoVersion, runtime.Version())
	}
	goBin := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goBin = filepath.Join(root, "bin", "go")
	}
	cmd := exec.Command(goBin, "run", "./internal/wasmgen", "-check",
		"-module", "core.wasm", "-info", "module_gen.go", "-vectors", "../examples/node/vectors.json")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wasmcore/internal/wasmgen -check: %v\n%s", err, out)
	}
	if len(out) > 0 {
		t.Logf("%s", out)
	}
}
