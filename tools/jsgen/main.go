// Command jsgen writes what the TypeScript package in js/ shares with the Go Redis engine,
// taken from the Go code itself so that the two cannot drift:
//
//   - js/src/generated/algorithms.ts: the rows of core's registry (core.Algorithms: name,
//     shape, state words), in its order, which the package reads instead of restating them;
//   - js/src/generated/scripts.ts: every script of package lua (lua.Scripts: name, source,
//     SHA-1, read-only), whatever scripts the package holds;
//   - js/src/generated/schema.ts: the key schema and ARGV layout of each algorithm and
//     deduplicator (default key prefixes, script names, key roles, the arguments after the
//     parameters), read off the calls redisbackend really sends;
//   - js/test/generated/schema-vectors.json: calls of redisbackend's limiters and
//     deduplicators (spec, key, time, cost) with the exact Redis keys and ARGV they sent, which
//     the package's tests compare with its own.
//
// It drives redisbackend on an in-process miniredis through a client that records every
// command, so nothing here restates the schema: a change to redisbackend's keys or arguments
// changes the output, and CI's `go generate ./...` + `git diff` check fails until the package
// is regenerated and its tests pass. Run by tools/jsgen/generate.go:
//
//	go generate ./tools/jsgen/
//
// With -check it writes nothing and exits 1 naming the files that would change.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	js := flag.String("js", "../../js", "the TypeScript package's directory")
	check := flag.Bool("check", false, "report stale files and exit 1 instead of writing them")
	flag.Parse()
	files, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jsgen:", err)
		os.Exit(2)
	}
	stale := 0
	for _, f := range files {
		path := filepath.Join(*js, filepath.FromSlash(f.path))
		old, _ := os.ReadFile(path)
		if bytes.Equal(old, f.data) {
			continue
		}
		if *check {
			fmt.Fprintf(os.Stderr, "jsgen: %s is stale; run go generate ./tools/jsgen/\n", path)
			stale++
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "jsgen:", err)
			os.Exit(2)
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "jsgen:", err)
			os.Exit(2)
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}
