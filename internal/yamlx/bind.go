package yamlx

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// BindOptions says how [Bind] treats keys it does not know, and whether the environment
// overrides the file.
type BindOptions struct {
	// Lenient reports unknown keys to Warn instead of returning an error.
	Lenient bool
	// Warn receives the warnings of lenient binding; nil drops them.
	Warn func(n Node, msg string)
	// Getenv, if set, lets environment variables override keys, as Spring Boot's relaxed
	// binding does: a field's key path in [EnvName] form (redis-stream.read-count from
	// REDISSTREAM_READCOUNT) wins over the file. Fields of type Node are not overridden.
	Getenv func(name string) (string, bool)
	// FromEnv, if set, is called for every value taken from the environment.
	FromEnv func(path, name string)
	// Parse, if set, reads the fields of the types it has a function for (enumerations
	// written as words): the function gets the scalar as written and returns the value
	// (of that type), nil to keep the field's value (a blank word), or an error, reported
	// at the key.
	Parse map[reflect.Type]func(s string) (any, error)
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	nodeType     = reflect.TypeFor[Node]()
)

// Bind sets the fields of the struct dst points to from the mapping n, driven by struct
// tags:
//
//   - `yaml:"key-name"` names a field's key, bound relaxed (key-name, keyName, key_name;
//     nested or dotted); `yaml:"-"` skips the field; an untagged exported field is bound
//     under its Go name (ReadCount as read-count); an embedded struct's fields are inline,
//     and so are those of a struct field tagged `yaml:",inline"`;
//   - `default:"..."` sets a zero field before binding, parsed as a value of the file;
//   - `unit:"ms"` (or ns, us, s, m, h, d) on a time.Duration reads a bare integer in that
//     unit (default ms, as Spring); a duration string ("500ms", "2s", "1h30m", "3d" or
//     ISO-8601 "PT2S") is accepted too.
//
// Supported kinds: bool (true/false, yes/no, on/off, 1/0), string and named string types,
// ints and uints (range-checked for the type), finite floats, time.Duration, []string (a
// list, a comma-separated string, or properties-style indices a[0], a[1]), pointers to
// those (nil when the key is absent: presence is visible), nested structs, and Node (the
// raw value, for callers that read it themselves). A null value ("key:") keeps the field's
// value. Unknown keys, two spellings of one key and values of the wrong type are errors
// naming the key path and line; with o.Lenient unknown keys are warnings. Range checks are
// left to the caller's Validate. dst must be a non-nil pointer to a struct; a field of
// another kind with a yaml name is a programming error reported as an error (untagged ones,
// such as funcs and interfaces, are skipped).
func Bind(n Node, dst any, o BindOptions) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("yamlx: Bind needs a pointer to a struct, got %T", dst)
	}
	b := binder{o: o}
	if b.o.Warn == nil {
		b.o.Warn = func(Node, string) {}
	}
	if err := b.structure(n, v.Elem()); err != nil {
		return err
	}
	return Join(b.errs)
}

// binder binds one value. The errors of single settings (an unknown key, a key set twice,
// a bad value) are collected in errs and binding goes on, so that a file with several
// mistakes reports all of them; other errors stop it.
type binder struct {
	o    BindOptions
	errs []error
}

// setting records err if it is the error of one setting (an *Error) and reports whether
// binding may go on; any other error is returned.
func (b *binder) setting(err error) error {
	var e *Error
	if err == nil {
		return nil
	}
	if errors.As(err, &e) {
		b.errs = append(b.errs, err)
		return nil
	}
	return err
}

// field is one bindable field of a struct.
type field struct {
	key   string // canonical key
	index []int
	tag   reflect.StructTag
}

// Fields returns the bindable fields of struct type t with their canonical keys.
func fields(t reflect.Type) ([]field, error) {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if (sf.Anonymous || opts == "inline") && name == "" && sf.Type.Kind() == reflect.Struct {
			inner, err := fields(sf.Type)
			if err != nil {
				return nil, err
			}
			for _, f := range inner {
				f.index = append([]int{i}, f.index...)
				out = append(out, f)
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			if !bindable(sf.Type) {
				continue
			}
			name = kebab(sf.Name)
		} else if !bindable(sf.Type) {
			return nil, fmt.Errorf("yamlx: field %s.%s (%s) has a kind Bind does not support", t.Name(), sf.Name, sf.Type)
		}
		out = append(out, field{key: name, index: []int{i}, tag: sf.Tag})
	}
	return out, nil
}

func bindable(t reflect.Type) bool {
	if t == durationType || t == nodeType {
		return true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.Struct:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	case reflect.Pointer:
		return t.Elem().Kind() != reflect.Pointer && t.Elem().Kind() != reflect.Struct && bindable(t.Elem())
	case reflect.Map:
		// Maps keyed by user names (topics), of scalar values.
		e := t.Elem()
		return t.Key().Kind() == reflect.String && e != durationType && e != nodeType && bindable(e) &&
			e.Kind() != reflect.Pointer && e.Kind() != reflect.Struct && e.Kind() != reflect.Slice && e.Kind() != reflect.Map
	}
	return false
}

// kebab turns a Go field name into a kebab-case key: ReadCount -> read-count, TTL -> ttl.
func kebab(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			if i > 0 && (s[i-1] < 'A' || s[i-1] > 'Z' || (i+1 < len(s) && 'a' <= s[i+1] && s[i+1] <= 'z')) {
				b.WriteByte('-')
			}
			b.WriteByte(c + 'a' - 'A')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// defaults sets the zero fields of struct v that have a default tag, recursively.
func (b *binder) defaults(v reflect.Value, path string) error {
	fs, err := fields(v.Type())
	if err != nil {
		return err
	}
	for _, f := range fs {
		fv := v.FieldByIndex(f.index)
		if fv.Kind() == reflect.Struct && fv.Type() != nodeType {
			if err := b.defaults(fv, join(path, f.key)); err != nil {
				return err
			}
			continue
		}
		def, ok := f.tag.Lookup("default")
		if !ok || !fv.IsZero() {
			continue
		}
		dn := Node{Path: join(path, f.key), Value: &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}}
		if err := b.value(dn, fv, f.tag); err != nil {
			return fmt.Errorf("yamlx: default of %s: %w", f.key, err)
		}
	}
	return nil
}

func (b *binder) structure(n Node, v reflect.Value) error {
	fs, err := fields(v.Type())
	if err != nil {
		return err
	}
	if err := b.defaults(v, n.Path); err != nil {
		return err
	}
	if n.IsNull() {
		return b.environment(n.Path, v, fs, nil)
	}
	if n.Value.Kind != yaml.MappingNode {
		return n.Errorf("must be a mapping, got %s", kindName(n.Value))
	}
	byKey := make(map[string]int, len(fs))
	for i, f := range fs {
		byKey[Normalize(f.key)] = i
	}
	seen := make(map[int]*yaml.Node, len(fs))
	for i := 0; i+1 < len(n.Value.Content); i += 2 {
		k, val := n.Value.Content[i], n.Value.Content[i+1]
		fi, ok := byKey[Normalize(k.Value)]
		if !ok {
			e := Node{Path: join(n.Path, k.Value), Key: k, Value: val}
			msg := "unknown key" + suggest(k.Value, fs)
			if !b.o.Lenient {
				b.errs = append(b.errs, e.Errorf("%s", msg))
				continue
			}
			b.o.Warn(e, msg+"; ignored")
			continue
		}
		f := fs[fi]
		if prev, dup := seen[fi]; dup {
			b.errs = append(b.errs, &Error{Path: join(n.Path, f.key), Line: k.Line, Msg: fmt.Sprintf("is set twice (%q here and %q at line %d)", clip(k.Value), clip(prev.Value), prev.Line)})
			continue
		}
		seen[fi] = k
		child := Node{Path: join(n.Path, f.key), Key: k, Value: val}
		if child.IsNull() {
			continue
		}
		if err := b.setting(b.value(child, v.FieldByIndex(f.index), f.tag)); err != nil {
			return err
		}
	}
	return b.setting(b.environment(n.Path, v, fs, seen))
}

// environment applies the environment variables of the fields of struct v (at path),
// recursively; nested structs in bound (bound by the file) took theirs already.
func (b *binder) environment(path string, v reflect.Value, fs []field, bound map[int]*yaml.Node) error {
	if b.o.Getenv == nil {
		return nil
	}
	for i, f := range fs {
		fv := v.FieldByIndex(f.index)
		p := join(path, f.key)
		t := fv.Type()
		switch {
		case t == nodeType:
			continue
		case t.Kind() == reflect.Struct && t != durationType:
			if _, done := bound[i]; done {
				continue
			}
			inner, err := fields(t)
			if err != nil {
				return err
			}
			if err := b.environment(p, fv, inner, nil); err != nil {
				return err
			}
			continue
		}
		name := EnvName(p)
		s, ok := b.o.Getenv(name)
		if !ok {
			continue
		}
		n := Node{Path: p + " (environment " + name + ")", Value: &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}}
		if err := b.value(n, fv, f.tag); err != nil {
			return err
		}
		if b.o.FromEnv != nil {
			b.o.FromEnv(p, name)
		}
	}
	return nil
}

// suggest returns ` (did you mean "x"?)` for a key close to a known one, or the list of
// known keys.
func suggest(key string, fs []field) string {
	k := Normalize(key)
	best, bestD := "", 3
	keys := make([]string, 0, len(fs))
	for _, f := range fs {
		keys = append(keys, f.key)
		if d := distance(k, Normalize(f.key), bestD); d < bestD {
			best, bestD = f.key, d
		}
	}
	if best == "" && len(k) >= 4 {
		// A unit left out or added: default-ttl for default-ttl-seconds.
		for _, f := range fs {
			if nk := Normalize(f.key); strings.HasPrefix(nk, k) || strings.HasPrefix(k, nk) {
				if best != "" {
					best = ""
					break
				}
				best = f.key
			}
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	slices.Sort(keys)
	return " (known keys: " + strings.Join(keys, ", ") + ")"
}

// Near returns the key of known closest to key (relaxed, within an edit distance of 2), or
// "" when none is that close. Equal keys are not near: they are the same key.
func Near(key string, known ...string) string {
	k := Normalize(key)
	best, bestD := "", 3
	for _, c := range known {
		d := distance(k, Normalize(c), bestD)
		if d == 0 {
			return ""
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b, or limit when it is at least limit.
func distance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 {
		return limit
	}
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func (b *binder) value(n Node, v reflect.Value, tag reflect.StructTag) error {
	t := v.Type()
	if parse, ok := b.o.Parse[t]; ok {
		return parsed(n, v, parse)
	}
	switch {
	case t == nodeType:
		v.Set(reflect.ValueOf(n))
		return nil
	case t == durationType:
		s, err := n.scalar("a duration")
		if err != nil {
			return err
		}
		d, err := ParseDuration(s, tag.Get("unit"))
		if err != nil {
			return n.Errorf("%v", err)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := b.value(n, p.Elem(), tag); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		return b.structure(n, v)
	case reflect.Map:
		return b.mapping(n, v, tag)
	case reflect.Slice:
		return list(n, v)
	case reflect.Bool:
		x, err := n.Bool()
		if err != nil {
			return err
		}
		v.SetBool(x)
		return nil
	case reflect.String:
		if _, err := n.scalar("a string"); err != nil {
			return err
		}
		v.SetString(n.Value.Value) // as written: blanks may matter (key prefixes)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return number(n, v)
	}
	return n.Errorf("yamlx: unsupported field type %s", t)
}

// mapping binds the mapping n onto the map v, each value with tag.
func (b *binder) mapping(n Node, v reflect.Value, tag reflect.StructTag) error {
	t := v.Type()
	es, err := n.Entries()
	if err != nil {
		return err
	}
	m := reflect.MakeMapWithSize(t, len(es))
	for _, e := range es {
		if e.Name() == "" {
			return e.Errorf("must have a non-empty key")
		}
		ev := reflect.New(t.Elem()).Elem()
		if err := b.value(e, ev, tag); err != nil {
			return err
		}
		m.SetMapIndex(reflect.ValueOf(e.Name()).Convert(t.Key()), ev)
	}
	v.Set(m)
	return nil
}

// list binds a list of strings (a sequence, a comma-separated scalar, or Spring's indexed
// mapping) onto the slice v.
func list(n Node, v reflect.Value) error {
	var l []string
	var err error
	if n.Value.Kind == yaml.MappingNode {
		l, err = indexedList(n)
	} else {
		l, err = stringList(n)
	}
	if err != nil {
		return err
	}
	s := reflect.MakeSlice(v.Type(), len(l), len(l))
	for i, e := range l {
		s.Index(i).SetString(e)
	}
	v.Set(s)
	return nil
}

// number binds the scalar n onto the integer, unsigned or float v, checking its range.
func number(n Node, v reflect.Value) error {
	switch t := v.Type(); t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := n.Int64()
		if err != nil {
			return err
		}
		if v.OverflowInt(x) {
			return n.Errorf("is out of range for a %d-bit integer: %d", t.Bits(), x)
		}
		v.SetInt(x)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := n.Int64()
		if err != nil {
			return err
		}
		if x < 0 || v.OverflowUint(uint64(x)) {
			return n.Errorf("is out of range for an unsigned %d-bit integer: %d", t.Bits(), x)
		}
		v.SetUint(uint64(x))
		return nil
	case reflect.Float32, reflect.Float64:
		x, err := n.Float64()
		if err != nil {
			return err
		}
		if v.OverflowFloat(x) {
			return n.Errorf("is out of range: %v", x)
		}
		v.SetFloat(x)
		return nil
	}
	return n.Errorf("yamlx: unsupported field type %s", v.Type())
}

// parsed sets v to what parse reads from the scalar n (BindOptions.Parse).
func parsed(n Node, v reflect.Value, parse func(string) (any, error)) error {
	s, err := n.scalar("a string")
	if err != nil {
		return err
	}
	x, err := parse(s)
	if err != nil {
		return n.Errorf("%v", err)
	}
	if x != nil {
		v.Set(reflect.ValueOf(x))
	}
	return nil
}

// indexedList reads a mapping of indices (a[0], a[1] in properties) as a list.
func indexedList(n Node) ([]string, error) {
	es, _ := n.Entries()
	out := make([]string, len(es))
	set := make([]bool, len(es))
	for _, e := range es {
		i, err := strconv.Atoi(e.Name())
		if err != nil || i < 0 || i >= len(es) {
			return nil, e.Errorf("must be a list index in [0, %d)", len(es))
		}
		if e.Value.Kind != yaml.ScalarNode {
			return nil, e.Errorf("must be a value, got %s", kindName(e.Value))
		}
		out[i], set[i] = strings.TrimSpace(e.Value.Value), true
	}
	for i, ok := range set {
		if !ok {
			return nil, n.Errorf("misses index [%d]", i)
		}
	}
	return out, nil
}

var units = map[string]time.Duration{
	"": time.Millisecond, "ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond,
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
}

// FormatDuration writes d as a setting of unit is written in a file: a whole number of unit
// when d is one (2000 for 2 s in ms), else a duration string ("1.5ms" in ms).
func FormatDuration(d time.Duration, unit string) string {
	u, ok := units[unit]
	if !ok || d%u != 0 {
		return d.String()
	}
	return strconv.FormatInt(int64(d/u), 10)
}

// ParseDuration reads a duration as Spring Boot does: a bare integer counts unit ("ms" when
// empty; also ns, us, s, m, h, d); otherwise a duration string ("500ms", "2s", "1h30m",
// "3d") or ISO-8601 ("PT2S", "P1DT2H"). Values beyond time.Duration's range are errors.
func ParseDuration(s, unit string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	u, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("yamlx: unknown unit %q", unit)
	}
	if s == "" {
		return 0, errors.New("must be a duration, got \"\"")
	}
	if n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64); err == nil {
		if n > math.MaxInt64/int64(u) || n < math.MinInt64/int64(u) {
			return 0, fmt.Errorf("is out of range: %s%s", s, unitName(unit))
		}
		return time.Duration(n) * u, nil
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("is out of range: %s", s)
	}
	if len(s) > 1 && (s[0] == 'P' || s[0] == 'p' || ((s[0] == '-' || s[0] == '+') && (s[1] == 'P' || s[1] == 'p'))) {
		return parseISO(s)
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err == nil {
			if n > math.MaxInt64/int64(24*time.Hour) || n < math.MinInt64/int64(24*time.Hour) {
				return 0, fmt.Errorf("is out of range: %s", s)
			}
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as 500ms, 2s or a whole number of %s, got %q", unitName(unit), s)
	}
	return d, nil
}

func unitName(unit string) string {
	if unit == "" {
		return "ms"
	}
	return unit
}

// parseISO reads ISO-8601 durations of days, hours, minutes and (fractional) seconds.
func parseISO(s string) (time.Duration, error) {
	orig := s
	neg := false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		s = s[1:]
	}
	s = strings.ToUpper(s[1:])
	bad := fmt.Errorf("must be a duration such as 500ms, 2s or PT2S, got %q", clip(orig))
	var total time.Duration
	inTime, parts := false, 0
	for s != "" {
		if s[0] == 'T' {
			if inTime {
				return 0, bad
			}
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] == '.' || s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, bad
		}
		num, des := s[:i], s[i]
		s = s[i+1:]
		var u time.Duration
		switch {
		case des == 'D' && !inTime:
			u = 24 * time.Hour
		case des == 'H' && inTime:
			u = time.Hour
		case des == 'M' && inTime:
			u = time.Minute
		case des == 'S' && inTime:
			u = time.Second
		default:
			return 0, bad
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, bad
		}
		x := f * float64(u)
		if x >= math.MaxInt64 || x <= math.MinInt64 {
			return 0, fmt.Errorf("is out of range: %s", orig)
		}
		next := total + time.Duration(x)
		if (x > 0 && next < total) || (x < 0 && next > total) {
			return 0, fmt.Errorf("is out of range: %s", orig)
		}
		total = next
		parts++
	}
	if parts == 0 {
		return 0, bad
	}
	if neg {
		total = -total
	}
	return total, nil
}

// Setting is one bound value in canonical spelling, for printing the effective
// configuration.
type Setting struct {
	// Key is the canonical dotted key below the struct, e.g. "autoclaim.min-idle-ms".
	Key string
	// Value is the value as it would be written in the file (durations in the unit of their
	// key: FormatDuration).
	Value string
}

// Settings lists the bindable fields of the struct v (or pointer to one) in declaration
// order, with their canonical keys and values, as [Bind] would read them.
func Settings(v any) []Setting {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	var out []Setting
	settings(rv, "", &out)
	return out
}

func settings(v reflect.Value, prefix string, out *[]Setting) {
	fs, err := fields(v.Type())
	if err != nil {
		return
	}
	for _, f := range fs {
		fv := v.FieldByIndex(f.index)
		key := join(prefix, f.key)
		if fv.Type() == nodeType {
			continue
		}
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				*out = append(*out, Setting{Key: key, Value: "(unset)"})
				continue
			}
			fv = fv.Elem()
		}
		switch {
		case fv.Type() == durationType:
			*out = append(*out, Setting{Key: key, Value: FormatDuration(time.Duration(fv.Int()), f.tag.Get("unit"))})
		case fv.Kind() == reflect.Struct:
			settings(fv, key, out)
		case fv.Kind() == reflect.Map:
			ks := make([]string, 0, fv.Len())
			for _, k := range fv.MapKeys() {
				ks = append(ks, k.String())
			}
			sort.Strings(ks)
			for _, k := range ks {
				*out = append(*out, Setting{Key: join(key, k), Value: fmt.Sprint(fv.MapIndex(reflect.ValueOf(k).Convert(fv.Type().Key())).Interface())})
			}
		case fv.Kind() == reflect.Slice:
			var parts []string
			for i := 0; i < fv.Len(); i++ {
				parts = append(parts, fv.Index(i).String())
			}
			*out = append(*out, Setting{Key: key, Value: "[" + strings.Join(parts, ", ") + "]"})
		case fv.Kind() == reflect.String:
			*out = append(*out, Setting{Key: key, Value: strconv.Quote(fv.String())})
		default:
			*out = append(*out, Setting{Key: key, Value: fmt.Sprint(fv.Interface())})
		}
	}
}
