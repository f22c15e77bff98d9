package stream

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/redstream-go/redstream/metrics"
)

// TestMetricFamiliesMatchDeclarations: MetricFamilies lists every metric name the package
// declares (metrics.go, deadletter.go), once, with a type and a help text.
func TestMetricFamiliesMatchDeclarations(t *testing.T) {
	var src string
	for _, f := range []string{"metrics.go", "deadletter.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(b)
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*metric\w+\s*=\s*"(redis_[a-z0-9_]+)"`).FindAllStringSubmatch(src, -1) {
		declared[m[1]] = true
	}
	if len(declared) < 30 {
		t.Fatalf("found only %d metric name constants: the scan is broken", len(declared))
	}
	listed := map[string]bool{}
	for _, f := range MetricFamilies() {
		if listed[f.Name] {
			t.Errorf("MetricFamilies lists %s twice", f.Name)
		}
		listed[f.Name] = true
		if !declared[f.Name] {
			t.Errorf("MetricFamilies lists %s, which is not a declared metric name", f.Name)
		}
		switch f.Type {
		case metrics.TypeCounter, metrics.TypeGauge, metrics.TypeHistogram:
		default:
			t.Errorf("%s: type %q", f.Name, f.Type)
		}
		if f.Help == "" || f.Samples != nil {
			t.Errorf("%s: help %q, samples %v", f.Name, f.Help, f.Samples)
		}
	}
	for name := range declared {
		if !listed[name] {
			t.Errorf("%s is declared but missing from MetricFamilies", name)
		}
	}
}

// TestMetricFamiliesMatchDocs: docs/metrics.md lists the package's families (the
// redis_streaming_mq_* and redis_streaming_dlq_* rows) with the types MetricFamilies gives,
// and no other.
func TestMetricFamiliesMatchDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(redis_streaming_(?:mq|dlq)_[a-z0-9_]+)` \\| ([a-z]+) \\|").FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = m[2]
	}
	fams := MetricFamilies()
	if len(doc) != len(fams) {
		t.Errorf("docs/metrics.md has %d stream rows, MetricFamilies %d families", len(doc), len(fams))
	}
	for _, f := range fams {
		if typ, ok := doc[f.Name]; !ok || typ != f.Type {
			t.Errorf("docs/metrics.md: %s is %q (listed: %v), want %q", f.Name, typ, ok, f.Type)
		}
	}
}
