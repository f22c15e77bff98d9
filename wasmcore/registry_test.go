package wasmcore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// TestAlgorithmIndex ranges over core's registry: every algorithm has its index in the
// module's table, and an algorithm the table lacks is refused by NewLimiter and
// NewMultiLimiter with ErrInvalidConfig (never a failed call later).
func TestAlgorithmIndex(t *testing.T) {
	for i, a := range core.Algorithms() {
		if got, err := algorithmIndex(moduleAlgorithms, a.Name); err != nil || got != int32(i) {
			t.Errorf("%s: index %d, %v; want %d", a.Name, got, err, i)
		}
	}
	rt := testRuntime(t)
	spec := redstream.FixedWindow(time.Second, 3)
	old := moduleAlgorithms
	moduleAlgorithms = slices.DeleteFunc(slices.Clone(old), func(a core.Algorithm) bool { return a.Name == string(spec.Algorithm) })
	t.Cleanup(func() { moduleAlgorithms = old })
	if _, err := NewLimiter(spec, Options{Runtime: rt}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("NewLimiter of an algorithm the module lacks: %v, want ErrInvalidConfig", err)
	}
	if _, err := NewMultiLimiter([]redstream.Spec{redstream.TokenBucket(3, 1), spec}, Options{Runtime: rt}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("NewMultiLimiter of an algorithm the module lacks: %v, want ErrInvalidConfig", err)
	}
}
