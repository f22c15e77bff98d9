package yamlx

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// LoadOptions says how [Load] selects and resolves documents.
type LoadOptions struct {
	// Profiles are the active profiles. Nil means Getenv("SPRING_PROFILES_ACTIVE") (a
	// comma-separated list), else spring.profiles.active of the documents without an
	// activation condition; spring.profiles.include of those documents adds to either.
	// With none active, the profile "default" is, as in Spring Boot.
	Profiles []string
	// Getenv looks up environment variables for placeholders and SPRING_PROFILES_ACTIVE.
	// Nil means none is set.
	Getenv func(string) (string, bool)
	// Lenient turns the legacy key spring.profiles (Spring Boot before 2.4) from an error
	// into a warning, reading it as spring.config.activate.on-profile.
	Lenient bool
	// Warn receives warnings; nil drops them.
	Warn func(n Node, msg string)
	// InputSize is the size of the input in bytes; placeholders may produce at most
	// 1 MiB + 64 × InputSize bytes in total.
	InputSize int
}

// Loaded is the result of [Load].
type Loaded struct {
	// Root is the merged mapping of the active documents, placeholders resolved.
	Root Node
	// Profiles are the active profiles, in order ("default" when none was given).
	Profiles []string
	// Defined are the profiles named by on-profile conditions of the documents, sorted.
	Defined []string
}

// Load merges the active documents as Spring Boot does: documents apply in order, a
// document with spring.config.activate.on-profile only when its condition holds for the
// active profiles (a profile name, "!name", "a & b", "a | b", parentheses, or a list of
// alternatives); a key of a later document overrides the same key (relaxed) of an earlier
// one, and mappings merge key by key. Then every ${NAME} and ${NAME:default} in a value is
// resolved: first from the environment (NAME as written, then in Spring's environment form
// SPRING_DATA_REDIS_HOST for spring.data.redis.host), then from the key NAME of the merged
// file; an unresolvable placeholder without a default is an error, as in Spring.
func Load(docs []Node, o LoadOptions) (Loaded, error) {
	if o.Getenv == nil {
		o.Getenv = func(string) (string, bool) { return "", false }
	}
	if o.Warn == nil {
		o.Warn = func(Node, string) {}
	}
	conds, defined, err := conditions(docs, o)
	if err != nil {
		return Loaded{}, err
	}
	active, err := activeProfiles(docs, conds, o)
	if err != nil {
		return Loaded{}, err
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1}
	for i, d := range docs {
		if conds[i].Exists() {
			ok, err := matchProfiles(conds[i], active)
			if err != nil {
				return Loaded{}, err
			}
			if !ok {
				continue
			}
		}
		override(root, d.Value)
	}
	out := Node{Value: root}
	r := &resolver{root: out, getenv: o.Getenv, budget: 1<<20 + 64*o.InputSize, state: map[*yaml.Node]int{}}
	if err := r.walk(root, ""); err != nil {
		return Loaded{}, err
	}
	return Loaded{Root: out, Profiles: active, Defined: defined}, nil
}

// conditions returns each document's profile condition (spring.config.activate.on-profile,
// or the legacy spring.profiles in lenient mode; a Node that does not exist for none) and
// the profiles the conditions name, sorted.
func conditions(docs []Node, o LoadOptions) ([]Node, []string, error) {
	conds := make([]Node, len(docs))
	var defined []string
	for i, d := range docs {
		c, ok, err := d.Lookup("spring.config.activate.on-profile")
		if err != nil {
			return nil, nil, err
		}
		if legacy, lok, err := d.Lookup("spring.profiles"); err != nil {
			return nil, nil, err
		} else if lok && legacy.Value.Kind != yaml.MappingNode {
			if !o.Lenient {
				return nil, nil, legacy.Errorf("is not read since Spring Boot 2.4; write spring.config.activate.on-profile")
			}
			o.Warn(legacy, "spring.profiles is not read since Spring Boot 2.4; read as spring.config.activate.on-profile")
			if !ok {
				c, ok = legacy, true
			}
		}
		if !ok {
			continue
		}
		names, err := profileNames(c)
		if err != nil {
			return nil, nil, err
		}
		defined = append(defined, names...)
		conds[i] = c
	}
	slices.Sort(defined)
	return conds, slices.Compact(defined), nil
}

// activeProfiles returns the active profiles: LoadOptions.Profiles, else
// SPRING_PROFILES_ACTIVE, else spring.profiles.active of the unconditional documents (its
// placeholders resolved), then spring.profiles.include; "default" when none.
func activeProfiles(docs []Node, conds []Node, o LoadOptions) ([]string, error) {
	active := o.Profiles
	if active == nil {
		if env, ok := o.Getenv("SPRING_PROFILES_ACTIVE"); ok && strings.TrimSpace(env) != "" {
			active = splitList(env)
		}
	}
	var include []string
	for i, d := range docs {
		if conds[i].Exists() {
			continue
		}
		if active == nil || o.Profiles == nil {
			if a, ok, err := d.Lookup("spring.profiles.active"); err != nil {
				return nil, err
			} else if ok && active == nil {
				if active, err = resolvedList(d, a, o); err != nil {
					return nil, err
				}
			}
		}
		if in, ok, err := d.Lookup("spring.profiles.include"); err != nil {
			return nil, err
		} else if ok {
			l, err := stringList(in)
			if err != nil {
				return nil, err
			}
			include = append(include, l...)
		}
	}
	for _, p := range include {
		if !slices.Contains(active, p) {
			active = append(active, p)
		}
	}
	if len(active) == 0 {
		active = []string{"default"}
	}
	return active, nil
}

// resolvedList reads the list a of document d with its placeholders resolved, as Spring
// does for spring.profiles.active: ${APP_ENV:dev}.
func resolvedList(d, a Node, o LoadOptions) ([]string, error) {
	list, err := stringList(a)
	if err != nil {
		return nil, err
	}
	r := &resolver{root: d, getenv: o.Getenv, budget: 1<<20 + 64*o.InputSize, state: map[*yaml.Node]int{}}
	var resolved []string
	for _, p := range list {
		v, err := r.expand(p, a.Path, a.Line(), 0)
		if err != nil {
			return nil, err
		}
		resolved = append(resolved, splitList(v)...)
	}
	return resolved, nil
}

// override applies the entries of src over dst: mappings merge, anything else replaces.
func override(dst, src *yaml.Node) {
	idx := make(map[string]int, len(dst.Content)/2)
	for i := 0; i+1 < len(dst.Content); i += 2 {
		n := Normalize(dst.Content[i].Value)
		if _, dup := idx[n]; !dup {
			idx[n] = i
		}
	}
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		j, ok := idx[Normalize(k.Value)]
		if !ok {
			dst.Content = append(dst.Content, k, v)
			idx[Normalize(k.Value)] = len(dst.Content) - 2
			continue
		}
		prev := dst.Content[j+1]
		if prev.Kind == yaml.MappingNode && v.Kind == yaml.MappingNode {
			override(prev, v)
			continue
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" && prev.Kind == yaml.MappingNode {
			continue // "key:" in a later document keeps the earlier mapping
		}
		dst.Content[j], dst.Content[j+1] = k, v
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// stringList reads a comma-separated string or a list of strings.
func stringList(n Node) ([]string, error) {
	switch n.Value.Kind {
	case yaml.ScalarNode:
		return splitList(n.Value.Value), nil
	case yaml.SequenceNode:
		var out []string
		for _, e := range n.Value.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, n.Errorf("must be a list of names")
			}
			out = append(out, splitList(e.Value)...)
		}
		return out, nil
	case yaml.MappingNode: // properties: a[0]=x, a[1]=y
		var out []string
		es, _ := n.Entries()
		for _, e := range es {
			if e.Value.Kind != yaml.ScalarNode {
				return nil, n.Errorf("must be a list of names")
			}
			out = append(out, splitList(e.Value.Value)...)
		}
		return out, nil
	}
	return nil, n.Errorf("must be a list of names")
}

// profileNames returns the profile names an on-profile condition mentions.
func profileNames(c Node) ([]string, error) {
	exprs, err := stringList(Node{Path: c.Path, Key: c.Key, Value: c.Value})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range exprs {
		p := &profileExpr{s: e, active: nil}
		if _, err := p.parse(); err != nil {
			return nil, c.Errorf("%v", err)
		}
		out = append(out, p.names...)
	}
	return out, nil
}

// matchProfiles reports whether a document's on-profile condition holds: any of its
// (comma or list) alternatives.
func matchProfiles(c Node, active []string) (bool, error) {
	exprs, err := stringList(c)
	if err != nil {
		return false, err
	}
	for _, e := range exprs {
		p := &profileExpr{s: e, active: active}
		ok, err := p.parse()
		if err != nil {
			return false, c.Errorf("%v", err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// profileExpr evaluates Spring's profile expressions: name, !e, e & e, e | e, (e).
type profileExpr struct {
	s      string
	i      int
	depth  int
	active []string
	names  []string
}

func (p *profileExpr) parse() (bool, error) {
	v, err := p.or()
	if err != nil {
		return false, err
	}
	p.space()
	if p.i < len(p.s) {
		return false, fmt.Errorf("malformed profile expression %q at %q", clip(p.s), clip(p.s[p.i:]))
	}
	return v, nil
}

func (p *profileExpr) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *profileExpr) or() (bool, error) {
	v, err := p.and()
	for err == nil {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '|' {
			break
		}
		p.i++
		var w bool
		w, err = p.and()
		v = v || w
	}
	return v, err
}

func (p *profileExpr) and() (bool, error) {
	v, err := p.unary()
	for err == nil {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '&' {
			break
		}
		p.i++
		var w bool
		w, err = p.unary()
		v = v && w
	}
	return v, err
}

func (p *profileExpr) unary() (bool, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 32 {
		return false, fmt.Errorf("profile expression %q nests too deep", clip(p.s))
	}
	p.space()
	if p.i >= len(p.s) {
		return false, fmt.Errorf("malformed profile expression %q", clip(p.s))
	}
	switch p.s[p.i] {
	case '!':
		p.i++
		v, err := p.unary()
		return !v, err
	case '(':
		p.i++
		v, err := p.or()
		if err != nil {
			return false, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return false, fmt.Errorf("malformed profile expression %q: missing ')'", clip(p.s))
		}
		p.i++
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune("!&|() \t", rune(p.s[p.i])) {
		p.i++
	}
	if p.i == start {
		return false, fmt.Errorf("malformed profile expression %q", clip(p.s))
	}
	name := p.s[start:p.i]
	p.names = append(p.names, name)
	return slices.Contains(p.active, name), nil
}

// resolver resolves placeholders in place, each scalar once.
type resolver struct {
	root   Node
	getenv func(string) (string, bool)
	budget int
	state  map[*yaml.Node]int // 1 resolving, 2 done
}

const maxPlaceholderDepth = 32

func (r *resolver) walk(n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := r.walk(n.Content[i+1], join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			if err := r.walk(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return r.scalar(n, path, 0)
	}
	return nil
}

func (r *resolver) scalar(n *yaml.Node, path string, depth int) error {
	switch r.state[n] {
	case 2:
		return nil
	case 1:
		return &Error{Path: orDoc(path), Line: n.Line, Msg: "placeholders refer to each other in a cycle"}
	}
	if !strings.Contains(n.Value, "${") {
		r.state[n] = 2
		return nil
	}
	r.state[n] = 1
	s, err := r.expand(n.Value, path, n.Line, depth)
	if err != nil {
		return err
	}
	n.Value, n.Tag, n.Style = s, "!!str", 0
	r.state[n] = 2
	return nil
}

func (r *resolver) spend(n int, path string, line int) error {
	r.budget -= n
	if r.budget < 0 {
		return &Error{Path: orDoc(path), Line: line, Msg: "placeholders expand to too much text"}
	}
	return nil
}

// expand replaces the placeholders of s.
func (r *resolver) expand(s, path string, line, depth int) (string, error) {
	if depth > maxPlaceholderDepth {
		return "", &Error{Path: orDoc(path), Line: line, Msg: "placeholders nest too deep"}
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		end := closing(s, i+2)
		if end < 0 {
			return "", &Error{Path: orDoc(path), Line: line, Msg: fmt.Sprintf("placeholder %q has no closing '}'", clip(s[i:]))}
		}
		v, err := r.placeholder(s[i+2:end], path, line, depth)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		if err := r.spend(len(v), path, line); err != nil {
			return "", err
		}
		s = s[end+1:]
	}
	return b.String(), nil
}

// closing returns the index of the '}' closing a placeholder whose content starts at i.
func closing(s string, i int) int {
	depth := 1
	for ; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "${"):
			depth++
			i++
		case s[i] == '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func (r *resolver) placeholder(body, path string, line, depth int) (string, error) {
	name, def, hasDef := body, "", false
	nest := 0
	for i := 0; i < len(body); i++ {
		switch {
		case strings.HasPrefix(body[i:], "${"):
			nest++
			i++
		case body[i] == '}':
			nest--
		case body[i] == ':' && nest == 0:
			name, def, hasDef = body[:i], body[i+1:], true
			i = len(body)
		}
	}
	name, err := r.expand(name, path, line, depth+1)
	if err != nil {
		return "", err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", &Error{Path: orDoc(path), Line: line, Msg: fmt.Sprintf("placeholder ${%s} has no name", clip(body))}
	}
	if v, ok := r.getenv(name); ok {
		return v, nil
	}
	if env := envForm(name); env != name {
		if v, ok := r.getenv(env); ok {
			return v, nil
		}
	}
	if v, ok, err := r.fileKey(name, path, line, depth); err != nil || ok {
		return v, err
	}
	if hasDef {
		return r.expand(def, path, line, depth+1)
	}
	n := clip(name)
	return "", &Error{Path: orDoc(path), Line: line, Msg: fmt.Sprintf("could not resolve placeholder ${%s}: set the environment variable %s, add the key %s to the file, or give a default (${%s:value})", n, clip(envForm(name)), n, n)}
}

// fileKey resolves name as a key of the merged file.
func (r *resolver) fileKey(name, path string, line, depth int) (string, bool, error) {
	segs, err := splitKey(name)
	if err != nil {
		return "", false, nil
	}
	cur := r.root
	for _, seg := range segs {
		next, ok, err := cur.Get(seg)
		if err != nil || !ok {
			return "", false, nil
		}
		cur = next
	}
	if cur.Value.Kind != yaml.ScalarNode {
		return "", false, &Error{Path: orDoc(path), Line: line, Msg: fmt.Sprintf("placeholder ${%s} names %s (line %d), not a value", clip(name), kindName(cur.Value), cur.Line())}
	}
	if err := r.scalar(cur.Value, cur.Path, depth+1); err != nil {
		if e, ok := err.(*Error); ok && e.Msg == "placeholders refer to each other in a cycle" {
			return "", false, &Error{Path: orDoc(path), Line: line, Msg: fmt.Sprintf("placeholder ${%s} refers back to itself (through line %d)", clip(name), cur.Line())}
		}
		return "", false, err
	}
	return cur.Value.Value, true, nil
}

// EnvName is Spring's environment-variable form of a property name: upper case, '.' and
// '[' as '_', ']' and '-' dropped ("spring.data.redis.host" -> "SPRING_DATA_REDIS_HOST").
func EnvName(name string) string { return envForm(name) }

func envForm(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.' || c == '[' || c == ']':
			if c != ']' {
				b.WriteByte('_')
			}
		case c == '-':
		case 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// maxQuoted bounds the text of the input an error message repeats.
const maxQuoted = 200

// clip shortens s for an error message: its first maxQuoted bytes (cut at a rune boundary),
// then "..." and how many bytes were left out.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	i := maxQuoted
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s...(%d more bytes)", s[:i], len(s)-i)
}
