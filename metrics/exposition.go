package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// The Prometheus metric types, the values of Family.Type.
const (
	TypeCounter   = "counter"
	TypeGauge     = "gauge"
	TypeHistogram = "histogram"
	TypeSummary   = "summary"
	TypeUntyped   = "untyped"
)

// Label is one label of a [Sample].
type Label struct {
	Name, Value string
}

// Sample is one series of a [Family]: for a histogram, one of its _bucket, _sum or _count
// series.
type Sample struct {
	// Name is the series name: the family's name, or for a histogram or summary the
	// family's name with _bucket, _sum or _count.
	Name   string
	Labels []Label
	Value  float64
}

// Family is one metric family of the exposition, with its metadata.
type Family struct {
	Name    string
	Type    string // "counter", "gauge", "histogram", "summary" or "untyped"
	Help    string // blank for a family redstream does not know
	Samples []Sample
}

// ExposeOptions configures an [Exposer].
type ExposeOptions struct {
	// Namespace, when set, is prepended with an underscore to the name of every redstream
	// metric (redis_streaming_*, redis_cache_*): "shop" exposes
	// shop_redis_streaming_rl_allowed_total. Other metrics of the registry keep their
	// names. It must be a valid metric name prefix: [a-zA-Z_][a-zA-Z0-9_]*. Blank keeps
	// the names unchanged (the Java system's, which existing dashboards use).
	Namespace string
	// ProcessMetrics adds VictoriaMetrics' Go runtime and process metrics (go_*,
	// process_*) to the exposition.
	ProcessMetrics bool
}

// Exposer writes every metric set registered with VictoriaMetrics' default registry (see
// [WritePrometheus]) in the Prometheus text format with # HELP and # TYPE lines, each family
// once and its series together, even when several sets hold series of one family (one set
// per cache, for instance). It is safe for concurrent use.
type Exposer struct {
	o ExposeOptions
}

// NewExposer returns an Exposer, or an error naming what is wrong with o.
func NewExposer(o ExposeOptions) (*Exposer, error) {
	if o.Namespace != "" && !validName(o.Namespace, false) {
		return nil, fmt.Errorf("metrics: namespace %q is not a valid metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*)", o.Namespace)
	}
	return &Exposer{o: o}, nil
}

// Families returns a snapshot of every family, sorted by name. The error reports lines of
// the registry's exposition that could not be read (they are left out); the families
// returned are valid either way.
func (e *Exposer) Families() ([]Family, error) {
	var buf bytes.Buffer
	vm.WritePrometheus(&buf, e.o.ProcessMetrics)
	fams, bad := group(buf.Bytes(), e.o.Namespace)
	if len(bad) > 0 {
		return fams, fmt.Errorf("metrics: %d unreadable exposition lines, the first: %q", len(bad), bad[0])
	}
	return fams, nil
}

// WritePrometheus writes the exposition to w. Lines of the registry it cannot read (none
// come from VictoriaMetrics itself) are written unchanged at the end, not dropped.
func (e *Exposer) WritePrometheus(w io.Writer) {
	var buf bytes.Buffer
	vm.WritePrometheus(&buf, e.o.ProcessMetrics)
	fams, bad := group(buf.Bytes(), e.o.Namespace)
	var out bytes.Buffer
	out.Grow(buf.Len() + 64*len(fams))
	for _, f := range fams {
		writeFamily(&out, f)
	}
	for _, l := range bad {
		out.WriteString(l)
		out.WriteByte('\n')
	}
	_, _ = w.Write(out.Bytes())
}

// ServeHTTP serves the exposition (a /metrics endpoint).
func (e *Exposer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", contentType)
	e.WritePrometheus(w)
}

var defaultExposer, processExposer = &Exposer{}, &Exposer{o: ExposeOptions{ProcessMetrics: true}}

func writeFamily(b *bytes.Buffer, f Family) {
	if f.Help != "" {
		b.WriteString("# HELP ")
		b.WriteString(f.Name)
		b.WriteByte(' ')
		writeHelp(b, f.Help)
		b.WriteByte('\n')
	}
	b.WriteString("# TYPE ")
	b.WriteString(f.Name)
	b.WriteByte(' ')
	b.WriteString(f.Type)
	b.WriteByte('\n')
	for _, s := range f.Samples {
		b.WriteString(s.Name)
		if len(s.Labels) > 0 {
			b.WriteByte('{')
			for i, l := range s.Labels {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(l.Name)
				b.WriteString(`="`)
				escape(b, l.Value)
				b.WriteByte('"')
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		b.WriteString(formatValue(s.Value))
		b.WriteByte('\n')
	}
}

func writeHelp(b *bytes.Buffer, h string) {
	for i := 0; i < len(h); i++ {
		switch c := h[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
}

func formatValue(v float64) string {
	if v == float64(int64(v)) && v < 1<<53 && v > -(1<<53) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// group parses VictoriaMetrics' exposition (without metadata) into families: series of a
// histogram (F_bucket with an le label, F_sum, F_count) or a summary (F with a quantile
// label, F_sum, F_count) join family F; every other series is its own family. Types and
// help come from the families redstream knows; others are inferred (histogram, summary,
// counter for a _total name, untyped otherwise).
func group(text []byte, namespace string) ([]Family, []string) {
	var samples []Sample
	var bad []string
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			bad = append(bad, line)
			continue
		}
		samples = append(samples, s)
	}
	histograms, summaries := map[string]bool{}, map[string]bool{}
	for _, s := range samples {
		if base, ok := strings.CutSuffix(s.Name, "_bucket"); ok && hasLabel(s, "le") {
			histograms[base] = true
		}
		if hasLabel(s, "quantile") {
			summaries[s.Name] = true
		}
	}
	byName := map[string]*Family{}
	var fams []*Family
	for _, s := range samples {
		fam, typ := s.Name, ""
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(s.Name, suf); ok {
				if histograms[base] {
					fam, typ = base, TypeHistogram
				} else if summaries[base] && suf != "_bucket" {
					fam, typ = base, TypeSummary
				}
				break
			}
		}
		if summaries[s.Name] {
			typ = TypeSummary
		}
		f := byName[fam]
		if f == nil {
			f = &Family{Name: fam, Type: typ}
			if k, ok := known[fam]; ok {
				f.Type, f.Help = k.typ, k.help
			}
			if f.Type == "" {
				f.Type = TypeUntyped
				if strings.HasSuffix(fam, "_total") {
					f.Type = TypeCounter
				}
			}
			byName[fam] = f
			fams = append(fams, f)
		}
		f.Samples = append(f.Samples, s)
	}
	out := make([]Family, len(fams))
	for i, f := range fams {
		if namespace != "" && isRedstream(f.Name) {
			f.Name = namespace + "_" + f.Name
			for j := range f.Samples {
				f.Samples[j].Name = namespace + "_" + f.Samples[j].Name
			}
		}
		out[i] = *f
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, bad
}

func isRedstream(family string) bool {
	return strings.HasPrefix(family, "redis_streaming_") || strings.HasPrefix(family, "redis_cache_")
}

func hasLabel(s Sample, name string) bool {
	for _, l := range s.Labels {
		if l.Name == name {
			return true
		}
	}
	return false
}

var errLine = errors.New("malformed exposition line")

// parseLine parses `name{a="x",b="y"} value` or `name value` (an optional timestamp after
// the value is ignored).
func parseLine(line string) (Sample, error) {
	var s Sample
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, errLine
	}
	s.Name = line[:i]
	if !validName(s.Name, true) {
		return s, errLine
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return s, errLine
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
				return s, errLine
			}
			name := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return s, errLine
			}
			s.Labels = append(s.Labels, Label{Name: name, Value: v.String()})
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return s, errLine
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, errLine
	}
	s.Value = v
	return s, nil
}

// validName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]* (a metric name), or without
// colons when colon is false.
func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || c == ':' && colon, c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
