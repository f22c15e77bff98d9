package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/redistest"
)

// testdataName matches the mention of a testdata file in the line introducing a YAML block.
var testdataName = regexp.MustCompile("\\(`config/testdata/([a-z0-9_.-]+)`\\)")

// TestGuideYAMLBlocks: every YAML block of docs/config.md loads, strictly and with a Redis
// client; a block whose introducing line names a file of config/testdata is that file.
func TestGuideYAMLBlocks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	client := redistest.Client(t)
	lines := strings.Split(string(b), "\n")
	checked := 0
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```yaml" {
			continue
		}
		start := i + 1
		intro := ""
		for j := i - 1; j >= 0 && intro == ""; j-- {
			intro = strings.TrimSpace(lines[j])
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		block := strings.Join(lines[start:i], "\n") + "\n"
		if m := testdataName.FindStringSubmatch(intro); m != nil {
			if file := readFile(t, m[1]); file != block {
				t.Errorf("docs/config.md:%d: the block differs from config/testdata/%s", start, m[1])
			}
		}
		log, _ := logger()
		if _, err := config.Load([]byte(block), config.Options{Redis: client, Logger: log}); err != nil {
			t.Errorf("docs/config.md:%d: %v", start, err)
		}
		checked++
	}
	if checked < 4 {
		t.Errorf("checked %d YAML blocks of docs/config.md, want at least 4 (the format changed?)", checked)
	}
}
