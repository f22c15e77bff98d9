// Command luagen assembles package lua's scripts from their sources (internal/luagen
// documents the directives). It is run by
//
//	go generate ./lua/...
//
// (from lua/generate.go: `luagen -src src -out .`) and, with -check, reports the stale
// scripts without writing: `go run ./tools/luagen -check -src lua/src -out lua` exits with
// status 1 and names them when regenerating would change any.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/redstream-go/redstream/internal/luagen"
)

func main() {
	src := flag.String("src", "src", "directory holding the script sources (fragments in its subdirectories)")
	out := flag.String("out", ".", "directory the scripts are written to")
	check := flag.Bool("check", false, "report stale scripts and exit 1 instead of writing them")
	flag.Parse()
	os.Exit(run(*src, *out, *check))
}

// run generates (or checks) the scripts and returns the exit status.
func run(src, out string, check bool) int {
	stale, err := luagen.Generate(src, out, check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "luagen:", err)
		return 2
	}
	if check && len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "luagen: stale scripts %v; run go generate ./lua/...\n", stale)
		return 1
	}
	return 0
}
