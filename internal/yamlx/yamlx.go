// Package yamlx reads configuration files the way Spring Boot binds properties, for package
// config:
//
//   - YAML (multi-document) and .properties files ([ParseDocuments], [ParseProperties]);
//   - profile documents (spring.config.activate.on-profile) merged over the others
//     ([Load]);
//   - ${NAME} and ${NAME:default} placeholders, from the environment and from other keys of
//     the file;
//   - relaxed keys: "window-ms", "windowMs", "window_ms" and "WINDOWMS" name the same setting
//     ([Normalize]);
//   - dotted keys: "redis-streaming.ratelimit.enabled: true" equals the nested form, and
//     "[a.b]" keeps a dot inside one key;
//   - anchors, aliases and merge keys ("<<") resolved within a node budget linear in the
//     input's size, so that an alias bomb is an error, not a hang;
//   - one reflection binder driven by struct tags ([Bind]);
//   - errors that name the setting and its line:
//     "config: redis-streaming.ratelimit.policies.api1.limt (line 12): unknown key (did you mean limit?)".
package yamlx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is a configuration error at one setting.
type Error struct {
	// Path is the setting's dotted path in canonical (kebab-case) spelling for the keys
	// the reader knows, and as written for map keys such as policy names.
	Path string
	// Line is the 1-based line of the setting's key (or value), 0 when unknown.
	Line int
	// Msg says what is wrong.
	Msg string
}

// Errors are several errors of one file, in file order (by line); Error gives one per line.
// errors.As finds each one, errors.Is matches what any of them matches.
type Errors []error

// Error returns the errors' texts, one per line.
func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the errors.
func (es Errors) Unwrap() []error { return es }

// Join returns nil for no errors, the error itself for one, and the Errors sorted by
// line (stably; an error without a line keeps its place after those before it) for more.
// Errors among errs are flattened.
func Join(errs []error) error {
	var flat []error
	for _, e := range errs {
		if es, ok := e.(Errors); ok {
			flat = append(flat, es...)
			continue
		}
		if e != nil {
			flat = append(flat, e)
		}
	}
	switch len(flat) {
	case 0:
		return nil
	case 1:
		return flat[0]
	}
	sort.SliceStable(flat, func(i, j int) bool { return lineOf(flat[i]) < lineOf(flat[j]) })
	return Errors(flat)
}

// lineOf is the line of err's *Error, or a line after every other (0 counts as unknown).
func lineOf(err error) int {
	var e *Error
	if errors.As(err, &e) && e.Line > 0 {
		return e.Line
	}
	return int(^uint(0) >> 1)
}

// Error returns "config: <path> (line <n>): <msg>". A path longer than 160 bytes is
// shortened in the middle.
func (e *Error) Error() string {
	path := e.Path
	if len(path) > 160 {
		path = path[:80] + "..." + path[len(path)-60:]
	}
	if e.Line > 0 {
		return fmt.Sprintf("config: %s (line %d): %s", path, e.Line, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s", path, e.Msg)
}

// Normalize returns the relaxed form of a key: lowercase, without '-' and '_'. Two keys name
// the same setting when their relaxed forms are equal.
func Normalize(key string) string {
	b := make([]byte, 0, len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '-' || c == '_':
		case 'A' <= c && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// Equal reports whether keys a and b name the same setting (equal relaxed forms).
func Equal(a, b string) bool { return Normalize(a) == Normalize(b) }

// Node is a YAML value with the path that leads to it. The zero Node is absent.
type Node struct {
	// Path is the dotted path of the value, e.g. "redis-streaming.ratelimit".
	Path string
	// Key is the key node the value is stored under (nil for the document root).
	Key *yaml.Node
	// Value is the value node (never an alias: aliases are resolved).
	Value *yaml.Node
}

// Budget bounds the work of expanding one input: every node the expansion visits or
// copies (aliases, merge keys) counts one. NodeBudget returns the budget of an input of n
// bytes: linear in n, and far above what a document without aliases can use (a node takes
// at least two bytes of input).
func NodeBudget(n int) int { return 4096 + 16*n }

// Parse decodes the first YAML document of data into a Node whose value is a mapping, with
// dotted keys expanded and merge keys applied. An empty document gives an empty mapping. A
// document whose root is not a mapping is an error.
func Parse(data []byte) (Node, error) {
	docs, err := ParseDocuments(data)
	if err != nil {
		return Node{}, err
	}
	return docs[0], nil
}

// ParseDocuments decodes every document of a YAML stream ("---" separated) into mappings
// as Parse does. There is always at least one document. The expansion of all documents
// shares one budget ([NodeBudget] of len(data)); past it, the error names the alias or
// merge key whose expansion exceeded it.
func ParseDocuments(data []byte) ([]Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	ex := &expander{budget: NodeBudget(len(data))}
	var out []Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		n, err := ex.document(&doc)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		out = append(out, Node{Value: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1}})
	}
	return out, nil
}

func (ex *expander) document(doc *yaml.Node) (Node, error) {
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: doc.Line}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = resolve(doc.Content[0])
	}
	if root == nil || (root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
		line := doc.Line
		if root != nil {
			line = root.Line
		}
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
	}
	if root.Kind != yaml.MappingNode {
		return Node{}, &Error{Path: "(document)", Line: root.Line, Msg: "must be a mapping of settings"}
	}
	expanded, err := ex.expand(root, "", 0)
	if err != nil {
		return Node{}, err
	}
	return Node{Value: expanded}, nil
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// maxDepth bounds nesting, so that a hostile document (alias cycles, deep nesting) cannot
// exhaust the stack.
const maxDepth = 64

// expander expands documents within a node budget. index holds, for every mapping it
// built, the position of each exact key and of each relaxed key whose value is a mapping,
// so that expansion stays linear in the number of keys.
type expander struct {
	budget int
	used   int
	alias  *yaml.Node // the outermost alias or merge key being expanded, nil if none
	apath  string     // its path
	index  map[*yaml.Node]*mapIndex
}

type mapIndex struct {
	m       *yaml.Node // set for a small mapping without index maps: lookups scan it
	exact   map[string]int
	relaxed map[string]int // relaxed key -> index, for keys whose value is a mapping
}

// findExact returns the index of the first key equal to k.
func (ix *mapIndex) findExact(k string) (int, bool) {
	if ix.m != nil {
		for i := 0; i+1 < len(ix.m.Content); i += 2 {
			if ix.m.Content[i].Value == k {
				return i, true
			}
		}
		return 0, false
	}
	i, ok := ix.exact[k]
	return i, ok
}

// findRelaxed returns the index of the first key relaxed-equal to k whose value is a
// mapping.
func (ix *mapIndex) findRelaxed(k string) (int, bool) {
	if ix.m != nil {
		n := Normalize(k)
		for i := 0; i+1 < len(ix.m.Content); i += 2 {
			if ix.m.Content[i+1].Kind == yaml.MappingNode && Normalize(ix.m.Content[i].Value) == n {
				return i, true
			}
		}
		return 0, false
	}
	i, ok := ix.relaxed[Normalize(k)]
	return i, ok
}

// setRelaxed records that the value at i became a mapping.
func (ix *mapIndex) setRelaxed(k string, i int) {
	if ix.m == nil {
		if _, dup := ix.relaxed[Normalize(k)]; !dup {
			ix.relaxed[Normalize(k)] = i
		}
	}
}

// spend counts n nodes against the budget.
func (ex *expander) spend(n *yaml.Node, path string) error {
	ex.used++
	if ex.used <= ex.budget {
		return nil
	}
	at := n
	what := "the document"
	if ex.alias != nil {
		at, path = ex.alias, ex.apath
		if ex.alias.Kind == yaml.AliasNode {
			what = "alias *" + ex.alias.Value
		} else {
			what = "merge key <<"
		}
	}
	if path == "" {
		path = "(document)"
	}
	return &Error{Path: path, Line: at.Line, Msg: fmt.Sprintf("%s expands past the limit of %d nodes for an input of this size (an alias bomb?)", what, ex.budget)}
}

// enter marks an alias (or merge key) being expanded; the returned function restores the
// previous state.
func (ex *expander) enter(n *yaml.Node, path string) func() {
	if ex.alias != nil || n == nil {
		return func() {}
	}
	ex.alias, ex.apath = n, path
	return func() { ex.alias = nil }
}

// indexFrom is the size from which a mapping gets an index; smaller ones are scanned.
const indexFrom = 16

func (ex *expander) idx(m *yaml.Node) *mapIndex {
	if ex.index == nil {
		ex.index = map[*yaml.Node]*mapIndex{}
	}
	ix := ex.index[m]
	if ix == nil && len(m.Content) < 2*indexFrom {
		return &mapIndex{m: m}
	}
	if ix == nil {
		ix = &mapIndex{exact: map[string]int{}, relaxed: map[string]int{}}
		for i := 0; i+1 < len(m.Content); i += 2 {
			ix.add(m, i)
		}
		ex.index[m] = ix
	}
	return ix
}

func (ix *mapIndex) add(m *yaml.Node, i int) {
	if ix.m != nil {
		return
	}
	k := m.Content[i].Value
	if _, dup := ix.exact[k]; !dup {
		ix.exact[k] = i
	}
	if m.Content[i+1].Kind == yaml.MappingNode {
		if _, dup := ix.relaxed[Normalize(k)]; !dup {
			ix.relaxed[Normalize(k)] = i
		}
	}
}

func (ex *expander) appendEntry(m, k, v *yaml.Node) {
	m.Content = append(m.Content, k, v)
	ex.idx(m).add(m, len(m.Content)-2)
}

// expand returns a copy of mapping m with dotted keys split into nested mappings, merge keys
// applied, and aliases resolved, recursively.
func (ex *expander) expand(m *yaml.Node, path string, depth int) (*yaml.Node, error) {
	if depth > maxDepth {
		return nil, &Error{Path: orDoc(path), Line: m.Line, Msg: "nesting too deep"}
	}
	if err := ex.spend(m, path); err != nil {
		return nil, err
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: m.Line, Column: m.Column}
	type merge struct{ key, val *yaml.Node }
	var merges []merge
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, raw := m.Content[i], m.Content[i+1]
		v := resolve(raw)
		if k.Kind != yaml.ScalarNode {
			return nil, &Error{Path: join(path, "?"), Line: k.Line, Msg: "keys must be scalars"}
		}
		if v == nil || v.Kind == yaml.AliasNode {
			return nil, &Error{Path: join(path, k.Value), Line: k.Line, Msg: "alias chain too long"}
		}
		if k.Value == "<<" && k.Tag == "!!merge" {
			merges = append(merges, merge{k, v})
			continue
		}
		segs, err := splitKey(k.Value)
		if err != nil {
			return nil, &Error{Path: join(path, k.Value), Line: k.Line, Msg: err.Error()}
		}
		var leave func()
		if raw.Kind == yaml.AliasNode {
			leave = ex.enter(raw, join(path, k.Value))
		}
		err = ex.insert(out, k, segs, v, path, depth)
		if leave != nil {
			leave()
		}
		if err != nil {
			return nil, err
		}
	}
	// Merge keys: explicit keys win; earlier merged mappings win over later ones.
	for _, mg := range merges {
		leave := ex.enter(mg.key, join(path, "<<"))
		err := ex.merge(out, mg.val, path, depth)
		leave()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (ex *expander) merge(out, mv *yaml.Node, path string, depth int) error {
	var srcs []*yaml.Node
	switch mv.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{mv}
	case yaml.SequenceNode:
		for _, s := range mv.Content {
			srcs = append(srcs, resolve(s))
		}
	}
	if len(srcs) == 0 {
		return &Error{Path: join(path, "<<"), Line: mv.Line, Msg: "a merge key takes a mapping or a list of mappings"}
	}
	for _, src := range srcs {
		if src == nil || src.Kind != yaml.MappingNode {
			return &Error{Path: join(path, "<<"), Line: mv.Line, Msg: "a merge key takes a mapping or a list of mappings"}
		}
		exm, err := ex.expand(src, path, depth+1)
		if err != nil {
			return err
		}
		ix := ex.idx(out)
		for j := 0; j+1 < len(exm.Content); j += 2 {
			if _, set := ix.findExact(exm.Content[j].Value); !set {
				ex.appendEntry(out, exm.Content[j], exm.Content[j+1])
			}
		}
	}
	return nil
}

// insert stores v under the key path segs in mapping out, creating nested mappings.
func (ex *expander) insert(out, k *yaml.Node, segs []string, v *yaml.Node, path string, depth int) error {
	if depth+len(segs) > maxDepth {
		return &Error{Path: join(path, k.Value), Line: k.Line, Msg: "nesting too deep"}
	}
	for i, seg := range segs {
		p := join(path, seg)
		if err := ex.spend(k, p); err != nil {
			return err
		}
		last := i == len(segs)-1
		ix := ex.idx(out)
		if !last {
			j, ok := ix.findExact(seg)
			if !ok {
				j, ok = ix.findRelaxed(seg)
			}
			if !ok {
				key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: seg, Line: k.Line, Column: k.Column}
				child := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: k.Line, Column: k.Column}
				ex.appendEntry(out, key, child)
				out, path = child, p
				continue
			}
			child := out.Content[j+1]
			if child.Kind == yaml.ScalarNode && child.Tag == "!!null" {
				child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: child.Line, Column: child.Column}
				out.Content[j+1] = child
				ix.setRelaxed(seg, j)
			}
			if child.Kind != yaml.MappingNode {
				return &Error{Path: p, Line: k.Line, Msg: fmt.Sprintf("is also set at line %d as a value, not a mapping", out.Content[j].Line)}
			}
			out, path = child, p
			continue
		}
		var val *yaml.Node
		var err error
		switch v.Kind {
		case yaml.MappingNode:
			val, err = ex.expand(v, p, depth+1)
		case yaml.SequenceNode:
			val, err = ex.sequence(v, p, depth+1)
		default:
			val, err = v, ex.spend(v, p)
		}
		if err != nil {
			return err
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: seg, Line: k.Line, Column: k.Column}
		j, ok := ix.findExact(seg)
		if !ok && val.Kind == yaml.MappingNode {
			j, ok = ix.findRelaxed(seg)
		}
		if !ok {
			ex.appendEntry(out, key, val)
			return nil
		}
		prev := out.Content[j+1]
		if prev.Kind == yaml.MappingNode && val.Kind == yaml.MappingNode {
			return ex.mergeInto(prev, val, p)
		}
		if prev.Kind == yaml.ScalarNode && prev.Tag == "!!null" && val.Kind == yaml.MappingNode {
			out.Content[j+1] = val
			ix.setRelaxed(seg, j)
			return nil
		}
		return &Error{Path: p, Line: k.Line, Msg: fmt.Sprintf("is set twice (also at line %d)", out.Content[j].Line)}
	}
	return nil
}

// mergeInto adds the entries of src to dst, recursively; a key set in both is an error
// unless both values are mappings.
func (ex *expander) mergeInto(dst, src *yaml.Node, path string) error {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		if err := ex.spend(k, path); err != nil {
			return err
		}
		ix := ex.idx(dst)
		j, ok := ix.findExact(k.Value)
		if !ok && v.Kind == yaml.MappingNode {
			j, ok = ix.findRelaxed(k.Value)
		}
		if !ok {
			ex.appendEntry(dst, k, v)
			continue
		}
		if dst.Content[j+1].Kind == yaml.MappingNode && v.Kind == yaml.MappingNode {
			if err := ex.mergeInto(dst.Content[j+1], v, join(path, k.Value)); err != nil {
				return err
			}
			continue
		}
		return &Error{Path: join(path, k.Value), Line: k.Line, Msg: fmt.Sprintf("is set twice (also at line %d)", dst.Content[j].Line)}
	}
	return nil
}

// sequence copies a sequence, resolving aliases and expanding mappings inside it.
func (ex *expander) sequence(n *yaml.Node, path string, depth int) (*yaml.Node, error) {
	if depth > maxDepth {
		return nil, &Error{Path: orDoc(path), Line: n.Line, Msg: "nesting too deep"}
	}
	if err := ex.spend(n, path); err != nil {
		return nil, err
	}
	c := *n
	c.Content = make([]*yaml.Node, 0, min(len(n.Content), 1024))
	for i, raw := range n.Content {
		e := resolve(raw)
		if e == nil || e.Kind == yaml.AliasNode {
			return nil, &Error{Path: orDoc(path), Line: raw.Line, Msg: "alias chain too long"}
		}
		var leave func()
		p := path + "[" + strconv.Itoa(i) + "]"
		if raw.Kind == yaml.AliasNode {
			leave = ex.enter(raw, p)
		}
		var err error
		switch e.Kind {
		case yaml.MappingNode:
			e, err = ex.expand(e, p, depth+1)
		case yaml.SequenceNode:
			e, err = ex.sequence(e, p, depth+1)
		default:
			err = ex.spend(e, p)
		}
		if leave != nil {
			leave()
		}
		if err != nil {
			return nil, err
		}
		c.Content = append(c.Content, e)
	}
	return &c, nil
}

// splitKey splits a dotted key; "[...]" keeps its content as one key ("a[0]" is "a", "0").
// A '[' without its ']' and an empty part ("a..b", ".a", "a.") are errors.
func splitKey(k string) ([]string, error) {
	if !strings.ContainsAny(k, ".[]") {
		return []string{k}, nil
	}
	var segs []string
	var cur strings.Builder
	pending := false // cur holds a part (possibly empty) not yet appended
	for i := 0; i < len(k); {
		switch c := k[i]; c {
		case '[':
			end := strings.IndexByte(k[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("has a '[' without its ']' (quote the key, or write [%s] for a key with dots)", k[i+1:])
			}
			if pending || cur.Len() > 0 {
				segs = append(segs, cur.String())
				cur.Reset()
			}
			segs = append(segs, k[i+1:i+1+end])
			pending = false
			i += end + 2
			if i < len(k) {
				if k[i] != '.' && k[i] != '[' {
					return nil, fmt.Errorf("needs a '.' after ']'")
				}
				if k[i] == '.' {
					i++
					if i == len(k) {
						return nil, errors.New("has an empty part")
					}
					pending = true
				}
			}
		case ']':
			return nil, errors.New("has a ']' without its '['")
		case '.':
			if cur.Len() == 0 {
				return nil, errors.New("has an empty part")
			}
			segs = append(segs, cur.String())
			cur.Reset()
			pending = true
			i++
			if i == len(k) {
				return nil, errors.New("has an empty part")
			}
		default:
			cur.WriteByte(c)
			i++
		}
	}
	if cur.Len() > 0 {
		segs = append(segs, cur.String())
	} else if pending {
		return nil, errors.New("has an empty part")
	}
	return segs, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orDoc(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

// Exists reports whether the node is present (not the zero Node).
func (n Node) Exists() bool { return n.Value != nil }

// IsNull reports whether the node is absent or an explicit null ("key:" or "key: ~").
func (n Node) IsNull() bool {
	return n.Value == nil || (n.Value.Kind == yaml.ScalarNode && n.Value.Tag == "!!null")
}

// Line returns the line of the node's key (or of its value for the root), 0 if absent.
func (n Node) Line() int {
	switch {
	case n.Key != nil:
		return n.Key.Line
	case n.Value != nil:
		return n.Value.Line
	}
	return 0
}

// Errorf returns an *Error at the node.
func (n Node) Errorf(format string, args ...any) error {
	return &Error{Path: orDoc(n.Path), Line: n.Line(), Msg: fmt.Sprintf(format, args...)}
}

// Name returns the last key of the node's path, as written in the document.
func (n Node) Name() string {
	if n.Key != nil {
		return n.Key.Value
	}
	return ""
}

// Get returns the value of the setting key (relaxed) in the mapping n, with canonical path
// n.Path + "." + key. ok is false when the setting is absent or null. It is an error when n
// is not a mapping or when two keys of n name the setting.
func (n Node) Get(key string) (Node, bool, error) {
	if n.IsNull() {
		return Node{}, false, nil
	}
	if n.Value.Kind != yaml.MappingNode {
		return Node{}, false, n.Errorf("must be a mapping, got %s", kindName(n.Value))
	}
	want := Normalize(key)
	var found Node
	for i := 0; i+1 < len(n.Value.Content); i += 2 {
		k := n.Value.Content[i]
		if Normalize(k.Value) != want {
			continue
		}
		if found.Exists() {
			return Node{}, false, &Error{Path: join(n.Path, key), Line: k.Line,
				Msg: fmt.Sprintf("is set twice (%q here and %q at line %d)", clip(k.Value), clip(found.Key.Value), found.Key.Line)}
		}
		found = Node{Path: join(n.Path, key), Key: k, Value: n.Value.Content[i+1]}
	}
	if !found.Exists() || found.IsNull() {
		return found, false, nil
	}
	return found, true, nil
}

// Lookup follows a dotted path of settings from n, e.g. "redis-streaming.ratelimit".
func (n Node) Lookup(path string) (Node, bool, error) {
	cur := n
	for _, seg := range strings.Split(path, ".") {
		next, ok, err := cur.Get(seg)
		if err != nil || !ok {
			return next, false, err
		}
		cur = next
	}
	return cur, true, nil
}

// LineOf returns the line of the deepest node of path (a dotted path of settings below n,
// relaxed keys) that n holds; n's own line at worst.
func (n Node) LineOf(path string) int {
	line, cur := n.Line(), n
	if path == "" {
		return line
	}
	for _, seg := range strings.Split(path, ".") {
		next, _, err := cur.Get(seg)
		if err != nil || !next.Exists() {
			break
		}
		cur, line = next, next.Line()
	}
	return line
}

// Entries returns the entries of the mapping n in document order, each with path
// n.Path + "." + key as written (for maps keyed by user names, such as policies). A null n
// has no entries.
func (n Node) Entries() ([]Node, error) {
	if n.IsNull() {
		return nil, nil
	}
	if n.Value.Kind != yaml.MappingNode {
		return nil, n.Errorf("must be a mapping, got %s", kindName(n.Value))
	}
	out := make([]Node, 0, len(n.Value.Content)/2)
	for i := 0; i+1 < len(n.Value.Content); i += 2 {
		k := n.Value.Content[i]
		out = append(out, Node{Path: join(n.Path, k.Value), Key: k, Value: n.Value.Content[i+1]})
	}
	return out, nil
}

func (n Node) scalar(what string) (string, error) {
	if n.Value == nil {
		return "", n.Errorf("is missing")
	}
	if n.Value.Kind != yaml.ScalarNode {
		return "", n.Errorf("must be %s, got %s", what, kindName(n.Value))
	}
	return strings.TrimSpace(n.Value.Value), nil
}

// String returns the scalar's text.
func (n Node) String() (string, error) { return n.scalar("a string") }

// Bool parses true/false (also yes/no, on/off, 1/0; any case), as Spring converts strings.
func (n Node) Bool() (bool, error) {
	s, err := n.scalar("true or false")
	if err != nil {
		return false, err
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, n.Errorf("must be true or false, got %q", clip(s))
}

// Int64 parses a decimal integer (underscores between digits allowed, as in YAML).
func (n Node) Int64() (int64, error) {
	s, err := n.scalar("an integer")
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if perr != nil {
		if errors.Is(perr, strconv.ErrRange) {
			return 0, n.Errorf("is out of range: %s", s)
		}
		return 0, n.Errorf("must be an integer, got %q", clip(s))
	}
	return v, nil
}

// Float64 parses a finite decimal number.
func (n Node) Float64() (float64, error) {
	s, err := n.scalar("a number")
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if perr != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, n.Errorf("must be a finite number, got %q", clip(s))
	}
	return v, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", clip(n.Value))
	}
	return "an unsupported node"
}
