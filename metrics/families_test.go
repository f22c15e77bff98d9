package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestKnownFamiliesCoverConstants: every metric name a package of the module declares as a
// constant has its type and help text here, so the exposition's # HELP lines cannot drift
// from the names the code writes.
func TestKnownFamiliesCoverConstants(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^\s*[A-Za-z]\w*\s*=\s*"(redis_[a-z0-9_]+)"`)
	files, err := filepath.Glob(filepath.Join("..", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if matched, _ := filepath.Match("*_test.go", filepath.Base(f)); matched {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			seen++
			if _, ok := known[m[1]]; !ok {
				t.Errorf("%s declares metric %s, which has no entry in known (families.go)", f, m[1])
			}
		}
	}
	if seen < 30 {
		t.Fatalf("found only %d metric name constants: the scan is broken", seen)
	}
}
