package memory

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

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

// shortKeys maps every key to a distinct short one, so the suite's keys (which carry a
// long per-case prefix) exercise the buckets' table of inline keys too.
type shortKeys struct {
	*Limiter
	mu    sync.Mutex
	names map[string]string
}

func (s *shortKeys) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if key != "" {
		s.mu.Lock()
		short, ok := s.names[key]
		if !ok {
			short = "k" + strconv.Itoa(len(s.names))
			s.names[key] = short
		}
		s.mu.Unlock()
		key = short
	}
	return s.Limiter.AllowN(ctx, key, now, n)
}

func TestConformanceLimiterShortKeys(t *testing.T) {
	proptest.TestLimiter(t, func(spec redstream.Spec) (redstream.Limiter, error) {
		l, err := NewLimiter(spec, Options{})
		if err != nil {
			return nil, err
		}
		return &shortKeys{Limiter: l, names: map[string]string{}}, nil
	}, proptest.Options{Checks: 1000, Algorithms: []redstream.Algorithm{redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket}})
}

func TestConformanceConcurrencyLimiter(t *testing.T) {
	proptest.TestConcurrencyLimiter(t, func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error) {
		return NewConcurrencyLimiter(specs, Options{})
	}, proptest.Options{Checks: 1000})
}

func TestConformanceReserver(t *testing.T) {
	proptest.TestReserver(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
		return NewMultiLimiter(specs, Options{})
	}, proptest.Options{Checks: 1000})
}
