package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkQueueScenarios/add-single-2         	    5000	  1000 ns/op	 9000 redstream-jobs/s	 2.5 redstream/bullmq	 30 redstream-server-µs/job
    queue_scenarios_test.go:99: redstream median 9000 jobs/s
BenchmarkQueueScenarios/add-single-2         	    5000	  1200 ns/op	 8000 redstream-jobs/s	 2.3 redstream/bullmq	 32 redstream-server-µs/job
BenchmarkQueueScenarios/add-single-2         	    5000	  1100 ns/op	 8500 redstream-jobs/s	 2.4 redstream/bullmq	 31 redstream-server-µs/job
BenchmarkOther
BenchmarkOther-2 	 10	 5 widgets
BenchmarkTable-2     	
table of QueueScenarios, 3000 jobs per round
redstream  median   12119 jobs/s
    3000	   2222103 ns/op	 1.5 redstream/bullmq
PASS
ok  	github.com/redstream-go/redstream/benchmarks	12.0s
`

func TestParse(t *testing.T) {
	run, err := Parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[metricKey]float64{
		{"BenchmarkQueueScenarios/add-single", "ns/op"}:                   1100,
		{"BenchmarkQueueScenarios/add-single", "redstream-jobs/s"}:        8500,
		{"BenchmarkQueueScenarios/add-single", "redstream/bullmq"}:        2.4,
		{"BenchmarkQueueScenarios/add-single", "redstream-server-µs/job"}: 31,
		{"BenchmarkOther", "widgets"}:                                     5,
		{"BenchmarkTable", "ns/op"}:                                       2222103,
		{"BenchmarkTable", "redstream/bullmq"}:                            1.5,
	} {
		if got, ok := run[k]; !ok || got != want {
			t.Errorf("%v = %v (%v), want %v (the median of its runs)", k, got, ok, want)
		}
	}
	if len(run) != 7 {
		t.Errorf("%d metrics, want 7: %v", len(run), run)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"BenchmarkX-2 10 5",
		"BenchmarkX-2 10 five ns/op",
		"BenchmarkX-2 10 NaN ns/op",
		"BenchmarkX-2 10 +Inf ns/op",
		"BenchmarkX-2 10 1 ns/op " + strings.Repeat("1 u ", 20000),
	} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%.40q) accepted it", in)
		}
	}
}

func TestCompare(t *testing.T) {
	k := func(unit string) metricKey { return metricKey{"BenchmarkQ/add", unit} }
	old := map[metricKey]float64{k("redstream/bullmq"): 2.0, k("ns/op"): 100, k("redstream-jobs/s"): 1000, k("widgets"): 1}
	for _, c := range []struct {
		name            string
		cur             map[metricKey]float64
		ratios          bool
		worse, compared int
	}{
		{"same", old, false, 0, 3},
		{"ratio 15% lower", map[metricKey]float64{k("redstream/bullmq"): 1.7, k("ns/op"): 100, k("redstream-jobs/s"): 1000}, false, 1, 3},
		{"time 15% higher", map[metricKey]float64{k("redstream/bullmq"): 2.0, k("ns/op"): 115, k("redstream-jobs/s"): 1000}, false, 1, 3},
		{"rate 5% lower passes", map[metricKey]float64{k("redstream/bullmq"): 2.0, k("ns/op"): 100, k("redstream-jobs/s"): 950}, false, 0, 3},
		{"rates not judged with -ratios", map[metricKey]float64{k("redstream/bullmq"): 2.1, k("ns/op"): 500, k("redstream-jobs/s"): 10}, true, 0, 1},
		{"a figure that fell to 0", map[metricKey]float64{k("redstream/bullmq"): 0}, false, 1, 1},
	} {
		var out bytes.Buffer
		worse, compared := compare(&out, old, c.cur, 0.10, c.ratios)
		if worse != c.worse || compared != c.compared {
			t.Errorf("%s: %d worse of %d compared, want %d of %d\n%s", c.name, worse, compared, c.worse, c.compared, out.String())
		}
	}
}

// FuzzParse: any input parses without a panic, and every figure it returns is finite.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkX-2 10 1 ns/op 2")
	f.Add("Benchmark 1 1e308 a 1e308 a")
	f.Fuzz(func(t *testing.T, s string) {
		run, err := Parse(s)
		if err != nil {
			return
		}
		for k, v := range run {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%v = %v", k, v)
			}
		}
	})
}

func TestDirection(t *testing.T) {
	for unit, want := range map[string]int{
		"redstream/bullmq": +1, "x-vs-asynq": +1, "redstream-limit-open/redstream": +1, "bullmq-jobs/s": +1,
		"ns/op": -1, "allocs/op": -1, "redstream-server-µs/job": -1, "redstream-achieved/limit": 0, "widgets": 0,
	} {
		if got := direction(unit); got != want {
			t.Errorf("direction(%q) = %d, want %d", unit, got, want)
		}
	}
}
