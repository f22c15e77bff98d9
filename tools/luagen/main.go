// Command luagen writes the constants package lua's scripts share with package core into
// every lua/*.lua script that has a "-- BEGIN luagen" / "-- END luagen" region. It is run by
//
//	go generate ./lua/...
//
// (from lua/generate.go) and, with -check, by CI: `go run ./tools/luagen -check -dir lua`
// exits with status 1 and names the stale files when regenerating would change any.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/redstream-go/redstream/internal/luagen"
)

func main() {
	dir := flag.String("dir", ".", "directory holding the .lua scripts")
	check := flag.Bool("check", false, "report stale scripts and exit 1 instead of writing them")
	flag.Parse()
	stale, err := run(*dir, *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "luagen:", err)
		os.Exit(2)
	}
	if *check && len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "luagen: stale generated constants in %v; run go generate ./lua/...\n", stale)
		os.Exit(1)
	}
}

// run regenerates every marked script in dir and returns the names of those that changed
// (or would change, with check).
func run(dir string, check bool) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var stale []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out, marked, err := luagen.Rewrite(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if !marked || bytes.Equal(out, src) {
			continue
		}
		stale = append(stale, filepath.Base(f))
		if !check {
			if err := os.WriteFile(f, out, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}
