package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// docTable returns the rows of the metric table of docs/metrics.md: family name -> type.
func docTable(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\| ([a-z]+) \\| [^|]* \\| [^|]+ \\|$").FindAllStringSubmatch(string(b), -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		rows[m[1]] = m[2]
	}
	if len(rows) < 50 {
		t.Fatalf("docs/metrics.md: only %d rows read: the table's format changed", len(rows))
	}
	return rows
}

// TestDocTableMatchesKnown: docs/metrics.md lists every family of known with its type, and
// no other, so the documented table cannot drift from what the exposition writes.
func TestDocTableMatchesKnown(t *testing.T) {
	doc := docTable(t)
	for name, f := range known {
		typ, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s (families.go) is missing from docs/metrics.md", name)
		case typ != f.typ:
			t.Errorf("docs/metrics.md: %s is a %s, families.go says %s", name, typ, f.typ)
		}
	}
	for name := range doc {
		if _, ok := known[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which families.go does not know", name)
		}
	}
}
