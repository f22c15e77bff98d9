package memory

import (
	"testing"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/proptest"
)

// The conformance suites check every answer of the engines against core's reference model
// over random operation sequences (1000 cases per algorithm or strategy).

func TestConformanceLimiter(t *testing.T) {
	proptest.TestLimiter(t, func(spec redstream.Spec) (redstream.Limiter, error) {
		return NewLimiter(spec, Options{})
	}, proptest.Options{Checks: 1000})
}

func TestConformanceMultiLimiter(t *testing.T) {
	proptest.TestMultiLimiter(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
		return NewMultiLimiter(specs, Options{})
	}, proptest.Options{Checks: 1000})
}

func TestConformanceDeduplicator(t *testing.T) {
	proptest.TestDeduplicator(t, func(spec redstream.DedupSpec) (redstream.Deduplicator, error) {
		return NewDeduplicator(spec, Options{})
	}, proptest.Options{Checks: 1000})
}

// TestConformanceDeduplicatorSweeping sweeps the windowed deduplicator on almost every new
// element; pruning must change no answer.
func TestConformanceDeduplicatorSweeping(t *testing.T) {
	proptest.TestDeduplicator(t, func(spec redstream.DedupSpec) (redstream.Deduplicator, error) {
		return NewDeduplicator(spec, Options{Shards: 1, SweepThreshold: 1})
	}, proptest.Options{Checks: 300, Strategies: []redstream.DedupStrategy{redstream.DedupWindowed}})
}
