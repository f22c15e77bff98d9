package wasmcore

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	defaultConfig.CacheDir = TestCacheDir // the examples use the default Runtime
	goleak.VerifyTestMain(m)
}

// TestCacheDir is the compilation cache of every Runtime the tests create: compiling the
// module takes about a second, but half a minute under the race detector, so the compiled
// code is kept between test runs. Empty (an in-memory cache) when there is no user cache
// directory.
var TestCacheDir = func() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "redstream", "wasmcore-test")
}()

var (
	sharedRT     *Runtime
	sharedRTErr  error
	sharedRTOnce sync.Once
)

// testRuntime returns a Runtime shared by the tests of this binary.
func testRuntime(t testing.TB) *Runtime {
	t.Helper()
	sharedRTOnce.Do(func() {
		sharedRT, sharedRTErr = NewRuntime(context.Background(), Config{Instances: 4, CacheDir: TestCacheDir})
	})
	if sharedRTErr != nil {
		t.Fatalf("NewRuntime: %v", sharedRTErr)
	}
	return sharedRT
}
