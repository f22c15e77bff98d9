package idempotency

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redstream-go/redstream/metrics"
)

// TestMetrics: each outcome moves its series, and every series written is in the families
// table (with a type and help text).
func TestMetrics(t *testing.T) {
	i, err := NewMemory(Options{Name: "metrics-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = i.Do(ctx, "a", "1", value("x")) // stored
	_, _ = i.Do(ctx, "a", "1", value("x")) // replayed
	_, _ = i.Do(ctx, "a", "2", value("x")) // mismatched
	_, _ = i.eng.acquire(ctx, i.recordKey("b"), "b", "", "t", i.o.Lease, i.o.Retention)
	if _, err := i.Do(ctx, "b", "", value("x")); !errors.Is(err, ErrInFlight) { // conflict
		t.Fatal(err)
	}
	for name, c := range map[string]interface{ Get() uint64 }{
		"stored": i.m.stored, "replayed": i.m.replayed, "mismatched": i.m.mismatched, "conflicts": i.m.conflicts,
	} {
		if c.Get() != 1 {
			t.Errorf("%s = %d, want 1", name, c.Get())
		}
	}
	var buf bytes.Buffer
	metrics.WritePrometheus(&buf)
	known := map[string]bool{}
	for _, f := range families {
		if f.help == "" || (f.typ != metrics.TypeCounter && f.typ != metrics.TypeGauge) {
			t.Errorf("family %+v", f)
		}
		known[f.name] = true
	}
	seen := 0
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, "redis_idempotency_") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		if !known[name] {
			t.Errorf("series %q has no family in the table", line)
		}
		if strings.Contains(line, `name="metrics-test"`) {
			seen++
		}
	}
	if seen != 7 { // six counters and the in-flight gauge (no breaker: memory)
		t.Errorf("%d series of metrics-test written, want 7:\n%s", seen, buf.String())
	}
}
