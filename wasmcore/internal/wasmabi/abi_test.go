package wasmabi

import (
	"errors"
	"testing"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

func TestExportsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Exports {
		if seen[e.Name] {
			t.Errorf("export %s listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.Slots < 0 || e.Slots > NumSlots {
			t.Errorf("export %s fills %d slots, want at most %d", e.Name, e.Slots, NumSlots)
		}
		if got, ok := Lookup(e.Name); !ok || got.Name != e.Name {
			t.Errorf("Lookup(%s) = %v, %v", e.Name, got, ok)
		}
		for _, p := range e.Params {
			if p.Type != I32 && p.Type != I64 && p.Type != F64 {
				t.Errorf("export %s parameter %s has type %q", e.Name, p.Name, p.Type)
			}
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unknown export succeeded")
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		s    Status
		name string
		err  error
	}{
		{StatusOK, "OK", nil},
		{StatusInvalidConfig, "INVALID_CONFIG", core.ErrInvalidConfig},
		{StatusInvalidCost, "INVALID_COST", core.ErrInvalidCost},
		{StatusCostTooLarge, "COST_TOO_LARGE", core.ErrCostTooLarge},
		{StatusInvalidTime, "INVALID_TIME", core.ErrInvalidTime},
		{StatusInvalidState, "INVALID_STATE", nil},
		{StatusBuffer, "BUFFER", nil},
		{StatusInternal, "INTERNAL", nil},
		{99, "UNKNOWN", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusName(tt.s); got != tt.name {
				t.Errorf("StatusName(%d) = %q, want %q", tt.s, got, tt.name)
			}
			if got := Err(tt.s); !errors.Is(got, tt.err) || (got == nil) != (tt.err == nil) {
				t.Errorf("Err(%d) = %v, want %v", tt.s, got, tt.err)
			}
			if tt.err != nil {
				if got := statusOf(tt.err); got != tt.s {
					t.Errorf("statusOf(%v) = %d, want %d", tt.err, got, tt.s)
				}
			}
		})
	}
	if got := statusOf(errors.New("other")); got != StatusInternal {
		t.Errorf("statusOf(other) = %d, want StatusInternal", got)
	}
}

// TestSlidingLogDelta checks the delta of an admitted request that prunes: the log's
// expired entries are dropped, n entries appended at now.
func TestSlidingLogDelta(t *testing.T) {
	var r Results
	var lg core.Log
	buf := make([]byte, 24)
	for i, ts := range []int64{100, 200, 1300} {
		buf[8*i] = byte(ts)
		buf[8*i+1] = byte(ts >> 8)
	}
	// window 1000 µs, limit 5, at now = 1250: entries 100 and 200 expired.
	if s := LimitStep(&r, nil, &lg, buf, algIndex(t, "sliding"), 0, 0, 1000, 5, 0, 0, 0, 3, 1250, 2); s != StatusOK {
		t.Fatalf("status %s", StatusName(s))
	}
	// Time went backwards: the entries are recorded at the newest entry's time, 1300.
	if got := [3]int64{r[SlotState0], r[SlotState1], r[SlotState2]}; got != [3]int64{2, 2, 1300} {
		t.Fatalf("delta (pruned, appended, at) = %v, want [2 2 1300]", got)
	}
	if r[SlotAllowed] != 1 || r[SlotRemaining] != 2 {
		t.Fatalf("decision %+v, want allowed with 2 remaining", r.Decision())
	}
}

// algIndex returns the index of the algorithm named name in core.Algorithms(), the alg
// argument of the limit exports.
func algIndex(t *testing.T, name string) int32 {
	t.Helper()
	for i, a := range core.Algorithms() {
		if a.Name == name {
			return int32(i)
		}
	}
	t.Fatalf("no algorithm %q", name)
	return -1
}

// TestLimitExportsCoverTheRegistry calls the three limit exports for every algorithm of
// core's registry with parameters of its shape, and checks them against core.
func TestLimitExportsCoverTheRegistry(t *testing.T) {
	var lg core.Log
	buf := make([]byte, 8)
	for i, a := range core.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			p := core.Params{Window: 1000000, Limit: 10}
			if a.Shape == core.Bucket {
				p = core.Params{Capacity: 10, Rate: 5}
			}
			lim, err := a.New(p)
			if err != nil {
				t.Fatal(err)
			}
			var r Results
			if s := LimitParams(&r, nil, int32(i), p.Capacity, p.Rate, p.Window, p.Limit); s != StatusOK {
				t.Fatalf("limit_params: status %s", StatusName(s))
			}
			if r[SlotMax] != lim.Max() || r[SlotPeriod] != lim.Period() || r[SlotWords] != int64(a.Words) || r[SlotShape] != int64(a.Shape) {
				t.Fatalf("limit_params slots %v, want max %d, period %d, words %d, shape %d", r[:7], lim.Max(), lim.Period(), a.Words, a.Shape)
			}
			if s := LimitStep(&r, nil, &lg, buf, int32(i), p.Capacity, p.Rate, p.Window, p.Limit, 0, 0, 0, 0, 1000, 1); s != StatusOK {
				t.Fatalf("limit_step: status %s", StatusName(s))
			}
			var (
				st   core.State
				d    core.Decision
				next coreops.Next
			)
			if err := coreops.CheckState(lim, &st, 1000, 1, &d, &next); err != nil {
				t.Fatal(err)
			}
			if got := r.Decision(); got != d || [3]int64{r[SlotState0], r[SlotState1], r[SlotState2]} != next {
				t.Fatalf("limit_step: %+v %v, want %+v %v", got, r[SlotState0:SlotState2+1], d, next)
			}
			if s := LimitIdle(&r, nil, &lg, buf, int32(i), p.Capacity, p.Rate, p.Window, p.Limit, 0, 0, 0, 0, 1000); s != StatusOK || r[0] != 1 {
				t.Fatalf("limit_idle of a new key: status %s, slot 0 = %d, want idle", StatusName(s), r[0])
			}
		})
	}
	var r Results
	if s := LimitParams(&r, nil, int32(len(core.Algorithms())), 10, 5, 0, 0); s != StatusInvalidConfig {
		t.Fatalf("limit_params of an algorithm the registry lacks: status %s, want INVALID_CONFIG", StatusName(s))
	}
}
