package proptest

import (
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"pgregory.net/rapid"
)

var (
	rates   = []float64{0.25, 1, 3, 5, 7.5, 10, 100, 1000, 250000}
	windows = []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, time.Second,
		1500 * time.Millisecond, time.Minute, time.Hour}
)

// drawSpec draws a valid spec of the algorithm, in the fields of its shape (one generator
// per shape of core's registry, so a new algorithm of an existing shape needs none).
func drawSpec(rt *rapid.T, alg redstream.Algorithm, label string) redstream.Spec {
	row, err := core.Lookup(string(alg))
	sh := row.Shape
	if err != nil {
		rt.Fatalf("drawSpec: %v", err)
	}
	switch sh {
	case core.Bucket:
		capacity := float64(rapid.IntRange(1, 20).Draw(rt, label+".capacity"))
		if rapid.Bool().Draw(rt, label+".fractional") {
			capacity = rapid.Float64Range(1, 20).Draw(rt, label+".capacity")
		}
		return redstream.Spec{Algorithm: alg, Capacity: capacity, Rate: rapid.SampledFrom(rates).Draw(rt, label+".rate")}
	case core.Window:
		return redstream.Spec{
			Algorithm: alg,
			Window:    rapid.SampledFrom(windows).Draw(rt, label+".window"),
			Limit:     rapid.Int64Range(1, 20).Draw(rt, label+".limit"),
		}
	}
	rt.Fatalf("drawSpec: algorithm %q has shape %d, which has no generator", alg, sh)
	return redstream.Spec{}
}

// drawDedupSpec draws a valid deduplicator spec of the strategy, small enough that Bloom
// false positives and shards matter.
func drawDedupSpec(rt *rapid.T, s redstream.DedupStrategy) redstream.DedupSpec {
	spec := redstream.DedupSpec{Strategy: s}
	switch s {
	case redstream.DedupBloom:
		spec.Insertions = rapid.Int64Range(1, 300).Draw(rt, "insertions")
		spec.FPRate = rapid.SampledFrom([]float64{0.5, 0.2, 0.03, 0.01, 0.001}).Draw(rt, "fprate")
		spec.Shards = rapid.IntRange(0, 4).Draw(rt, "shards")
	case redstream.DedupWindowed:
		spec.Window = rapid.SampledFrom(windows).Draw(rt, "window")
	}
	return spec
}

// element draws a dedup element: often from a tiny pool (so repeats happen), sometimes
// empty or with odd bytes.
func element(rt *rapid.T) string {
	switch rapid.IntRange(0, 19).Draw(rt, "elemkind") {
	case 0:
		return ""
	case 1:
		return rapid.SampledFrom([]string{"{x}", "a b", "\x00\xff", "ключ"}).Draw(rt, "elem")
	case 2, 3, 4:
		return rapid.StringMatching(`[a-z0-9]{1,12}`).Draw(rt, "elem")
	}
	return rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h"}).Draw(rt, "elem")
}
