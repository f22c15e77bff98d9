package stream

import (
	"sync"
	"testing"
)

// TestPoolWeights: while every share has jobs queued, a Pool serves its shares by their
// weights exactly (smooth weighted round robin: 3, 2 and 1 over 600 picks), and in strict
// mode only the heaviest shares, in turn. A share with nothing queued is passed over.
func TestPoolWeights(t *testing.T) {
	for _, tc := range []struct {
		name   string
		strict bool
		want   map[string]int
	}{
		{"weighted", false, map[string]int{"a": 300, "b": 200, "c": 100}},
		{"strict", true, map[string]int{"a": 300, "b": 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(1, tc.strict)
			weights := map[string]int{"a": 3, "b": 3, "c": 1}
			if !tc.strict {
				weights["b"] = 2
			}
			var mu sync.Mutex
			var served []string
			gate := make(chan struct{})
			shares := map[string]*poolShare{}
			for _, name := range []string{"a", "b", "c"} {
				s := p.share(name, weights[name], 1000)
				for range 700 {
					s.put(job{})
				}
				shares[name] = s
			}
			first := true
			for _, name := range []string{"a", "b", "c"} {
				shares[name].start(func(job) {
					if first { // the single worker waits until every share is a member
						first = false
						<-gate
					}
					mu.Lock()
					served = append(served, name)
					mu.Unlock()
				})
			}
			close(gate)
			for _, s := range shares {
				s.close()
			}
			for _, s := range shares {
				s.wait()
			}
			got := map[string]int{}
			for _, name := range served[1:601] { // the first pick was made by a alone
				got[name]++
			}
			for name, n := range tc.want {
				if got[name] != n {
					t.Errorf("share %s served %d of 600, want %d (served %v)", name, got[name], n, got)
				}
			}
			if tc.strict && got["c"] != 0 {
				t.Errorf("strict: the lightest share was served %d times while heavier ones had jobs", got["c"])
			}
			if len(served) != 2100 {
				t.Errorf("%d jobs run, want 2100 (every queued job, the passed-over share's too)", len(served))
			}
		})
	}
}
