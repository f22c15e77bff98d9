package wasmcore

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	sharedRT     *Runtime
	sharedRTErr  error
	sharedRTOnce sync.Once
)

// testRuntime returns a Runtime shared by the tests of this binary, so that the module is
// compiled and instantiated once.
func testRuntime(t testing.TB) *Runtime {
	t.Helper()
	sharedRTOnce.Do(func() { sharedRT, sharedRTErr = NewRuntime(context.Background(), Config{Instances: 4}) })
	if sharedRTErr != nil {
		t.Fatalf("NewRuntime: %v", sharedRTErr)
	}
	return sharedRT
}
