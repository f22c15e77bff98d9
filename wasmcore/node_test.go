package wasmcore_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// nodeRequired reports whether REDSTREAM_REQUIRE_NODE=1 (set by .ci/run), in which case a
// missing or too old node fails the Node.js tests instead of skipping them.
func nodeRequired() bool { return os.Getenv("REDSTREAM_REQUIRE_NODE") == "1" }

// node returns the path of a Node.js of version 20 or later, once the Node.js package the
// examples import is built (js/dist), or skips (fails, when required) loudly.
func node(t *testing.T) string {
	t.Helper()
	unavailable := func(why string) string {
		msg := fmt.Sprintf("\n*** wasmcore: NO NODE.JS: %s ***\n*** install Node.js 20 or later and run `npm ci && npm run build` in js/; set REDSTREAM_REQUIRE_NODE=1 to fail instead ***", why)
		if nodeRequired() {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
		return ""
	}
	path, err := exec.LookPath("node")
	if err != nil {
		return unavailable("node is not on PATH")
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return unavailable(fmt.Sprintf("node --version: %v", err))
	}
	v := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if major < 20 {
		return unavailable(fmt.Sprintf("node %s is older than 20", v))
	}
	if _, err := os.Stat("../js/dist/index.js"); err != nil {
		return unavailable("the Node.js package is not built (../js/dist/index.js)")
	}
	return path
}

var nodeSummary = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)

// TestNodeVectors runs the committed test vectors against the committed module in Node.js,
// through the package in js/ (its own WASI imports), the way examples/node/vectors.mjs
// documents.
func TestNodeVectors(t *testing.T) {
	bin := node(t)
	out, err := exec.Command(bin, "--no-warnings", "../examples/node/vectors.mjs", "core.wasm", "../examples/node/vectors.json").CombinedOutput()
	m := nodeSummary.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("node vectors.mjs: %v\n%s", err, out)
	}
	passed, _ := strconv.Atoi(string(m[1]))
	if string(m[2]) != "0" || passed < 500 {
		t.Fatalf("node vectors.mjs: %s passed, %s failed; want every vector (at least 500) to pass\n%s", m[1], m[2], out)
	}
	t.Logf("Node.js: %s vectors passed", m[1])
}

// TestNodeExample runs examples/node/example.mjs and checks its output.
func TestNodeExample(t *testing.T) {
	bin := node(t)
	out, err := exec.Command(bin, "--no-warnings", "../examples/node/example.mjs", "core.wasm").CombinedOutput()
	if err != nil {
		t.Fatalf("node example.mjs: %v\n%s", err, out)
	}
	const want = `t=0s alice: allowed=true remaining=2 retryAfter=0µs
t=0s alice: allowed=true remaining=1 retryAfter=0µs
t=0s alice: allowed=true remaining=0 retryAfter=0µs
t=0s alice: allowed=false remaining=0 retryAfter=1000000µs
t=0s bob: allowed=true remaining=2 retryAfter=0µs
t=1s alice: allowed=true remaining=0 retryAfter=0µs
`
	if string(out) != want {
		t.Fatalf("node example.mjs printed\n%s\nwant\n%s", out, want)
	}
}
