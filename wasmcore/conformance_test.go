package wasmcore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/proptest"
	"github.com/redstream-go/redstream/wasmcore"
)

var (
	confRT     *wasmcore.Runtime
	confRTErr  error
	confRTOnce sync.Once
)

func conformanceRuntime(t *testing.T) *wasmcore.Runtime {
	t.Helper()
	confRTOnce.Do(func() {
		confRT, confRTErr = wasmcore.NewRuntime(context.Background(), wasmcore.Config{Instances: 2, CacheDir: wasmcore.TestCacheDir})
	})
	if confRTErr != nil {
		t.Fatal(confRTErr)
	}
	return confRT
}

// TestLimiterConformance runs proptest's limiter suite (every algorithm, 1000 cases each)
// against the wasm engine.
func TestLimiterConformance(t *testing.T) {
	rt := conformanceRuntime(t)
	proptest.TestLimiter(t, func(spec redstream.Spec) (redstream.Limiter, error) {
		return wasmcore.NewLimiter(spec, wasmcore.Options{Runtime: rt})
	}, proptest.Options{Checks: 1000})
}

// TestDeduplicatorConformance runs proptest's deduplicator suite (every strategy, 1000
// cases each) against the wasm engine.
func TestDeduplicatorConformance(t *testing.T) {
	rt := conformanceRuntime(t)
	proptest.TestDeduplicator(t, func(spec redstream.DedupSpec) (redstream.Deduplicator, error) {
		return wasmcore.NewDeduplicator(spec, wasmcore.Options{Runtime: rt})
	}, proptest.Options{Checks: 1000})
}

// TestMultiLimiterConformance runs proptest's all-or-nothing multi-limit suite (1000 cases).
func TestReserverConformance(t *testing.T) {
	rt := conformanceRuntime(t)
	proptest.TestReserver(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
		return wasmcore.NewMultiLimiter(specs, wasmcore.Options{Runtime: rt})
	}, proptest.Options{Checks: 1000})
}

func TestMultiLimiterConformance(t *testing.T) {
	rt := conformanceRuntime(t)
	proptest.TestMultiLimiter(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
		return wasmcore.NewMultiLimiter(specs, wasmcore.Options{Runtime: rt})
	}, proptest.Options{Checks: 1000})
}

// TestDeduplicatorConformanceSweeping sweeps the windowed deduplicator on almost every new
// element; pruning must change no answer.
func TestDeduplicatorConformanceSweeping(t *testing.T) {
	rt := conformanceRuntime(t)
	proptest.TestDeduplicator(t, func(spec redstream.DedupSpec) (redstream.Deduplicator, error) {
		return wasmcore.NewDeduplicator(spec, wasmcore.Options{Runtime: rt, Shards: 1, SweepThreshold: 1})
	}, proptest.Options{Checks: 300, Strategies: []redstream.DedupStrategy{redstream.DedupWindowed}})
}

// TestConcurrencyLimiterConformance runs proptest's lease suite (1000 cases) against the
// wasm engine: every admission, release and extension is the reference model's.
func TestConcurrencyLimiterConformance(t *testing.T) {
	rt := conformanceRuntime(t)
	proptest.TestConcurrencyLimiter(t, func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error) {
		return wasmcore.NewConcurrencyLimiter(specs, wasmcore.Options{Runtime: rt})
	}, proptest.Options{Checks: 1000})
}
