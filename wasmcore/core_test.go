package wasmcore

import (
	"context"
	"testing"

	"pgregory.net/rapid"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
	"github.com/redstream-go/redstream/wasmcore/internal/wasmabi"
)

// checkN runs prop until at least n cases ran.
func checkN(t *testing.T, n int, prop func(*rapid.T)) {
	t.Helper()
	cases := 0
	for cases < n && !t.Failed() {
		rapid.Check(t, func(rt *rapid.T) {
			cases++
			prop(rt)
		})
	}
	t.Logf("%d cases", cases)
}

// TestStepsAgainstCore draws valid parameters and compares the module's backoff, Bloom and
// Murmur3 steps, through the host's call wrappers, with package core (1000 cases each). The
// limiters and the deduplicators are compared with core by the proptest suites.
func TestStepsAgainstCore(t *testing.T) {
	ctx := context.Background()
	rt := testRuntime(t)
	in, err := rt.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.release(in)

	t.Run("backoff", func(t *testing.T) {
		checkN(t, 1000, func(t *rapid.T) {
			initial := rapid.Int64Range(0, 10*core.Second).Draw(t, "initial")
			maxD := initial + rapid.Int64Range(0, 3600*core.Second).Draw(t, "max")
			m := rapid.OneOf(rapid.SampledFrom([]float64{1, 1.5, 2, 3, 1000}), rapid.Float64Range(1, 10)).Draw(t, "multiplier")
			j := core.Jitter(rapid.IntRange(0, 3).Draw(t, "jitter"))
			b, err := core.NewBackoff(initial, maxD, m, j)
			if err != nil {
				t.Fatal(err)
			}
			attempt := rapid.Int64Range(-2, 80).Draw(t, "attempt")
			prev := rapid.Int64Range(0, maxD).Draw(t, "prev")
			random := rapid.Uint64().Draw(t, "random")
			base, err := in.backoffBase(ctx, initial, maxD, m, attempt)
			if err != nil || base != b.Base(attempt) {
				t.Fatalf("backoff_base(%d) = %d, %v; core %d", attempt, base, err, b.Base(attempt))
			}
			want := b.Delay(attempt, prev, func(n int64) int64 { return wasmabi.Uniform(random, n) })
			got, err := in.backoffDelay(ctx, initial, maxD, m, j, attempt, prev, random)
			if err != nil || got != want {
				t.Fatalf("backoff_delay(%d, prev %d) = %d, %v; core %d", attempt, prev, got, err, want)
			}
			if want < 0 || want > maxD {
				t.Fatalf("delay %d outside [0, %d]", want, maxD)
			}
		})
	})
	t.Run("bloom", func(t *testing.T) {
		checkN(t, 1000, func(t *rapid.T) {
			n := rapid.Int64Range(1, 1e9).Draw(t, "insertions")
			p := rapid.OneOf(rapid.SampledFrom([]float64{0.5, 0.03, 0.01, 1e-6}), rapid.Float64Range(1e-12, 0.9)).Draw(t, "fprate")
			shards := rapid.IntRange(0, 64).Draw(t, "shards")
			want, err := core.NewBloom(n, p, shards)
			if err != nil {
				t.Fatal(err)
			}
			got, err := in.bloomParams(ctx, n, p, int32(shards))
			if err != nil || got != want {
				t.Fatalf("bloom_params(%d, %v, %d) = %+v, %v; core %+v", n, p, shards, got, err, want)
			}
			elem := rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "elem")
			wshard, wpos := want.Locate(elem, nil)
			gshard, gpos, err := in.bloomPositions(ctx, want, elem, nil)
			if err != nil || gshard != wshard || len(gpos) != len(wpos) {
				t.Fatalf("bloom_positions(%x) = %d %v, %v; core %d %v", elem, gshard, gpos, err, wshard, wpos)
			}
			for i := range wpos {
				if gpos[i] != wpos[i] {
					t.Fatalf("bloom_positions(%x)[%d] = %d, core %d", elem, i, gpos[i], wpos[i])
				}
			}
			ones := rapid.Uint64Range(0, want.ShardBits).Draw(t, "ones")
			est, err := in.bloomEstimate(ctx, want.K, want.ShardBits, ones)
			if err != nil || est != want.EstimateCount(ones) {
				t.Fatalf("bloom_estimate_count(%d) = %d, %v; core %d", ones, est, err, want.EstimateCount(ones))
			}
		})
	})
	t.Run("murmur3", func(t *testing.T) {
		checkN(t, 1000, func(t *rapid.T) {
			data := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "data")
			seed := rapid.Uint32().Draw(t, "seed")
			h1, h2, err := in.murmur3(ctx, data, seed)
			w1, w2 := corekit.Murmur3x64_128(data, seed)
			if err != nil || h1 != w1 || h2 != w2 {
				t.Fatalf("murmur3(%x, %d) = %x %x, %v; core %x %x", data, seed, h1, h2, err, w1, w2)
			}
		})
	})
	t.Run("window-dedup", func(t *testing.T) {
		checkN(t, 1000, func(t *rapid.T) {
			w := rapid.Int64Range(1, core.MaxDuration).Draw(t, "window")
			wd, _ := core.NewWindowDedup(w)
			high := rapid.Int64Range(0, core.MaxTime).Draw(t, "high")
			last := rapid.Int64Range(0, high).Draw(t, "last")
			seen := rapid.Bool().Draw(t, "seen")
			now := rapid.Int64Range(0, core.MaxTime).Draw(t, "now")
			dup, eff, err := in.windowDedupCheck(ctx, w, high, last, seen, now)
			weff := wd.Effective(high, now)
			if err != nil || eff != weff || dup != wd.IsDuplicate(last, seen, weff) {
				t.Fatalf("window_dedup_check = %v %d, %v; core %v %d", dup, eff, err, wd.IsDuplicate(last, seen, weff), weff)
			}
			exp, err := in.windowDedupExpired(ctx, w, last, eff)
			if err != nil || exp != wd.Expired(last, eff) {
				t.Fatalf("window_dedup_expired = %v, %v; core %v", exp, err, wd.Expired(last, eff))
			}
		})
	})
}
