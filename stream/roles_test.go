package stream

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// roleTypes are the types of the consumer's runtime whose fields only their own file may
// use: the handler runtime, its roles and the state they own. Other files reach them through
// their methods. scope, the read-only identity every role is given, is not one of them.
var roleTypes = []string{
	"handlerRT",    // handler.go: the roles of one stream, and their start and stop order
	"reader",       // reader.go
	"dispatcher",   // dispatch.go: slots, the entries in hand, workers
	"keyLines",     // ordered.go: the dispatcher's per-key lines
	"acker",        // ack.go
	"retrier",      // reclaim.go: retries, the pending-entry scan, takeover catch-up
	"retrySet",     // retryqueue.go: the retrier's queue
	"retryQueue",   // retryqueue.go
	"leaseKeeper",  // lease.go
	"deadLetterer", // dlpath.go
	"dlWaitSet",    // dlpath.go: the dead-letterer's waiting entries
	"housekeeper",  // housekeeping.go
	"mover",        // mover.go
	"limiter",      // limit.go: the consumption limit
	"ownerSet",     // owner.go: the partition owner
	"ownedPart",    // owner.go
}

// TestRoleFieldsStayInTheirFile type-checks the package's non-test files and fails for every
// use of a role type's field (a selector, a promoted selector or a composite-literal key)
// outside the file that declares the type.
func TestRoleFieldsStayInTheirFile(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Imported packages are stubs: only the package's own types matter here, and the
	// checker goes on past the errors the stubs cause.
	conf := types.Config{Importer: stubImporter{std: importer.Default()}, Error: func(error) {}}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	pkg, _ := conf.Check("github.com/redstream-go/redstream/stream", fset, files, info)

	owner := map[*types.Var]string{} // field -> its role type
	home := map[string]string{}      // role type -> its file
	for _, name := range roleTypes {
		obj, ok := pkg.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			t.Errorf("role type %s is not declared in the package (update roleTypes)", name)
			continue
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			t.Errorf("role type %s is not a struct", name)
			continue
		}
		home[name] = filepath.Base(fset.Position(obj.Pos()).Filename)
		for i := 0; i < st.NumFields(); i++ {
			owner[st.Field(i)] = name
		}
	}
	var bad []string
	for id, obj := range info.Uses {
		v, ok := obj.(*types.Var)
		if !ok || !v.IsField() {
			continue
		}
		role, ok := owner[v]
		if !ok {
			continue
		}
		pos := fset.Position(id.Pos())
		if file := filepath.Base(pos.Filename); file != home[role] {
			bad = append(bad, pos.String()+": field "+role+"."+v.Name()+" (declared in "+home[role]+") used in "+file)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	if len(owner) == 0 {
		t.Fatal("no role field found: the check checks nothing")
	}
}

// stubImporter imports the standard library from its export data and every other package
// as an empty stub.
type stubImporter struct{ std types.Importer }

func (s stubImporter) Import(path string) (*types.Package, error) {
	if !strings.Contains(strings.Split(path, "/")[0], ".") {
		if p, err := s.std.Import(path); err == nil {
			return p, nil
		}
	}
	p := types.NewPackage(path, filepath.Base(path))
	p.MarkComplete()
	return p, nil
}
