package redstream

import (
	"fmt"
	"math"
	"time"

	"github.com/redstream-go/redstream/core"
)

// Algorithm names a rate-limiting algorithm. The names are those of the configuration files.
type Algorithm string

// The algorithms, rows of package core's registry (core.Algorithms). Every engine implements
// every row with the same semantics; an algorithm added to the registry needs no constant
// here (Spec{Algorithm: "name", ...} names it).
const (
	// AlgorithmTokenBucket is GCRA with a new key starting full (burst of Capacity).
	AlgorithmTokenBucket Algorithm = "token-bucket"
	// AlgorithmLeakyBucket is GCRA with a new key starting empty; decisions carry Delay.
	AlgorithmLeakyBucket Algorithm = "leaky-bucket"
	// AlgorithmSlidingWindow is the exact sliding window log.
	AlgorithmSlidingWindow Algorithm = "sliding"
	// AlgorithmSlidingCounter is the two-window weighted estimate (O(1) memory per key).
	AlgorithmSlidingCounter Algorithm = "sliding-counter"
	// AlgorithmFixedWindow counts per aligned window.
	AlgorithmFixedWindow Algorithm = "fixed"
)

// Algorithms returns every algorithm of core's registry, in its order, in a new slice.
func Algorithms() []Algorithm {
	rows := core.Algorithms()
	out := make([]Algorithm, len(rows))
	for i, a := range rows {
		out[i] = Algorithm(a.Name)
	}
	return out
}

// Spec describes a limiter in user-facing units; engines take a Spec and validate it with
// [Spec.Core]. An algorithm has one of two parameter shapes ([Spec.Shape]): the bucket
// shape (core.Bucket) reads Capacity and Rate, the window shape (core.Window) reads Window
// and Limit; the fields of the other shape are ignored.
type Spec struct {
	Algorithm Algorithm
	// Capacity is the bucket size (burst), at least 1. Buckets only.
	Capacity float64
	// Rate is the refill (token bucket) or leak (leaky bucket) rate per second, in (0, 1e6].
	Rate float64
	// Window is the window length, truncated to whole microseconds. Windows only.
	Window time.Duration
	// Limit is the most cost admitted per window. Windows only.
	Limit int64
}

// TokenBucket returns the Spec of a token bucket holding capacity tokens and refilling
// ratePerSecond tokens per second; a new key starts full.
func TokenBucket(capacity, ratePerSecond float64) Spec {
	return Spec{Algorithm: AlgorithmTokenBucket, Capacity: capacity, Rate: ratePerSecond}
}

// LeakyBucket returns the Spec of a leaky bucket of the given capacity draining
// leakRatePerSecond per second; a new key starts empty.
func LeakyBucket(capacity, leakRatePerSecond float64) Spec {
	return Spec{Algorithm: AlgorithmLeakyBucket, Capacity: capacity, Rate: leakRatePerSecond}
}

// SlidingWindow returns the Spec of an exact sliding window log admitting limit per window.
func SlidingWindow(window time.Duration, limit int64) Spec {
	return Spec{Algorithm: AlgorithmSlidingWindow, Window: window, Limit: limit}
}

// SlidingCounter returns the Spec of a sliding window counter admitting about limit per window.
func SlidingCounter(window time.Duration, limit int64) Spec {
	return Spec{Algorithm: AlgorithmSlidingCounter, Window: window, Limit: limit}
}

// FixedWindow returns the Spec of a fixed window counter admitting limit per aligned window.
func FixedWindow(window time.Duration, limit int64) Spec {
	return Spec{Algorithm: AlgorithmFixedWindow, Window: window, Limit: limit}
}

// String describes the spec in the fields of its shape, e.g.
// "token-bucket(capacity=10, rate=5/s)" or "fixed(window=1m0s, limit=100)"; a spec of an
// unknown algorithm shows every field.
func (s Spec) String() string {
	row, _ := core.Lookup(string(s.Algorithm)) // an unknown algorithm has shape 0
	switch row.Shape {
	case core.Bucket:
		return fmt.Sprintf("%s(capacity=%g, rate=%g/s)", s.Algorithm, s.Capacity, s.Rate)
	case core.Window:
		return fmt.Sprintf("%s(window=%v, limit=%d)", s.Algorithm, s.Window, s.Limit)
	}
	return fmt.Sprintf("%q(capacity=%g, rate=%g/s, window=%v, limit=%d)", string(s.Algorithm), s.Capacity, s.Rate, s.Window, s.Limit)
}

// Core validates the spec and returns its algorithm in core units, the one value every
// engine decides with. Errors wrap ErrInvalidConfig and name the bad parameter.
func (s Spec) Core() (core.Limit, error) {
	a, err := core.Lookup(string(s.Algorithm))
	if err != nil {
		return core.Limit{}, err
	}
	return a.New(core.Params{Capacity: s.Capacity, Rate: s.Rate, Window: s.Window.Microseconds(), Limit: s.Limit})
}

// DedupStrategy names a deduplication strategy.
type DedupStrategy string

// The deduplication strategies, named as in the configuration files.
const (
	// DedupSet is exact: every element is kept until Clear.
	DedupSet DedupStrategy = "set"
	// DedupBloom is probabilistic: no false negatives, false positives at about FPRate.
	DedupBloom DedupStrategy = "bloom"
	// DedupWindowed forgets an element Window after it was last seen.
	DedupWindowed DedupStrategy = "windowed"
)

// Defaults of DedupSpec, those of the Java starter's deduplicator factory.
const (
	defaultBloomInsertions int64         = 1_000_000
	defaultBloomFPRate     float64       = 0.03
	defaultDedupWindow     time.Duration = time.Hour
)

// DedupSpec describes a deduplicator. Zero fields take their defaults (DedupSpec.WithDefaults
// shows them), those of the Java starter's deduplicator factory.
type DedupSpec struct {
	Strategy DedupStrategy
	// Window is the windowed strategy's window (default 1 hour), truncated to µs.
	Window time.Duration
	// Insertions is the Bloom filter's expected number of distinct elements (default
	// 1,000,000).
	Insertions int64
	// FPRate is the Bloom filter's target false-positive rate in (0, 1) (default
	// 0.03).
	FPRate float64
	// Shards splits a Bloom filter into this many blocks (default 1, raised automatically
	// when a block would exceed one Redis string).
	Shards int
}

// WithDefaults returns the spec with zero fields replaced by their defaults.
func (s DedupSpec) WithDefaults() DedupSpec {
	if s.Window == 0 {
		s.Window = defaultDedupWindow
	}
	if s.Insertions == 0 {
		s.Insertions = defaultBloomInsertions
	}
	if s.FPRate == 0 {
		s.FPRate = defaultBloomFPRate
	}
	return s
}

// windowParams returns the validated core parameters of the windowed strategy.
func (s DedupSpec) windowParams() (core.WindowDedup, error) {
	return core.NewWindowDedup(s.WithDefaults().Window.Microseconds())
}

// BloomParams returns the validated core parameters of the Bloom strategy.
func (s DedupSpec) BloomParams() (core.Bloom, error) {
	d := s.WithDefaults()
	if math.IsNaN(d.FPRate) {
		return core.Bloom{}, fmt.Errorf("%w: falseProbability is NaN", ErrInvalidConfig)
	}
	return core.NewBloom(d.Insertions, d.FPRate, d.Shards)
}

// Validate checks the strategy and its parameters.
func (s DedupSpec) Validate() error {
	switch s.Strategy {
	case DedupSet:
		return nil
	case DedupBloom:
		_, err := s.BloomParams()
		return err
	case DedupWindowed:
		_, err := s.windowParams()
		return err
	}
	return fmt.Errorf("%w: unknown deduplication strategy %q", ErrInvalidConfig, s.Strategy)
}
