// Package docstest checks the Markdown documents of the repository (README.md,
// CONTRIBUTING.md and the guides in docs/). Every Go block names the compiled example it is
// copied from ("from ExampleX" in a comment), and its code lines stand, in order, in that
// example's body, so no block shows code the compiler never saw. Every relative link leads
// to a file of the repository, and to a heading of it when it names one. The README's test
// command is the one CI runs.
package docstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// fromExample matches "from ExampleX" or "from pkg.ExampleX" (pkg: the example's package
// name, without _test), the marker of a block copied from an example.
var fromExample = regexp.MustCompile(`from (?:(\w+)\.)?(Example\w*)`)

// example is the body of one Example function: its package name (without _test) and its
// code lines.
type example struct {
	pkg   string
	lines []string
}

// examples returns the code lines of every Example function in the repository's tests, by
// name (names shared by several packages keep every body): the imports of its file, as one
// parenthesized import declaration, then its body.
func examples(t *testing.T) map[string][]example {
	t.Helper()
	out := map[string][]example{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		// A block may start with the imports of its example's file.
		var imports []string
		if n := len(f.Imports); n > 0 {
			imports = append(imports, "import (")
			for _, imp := range f.Imports {
				imports = append(imports, codeLines(string(src[fset.Position(imp.Pos()).Offset:fset.Position(imp.End()).Offset]))...)
			}
			imports = append(imports, ")")
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
			pkg := strings.TrimSuffix(f.Name.Name, "_test")
			lines := append(slices.Clip(imports), codeLines(body)...)
			out[fn.Name.Name] = append(out[fn.Name.Name], example{pkg, lines})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// codeLines returns the lines of src without comments, indentation and blank lines.
func codeLines(src string) []string {
	var out []string
	for _, l := range strings.Split(src, "\n") {
		if l = strings.TrimSpace(stripComment(l)); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// stripComment cuts a line comment off l, outside string and rune literals. A raw string
// spanning lines is taken line by line, which these snippets do not use.
func stripComment(l string) string {
	var quote byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '`' || c == '\'':
			quote = c
		case c == '/' && i+1 < len(l) && l[i+1] == '/':
			return l[:i]
		}
	}
	return l
}

// inOrder reports whether every line of want stands in have, in order.
func inOrder(want, have []string) (string, bool) {
	k := 0
	for _, w := range want {
		for k < len(have) && have[k] != w {
			k++
		}
		if k == len(have) {
			return w, false
		}
		k++
	}
	return "", true
}

// goBlocks returns the Go blocks of a Markdown file with their first line numbers.
func goBlocks(md string) (blocks []string, lines []int) {
	var cur []string
	in, start := false, 0
	for i, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in, start, cur = true, i+2, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks, lines = append(blocks, strings.Join(cur, "\n")), append(lines, start)
		case in:
			cur = append(cur, l)
		}
	}
	return blocks, lines
}

// documents returns the paths of the Markdown documents checked: README.md, CONTRIBUTING.md
// and docs/*.md.
func documents(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) < 10 {
		t.Fatalf("found %d guides in docs/, want the guides the README links to (wrong root?)", len(guides))
	}
	return append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}, guides...)
}

// TestGuideBlocksAreExamples: every Go block of the README, CONTRIBUTING.md and docs/*.md
// names its example and is copied from it.
func TestGuideBlocksAreExamples(t *testing.T) {
	ex := examples(t)
	if len(ex) < 20 {
		t.Fatalf("found %d Example functions in the repository, want many (wrong root?)", len(ex))
	}
	checked := 0
	for _, file := range documents(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		blocks, lines := goBlocks(string(src))
		for i, b := range blocks {
			m := fromExample.FindStringSubmatch(b)
			if m == nil {
				t.Errorf("%s:%d: a Go block that names no example (a comment \"from ExampleX\")", name, lines[i])
				continue
			}
			pkg, fn := m[1], m[2]
			var bodies []example
			for _, e := range ex[fn] {
				if pkg == "" || e.pkg == pkg {
					bodies = append(bodies, e)
				}
			}
			if len(bodies) == 0 {
				t.Errorf("%s:%d: the block names %s, which is no Example function of the repository", name, lines[i], m[0][len("from "):])
				continue
			}
			want := codeLines(b)
			if len(want) == 0 {
				t.Errorf("%s:%d: the block holds no code", name, lines[i])
				continue
			}
			missing := want[0]
			found := false
			for _, body := range bodies {
				if miss, ok := inOrder(want, body.lines); ok {
					found = true
					break
				} else {
					missing = miss
				}
			}
			if !found {
				t.Errorf("%s:%d: the block is not copied from %s: %q is not in its body (in order)", name, lines[i], m[0][len("from "):], missing)
			}
			checked++
		}
	}
	t.Logf("%d Go blocks checked against their examples", checked)
}

var (
	// link matches an inline Markdown link or image: [text](target) or ![alt](target).
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// heading matches an ATX heading.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// notAnchor is what GitHub drops from a heading's text to make its anchor.
	notAnchor = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the anchors GitHub gives the headings of a Markdown document (headings
// inside fenced blocks are not headings).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(l)
		if fenced || m == nil {
			continue
		}
		a := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a]++
			a = a + "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// TestLinks: every relative link of the documents leads to a file of the repository, and a
// link with a #fragment into a Markdown file to one of its headings.
func TestLinks(t *testing.T) {
	checked := 0
	for _, file := range documents(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		fenced := false
		for i, l := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: no such file %s", name, i+1, target, path)
					continue
				}
				checked++
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				md, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(md))[frag] {
					t.Errorf("%s:%d: link %q: no heading #%s in %s", name, i+1, target, frag, path)
				}
			}
		}
	}
	t.Logf("%d relative links checked", checked)
}

// testCommand is the README's test command, which CI runs (with -count=1).
var testCommand = regexp.MustCompile("`(go test -race -timeout 40m ./...)`")

// TestReadmeTestCommand: the README gives the command that tests the whole repository, and
// .ci/run runs that command.
func TestReadmeTestCommand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := testCommand.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md gives no test command `go test -race -timeout 40m ./...`")
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(m[1]), "go test -race", "go test -race -count=1", 1)
	if !strings.Contains(string(ci), want) {
		t.Errorf(".ci/run does not run the README's test command %q (as %q)", m[1], want)
	}
}
