package proptest

import (
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"pgregory.net/rapid"
)

// CheckDeduplicator runs at least checks cases of the deduplicator suite for one strategy
// and returns the number run. t may be any rapid.TB.
func CheckDeduplicator(t rapid.TB, s redstream.DedupStrategy, f DedupFactory, checks int) int {
	t.Helper()
	return repeat(t, checks, func(rt *rapid.T) {
		spec := drawDedupSpec(rt, s)
		if err := spec.Validate(); err != nil {
			rt.Fatalf("generated an invalid spec %+v: %v", spec, err)
		}
		d, err := f(spec)
		if err != nil {
			rt.Fatalf("factory(%+v): %v", spec, err)
		}
		switch s {
		case redstream.DedupSet:
			runSet(rt, d)
		case redstream.DedupBloom:
			b, _ := spec.BloomParams()
			runBloom(rt, d, &bloomModel{b: b, bits: map[int]map[uint64]bool{}})
		case redstream.DedupWindowed:
			td, ok := d.(redstream.TimedDeduplicator)
			if !ok {
				rt.Fatalf("windowed deduplicator %T does not implement redstream.TimedDeduplicator", d)
			}
			w, _ := core.NewWindowDedup(spec.WithDefaults().Window.Microseconds())
			runWindow(rt, td, w)
		default:
			rt.Fatalf("unknown strategy %q", s)
		}
	})
}

// dedupOps applies random operations; contains/add describe the model.
func dedupOps(rt *rapid.T, d redstream.Deduplicator, contains func(string) bool, add func(string) bool,
	clear func(), unique func() int64) {
	ctx := rt.Context()
	steps := rapid.IntRange(1, 80).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		e := element(rt)
		switch op := rapid.IntRange(0, 20).Draw(rt, "op"); {
		case op <= 5:
			got, err := d.IsDuplicate(ctx, e)
			if err != nil {
				rt.Fatalf("step %d IsDuplicate(%q): %v", i, e, err)
			}
			if want := e != "" && contains(e); got != want {
				rt.Fatalf("step %d IsDuplicate(%q) = %v, want %v", i, e, got, want)
			}
		case op <= 10:
			if err := d.MarkSeen(ctx, e); err != nil {
				rt.Fatalf("step %d MarkSeen(%q): %v", i, e, err)
			}
			if e != "" {
				add(e)
			}
		case op <= 18:
			got, err := d.CheckAndMark(ctx, e)
			if err != nil {
				rt.Fatalf("step %d CheckAndMark(%q): %v", i, e, err)
			}
			want := false
			if e != "" {
				want = !add(e)
			}
			if got != want {
				rt.Fatalf("step %d CheckAndMark(%q) = %v, want %v", i, e, got, want)
			}
		case op == 19:
			if unique == nil {
				continue
			}
			got, err := d.UniqueCount(ctx)
			if err != nil {
				rt.Fatalf("step %d UniqueCount: %v", i, err)
			}
			if want := unique(); got != want {
				rt.Fatalf("step %d UniqueCount = %d, want %d", i, got, want)
			}
		default:
			if err := d.Clear(ctx); err != nil {
				rt.Fatalf("step %d Clear: %v", i, err)
			}
			clear()
		}
	}
}

func runSet(rt *rapid.T, d redstream.Deduplicator) {
	seen := map[string]bool{}
	dedupOps(rt, d,
		func(e string) bool { return seen[e] },
		func(e string) bool { added := !seen[e]; seen[e] = true; return added },
		func() { clear(seen) },
		func() int64 { return int64(len(seen)) })
}

func runBloom(rt *rapid.T, d redstream.Deduplicator, m *bloomModel) {
	dedupOps(rt, d, m.contains, m.add,
		func() { m.bits = map[int]map[uint64]bool{}; m.unique = 0 },
		func() int64 { return m.unique })
}

// runWindow checks a windowed deduplicator at explicit times.
func runWindow(rt *rapid.T, d redstream.TimedDeduplicator, w core.WindowDedup) {
	ctx := rt.Context()
	last := map[string]int64{}
	var high int64
	now := t0 + rapid.Int64Range(0, 1e12).Draw(rt, "start")
	steps := rapid.IntRange(1, 80).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		switch rapid.IntRange(0, 6).Draw(rt, "step") {
		case 0, 1:
		case 2:
			now += rapid.Int64Range(1, w.Window).Draw(rt, "dt")
		case 3:
			now += w.Window
		case 4:
			now += w.Window - 1
		case 5:
			now -= rapid.Int64Range(1, w.Window).Draw(rt, "back")
		case 6:
			now += rapid.Int64Range(w.Window, 10*w.Window).Draw(rt, "gap")
		}
		at := time.UnixMicro(now)
		e := element(rt)
		l, seen := last[e]
		eff := w.Effective(high, now)
		dup := e != "" && w.IsDuplicate(l, seen, eff)
		mark := func() {
			if e != "" {
				last[e], high = eff, eff
			}
		}
		switch rapid.IntRange(0, 3).Draw(rt, "op") {
		case 0:
			got, err := d.IsDuplicateAt(ctx, e, at)
			if err != nil || got != dup {
				rt.Fatalf("step %d IsDuplicateAt(%q, %d) = %v, %v; want %v", i, e, now, got, err, dup)
			}
		case 1:
			if _, err := d.CheckAndMarkAt(ctx, e, at); err != nil {
				rt.Fatalf("step %d CheckAndMarkAt(%q, %d) as MarkSeen: %v", i, e, now, err)
			}
			mark()
		default:
			got, err := d.CheckAndMarkAt(ctx, e, at)
			if err != nil || got != dup {
				rt.Fatalf("step %d CheckAndMarkAt(%q, %d) = %v, %v; want %v", i, e, now, got, err, dup)
			}
			mark()
		}
	}
}
