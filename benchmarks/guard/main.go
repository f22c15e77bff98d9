// Command guard compares a run of the benchmarks with the figures recorded in
// benchmarks/record.txt, metric by metric, as the ratio of the new figure to the recorded
// one, and exits 1 when any figure is worse by more than the tolerance (10% by default):
// a slowdown is seen before a release, not in CI (timed checks on shared runners fail for
// reasons of their own).
//
//	cd benchmarks
//	go test -run '^$' -bench 'QueueScenarios' -benchtime 5000x | tee new.txt
//	go run ./guard record.txt new.txt
//
// Both files hold `go test -bench` output. A metric is compared when both runs have it for
// the same benchmark and its unit says which way is better: rates ("/s") and ratios of
// redstream to a peer ("redstream/<peer>", "x-vs-<peer>") are better higher; "ns/op",
// "B/op", "allocs/op" and server costs ("µs/job", "µs/decision") are better lower. Other
// metrics are listed, not judged. Rates and times depend on the machine: compare runs of
// one machine, or pass -ratios to judge only redstream's ratios to its peers, measured in
// the same run.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	tol := flag.Float64("tolerance", 0.10, "the largest change for the worse that passes, as a fraction")
	ratios := flag.Bool("ratios", false, "judge only the ratios of redstream to its peers")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: guard [-tolerance 0.10] [-ratios] RECORD NEW")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 || *tol < 0 || *tol >= 1 {
		flag.Usage()
		os.Exit(2)
	}
	old, err := readRun(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard:", err)
		os.Exit(2)
	}
	cur, err := readRun(flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard:", err)
		os.Exit(2)
	}
	worse, compared := compare(os.Stdout, old, cur, *tol, *ratios)
	if compared == 0 {
		fmt.Fprintln(os.Stderr, "guard: the two runs have no judged metric in common")
		os.Exit(2)
	}
	if worse > 0 {
		fmt.Printf("%d of %d figures worse by more than %.0f%%\n", worse, compared, *tol*100)
		os.Exit(1)
	}
	fmt.Printf("%d figures within %.0f%% or better\n", compared, *tol*100)
}

func readRun(name string) (map[metricKey]float64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	run, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return run, nil
}

// direction is +1 when a metric of unit is better higher, -1 when better lower, 0 when the
// unit does not say.
func direction(unit string) int {
	switch {
	case strings.HasSuffix(unit, "ns/op"), strings.HasSuffix(unit, "B/op"), strings.HasSuffix(unit, "allocs/op"),
		strings.HasSuffix(unit, "µs/job"), strings.HasSuffix(unit, "µs/decision"):
		return -1
	case strings.HasSuffix(unit, "achieved/limit"): // best at 1, not higher
		return 0
	case strings.HasSuffix(unit, "/s"):
		return +1
	case strings.HasPrefix(unit, "redstream") && strings.Contains(unit, "/"), strings.HasPrefix(unit, "x-vs-"):
		return +1
	}
	return 0
}

// isRatio reports whether unit is a ratio of redstream to a peer in the same run.
func isRatio(unit string) bool {
	return direction(unit) > 0 && !strings.HasSuffix(unit, "/s")
}

// compare writes one line per metric of cur that old has too, and returns how many judged
// figures are worse than old by more than tol, and how many were judged.
func compare(w io.Writer, old, cur map[metricKey]float64, tol float64, ratiosOnly bool) (worse, compared int) {
	keys := make([]metricKey, 0, len(cur))
	for k := range cur {
		if _, ok := old[k]; ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].bench != keys[j].bench {
			return keys[i].bench < keys[j].bench
		}
		return keys[i].unit < keys[j].unit
	})
	for _, k := range keys {
		o, n := old[k], cur[k]
		dir := direction(k.unit)
		verdict := "not judged"
		if dir != 0 && (!ratiosOnly || isRatio(k.unit)) && o != 0 {
			compared++
			change := n / o // > 1: higher
			if dir < 0 {
				change = o / n
			}
			verdict = fmt.Sprintf("%.2fx", change)
			if n == 0 || change < 1-tol {
				worse++
				verdict += "  WORSE"
			}
		}
		fmt.Fprintf(w, "%-60s %-36s %12.4g -> %-12.4g %s\n", k.bench, k.unit, o, n, verdict)
	}
	return worse, compared
}
