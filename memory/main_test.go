package memory

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (the hammer tests start
// many).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
