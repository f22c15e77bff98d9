// Package yamlx reads YAML configuration the way Spring Boot binds properties, for the
// config sections of every redstream package:
//
//   - relaxed keys: "window-ms", "windowMs", "window_ms" and "WINDOWMS" name the same setting
//     ([Normalize]);
//   - dotted keys: "redis-streaming.ratelimit.enabled: true" equals the nested form, and
//     "[a.b]" keeps a dot inside one key;
//   - anchors, aliases and merge keys ("<<") resolved;
//   - errors that name the setting and its line:
//     "config: redis-streaming.ratelimit.policies.api1.limit (line 12): must be > 0".
//
// A package parses its own section from a [Node] handed over by package config.
package yamlx

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

// Error returns "config: <path> (line <n>): <msg>".
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config: %s (line %d): %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s", e.Path, e.Msg)
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

// Parse decodes the first YAML document of data into a Node whose value is a mapping, with
// dotted keys expanded and merge keys applied. An empty document gives an empty mapping. A
// document whose root is not a mapping is an error.
func Parse(data []byte) (Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Node{}, fmt.Errorf("config: %w", err)
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = resolve(doc.Content[0])
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line}
	}
	n := Node{Value: root}
	if root.Kind != yaml.MappingNode {
		return Node{}, &Error{Path: "(document)", Line: root.Line, Msg: "must be a mapping of settings"}
	}
	expanded, err := expand(root, "", 0)
	if err != nil {
		return Node{}, err
	}
	n.Value = expanded
	return n, nil
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

// expand returns a copy of mapping m with dotted keys split into nested mappings, merge keys
// applied, and aliases resolved, recursively.
func expand(m *yaml.Node, path string, depth int) (*yaml.Node, error) {
	if depth > maxDepth {
		return nil, &Error{Path: path, Line: m.Line, Msg: "nesting too deep"}
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: m.Line, Column: m.Column}
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolve(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, &Error{Path: join(path, "?"), Line: k.Line, Msg: "keys must be scalars"}
		}
		if k.Value == "<<" && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		segs := splitKey(k.Value)
		if err := insert(out, k, segs, v, path, depth); err != nil {
			return nil, err
		}
	}
	// Merge keys: explicit keys win; earlier merged mappings win over later ones.
	for _, mv := range merges {
		var srcs []*yaml.Node
		switch mv.Kind {
		case yaml.MappingNode:
			srcs = []*yaml.Node{mv}
		case yaml.SequenceNode:
			for _, s := range mv.Content {
				srcs = append(srcs, resolve(s))
			}
		}
		for _, src := range srcs {
			if src == nil || src.Kind != yaml.MappingNode {
				return nil, &Error{Path: join(path, "<<"), Line: mv.Line, Msg: "a merge key takes a mapping or a list of mappings"}
			}
			ex, err := expand(src, path, depth+1)
			if err != nil {
				return nil, err
			}
			for j := 0; j+1 < len(ex.Content); j += 2 {
				if find(out, ex.Content[j].Value) < 0 {
					out.Content = append(out.Content, ex.Content[j], ex.Content[j+1])
				}
			}
		}
	}
	return out, nil
}

// insert stores v under the key path segs in mapping out, creating nested mappings.
func insert(out, k *yaml.Node, segs []string, v *yaml.Node, path string, depth int) error {
	for i, seg := range segs {
		p := join(path, seg)
		last := i == len(segs)-1
		j := findMapping(out, seg)
		if !last {
			if j < 0 {
				key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: seg, Line: k.Line, Column: k.Column}
				child := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: k.Line, Column: k.Column}
				out.Content = append(out.Content, key, child)
				out, path = child, p
				continue
			}
			child := out.Content[j+1]
			if child.Kind == yaml.ScalarNode && child.Tag == "!!null" {
				child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: child.Line, Column: child.Column}
				out.Content[j+1] = child
			}
			if child.Kind != yaml.MappingNode {
				return &Error{Path: p, Line: k.Line, Msg: fmt.Sprintf("is also set at line %d as a value, not a mapping", out.Content[j].Line)}
			}
			out, path = child, p
			continue
		}
		var val *yaml.Node
		if v.Kind == yaml.MappingNode {
			ex, err := expand(v, p, depth+1)
			if err != nil {
				return err
			}
			val = ex
		} else {
			val = copyTree(v, depth+1)
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: seg, Line: k.Line, Column: k.Column}
		if val.Kind != yaml.MappingNode {
			j = find(out, seg)
		}
		if j < 0 {
			out.Content = append(out.Content, key, val)
			return nil
		}
		prev := out.Content[j+1]
		if prev.Kind == yaml.MappingNode && val.Kind == yaml.MappingNode {
			return mergeInto(prev, val, p)
		}
		return &Error{Path: p, Line: k.Line, Msg: fmt.Sprintf("is set twice (also at line %d)", out.Content[j].Line)}
	}
	return nil
}

// mergeInto adds the entries of src to dst, recursively; a key set in both is an error
// unless both values are mappings.
func mergeInto(dst, src *yaml.Node, path string) error {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		j := find(dst, k.Value)
		if j < 0 {
			dst.Content = append(dst.Content, k, v)
			continue
		}
		if dst.Content[j+1].Kind == yaml.MappingNode && v.Kind == yaml.MappingNode {
			if err := mergeInto(dst.Content[j+1], v, join(path, k.Value)); err != nil {
				return err
			}
			continue
		}
		return &Error{Path: join(path, k.Value), Line: k.Line, Msg: fmt.Sprintf("is set twice (also at line %d)", dst.Content[j].Line)}
	}
	return nil
}

// copyTree copies sequences (resolving aliases inside them) and returns scalars as is.
func copyTree(n *yaml.Node, depth int) *yaml.Node {
	if n.Kind != yaml.SequenceNode || depth > maxDepth {
		return n
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		e = resolve(e)
		if e.Kind == yaml.MappingNode {
			if ex, err := expand(e, "", depth+1); err == nil {
				e = ex
			}
		}
		c.Content[i] = copyTree(e, depth+1)
	}
	return &c
}

// find returns the index in m.Content of the key exactly equal to key, or -1.
func find(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// findMapping returns the index in m.Content of the key exactly equal to key; failing that,
// of a key relaxed-equal to it whose value is a mapping (so that "redis-streaming.x: 1" and
// "redisStreaming: {y: 2}" merge, as Spring binds them together); or -1.
func findMapping(m *yaml.Node, key string) int {
	if j := find(m, key); j >= 0 {
		return j
	}
	want := Normalize(key)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i+1].Kind == yaml.MappingNode && Normalize(m.Content[i].Value) == want {
			return i
		}
	}
	return -1
}

// splitKey splits a dotted key; "[...]" keeps its content as one key.
func splitKey(k string) []string {
	if !strings.ContainsAny(k, ".[") {
		return []string{k}
	}
	var segs []string
	for k != "" {
		if k[0] == '[' {
			if end := strings.IndexByte(k, ']'); end > 0 {
				segs = append(segs, k[1:end])
				k = strings.TrimPrefix(k[end+1:], ".")
				continue
			}
		}
		dot := strings.IndexAny(k, ".[")
		if dot < 0 {
			segs = append(segs, k)
			break
		}
		if dot > 0 {
			segs = append(segs, k[:dot])
		}
		if k[dot] == '.' {
			k = k[dot+1:]
		} else {
			k = k[dot:]
		}
	}
	if len(segs) == 0 {
		return []string{""}
	}
	return segs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
	return &Error{Path: n.Path, Line: n.Line(), Msg: fmt.Sprintf(format, args...)}
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
				Msg: fmt.Sprintf("is set twice (%q here and %q at line %d)", k.Value, found.Key.Value, found.Key.Line)}
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

// Unknown returns the entries of mapping n whose keys name none of known (relaxed), for
// warnings: Spring ignores unknown settings, and so do the readers built on this package.
func (n Node) Unknown(known ...string) []Node {
	es, err := n.Entries()
	if err != nil {
		return nil
	}
	norm := make([]string, len(known))
	for i, k := range known {
		norm[i] = Normalize(k)
	}
	var out []Node
	for _, e := range es {
		if !slices.Contains(norm, Normalize(e.Name())) {
			out = append(out, e)
		}
	}
	return out
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

// Bool parses true/false (also yes/no, on/off, 1/0; any case).
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
	return false, n.Errorf("must be true or false, got %q", s)
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
		return 0, n.Errorf("must be an integer, got %q", s)
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
		return 0, n.Errorf("must be a finite number, got %q", s)
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
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported node"
}
