package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// metricKey names one figure of a run: a benchmark (its name without the -GOMAXPROCS
// suffix) and a unit.
type metricKey struct{ bench, unit string }

// maxLine bounds a result line: longer lines are not results of these benchmarks.
const maxLine = 64 << 10

// Parse reads `go test -bench` output and returns each benchmark's metrics. Lines that are
// not results (logs, PASS, ok, goos) are skipped. A result line is the benchmark's name,
// its iteration count, and pairs of a value and its unit; a benchmark that prints while it
// runs leaves its name alone on a line, and its result (the count and the pairs) on a
// later one. A benchmark that appears more than once (-count) keeps the median of its
// figures. A malformed result line is an error naming its line number.
func Parse(s string) (map[metricKey]float64, error) {
	all := map[metricKey][]float64{}
	pending := "" // the name of a benchmark whose result is on a later line
	for i, line := range strings.Split(s, "\n") {
		if len(line) > maxLine {
			return nil, fmt.Errorf("line %d: a line of %d bytes", i+1, len(line))
		}
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Benchmark") && len(f) >= 1:
			if len(f) == 1 || !isCount(f[1]) {
				pending = f[0] // its name alone (or followed by its logs)
				continue
			}
			pending = ""
		case pending != "" && len(f) >= 1 && isCount(f[0]) && (line[0] == ' ' || line[0] == '\t'):
			f = append([]string{pending}, f...)
			pending = ""
		default:
			continue
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: %q: a value without its unit", i+1, clip(line))
		}
		bench := trimProcs(f[0])
		for k := 2; k < len(f); k += 2 {
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("line %d: %q is not a finite number", i+1, clip(f[k]))
			}
			key := metricKey{bench, f[k+1]}
			all[key] = append(all[key], v)
		}
	}
	out := make(map[metricKey]float64, len(all))
	for k, vs := range all {
		out[k] = medianOf(vs)
	}
	return out, nil
}

// isCount reports whether s is a benchmark's iteration count.
func isCount(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

// trimProcs drops the "-N" GOMAXPROCS suffix go test adds to a benchmark's name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

func medianOf(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	for i := 1; i < len(s); i++ { // insertion sort: a handful of values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1]/2 + s[n/2]/2 // halves first: the sum of two large figures overflows
}

func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}
