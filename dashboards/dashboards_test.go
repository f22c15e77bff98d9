package dashboards

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/reliability"
	"github.com/redstream-go/redstream/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("redstream.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("redstream.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("redstream.json: uid %q, title %q, schemaVersion %d, %d panels", d.UID, d.Title, d.SchemaVersion, len(d.Panels))
	}
	return d
}

// queries returns every PromQL query of d (panel targets and query variables), each with
// where it is.
func queries(t *testing.T, d dashboard) map[string]string {
	t.Helper()
	qs := map[string]string{}
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s: empty expr", p.Title, tg.RefID)
				}
				qs["panel "+strconv.Quote(p.Title)+" target "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := ""
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		m := regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`).FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q, want label_values(METRIC, LABEL)", v.Name, q)
			continue
		}
		qs["variable "+v.Name] = m[1]
		qs["variable "+v.Name+" label"] = m[1] + " by (" + m[2] + ")" // the label is checked like a by clause
	}
	return qs
}

// selector is one metric name of a query with the label names of its matchers.
type selector struct {
	name   string
	labels []string
}

var (
	reString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reRange    = regexp.MustCompile(`\[[^\]]*\]`)
	reVar      = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
	reGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	reIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reMatchers = regexp.MustCompile(`\{([^}]*)\}`)
	reLabel    = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*$`)
	keywords   = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
)

// parseQuery returns the metric selectors of a PromQL query and the label names of its
// grouping clauses. It knows enough PromQL for dashboards: function calls, aggregations
// with by/without, binary operators, label matchers, ranges and Grafana variables.
func parseQuery(q string) (sels []selector, grouping []string, err error) {
	s := reString.ReplaceAllString(reVar.ReplaceAllString(q, "VAR"), `""`)
	// Label matchers: keep their label names, drop the values.
	type span struct{ start, end int }
	var matcherSpans []span
	var matcherLabels [][]string
	for _, m := range reMatchers.FindAllStringSubmatchIndex(s, -1) {
		body := strings.ReplaceAll(s[m[2]:m[3]], `""`, "")
		var labels []string
		for _, part := range strings.Split(body, ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			lm := reLabel.FindStringSubmatch(part)
			if lm == nil {
				return nil, nil, errors.New("bad label matcher " + strconv.Quote(part))
			}
			labels = append(labels, lm[1])
		}
		matcherSpans = append(matcherSpans, span{m[0], m[1]})
		matcherLabels = append(matcherLabels, labels)
	}
	// Replace each matcher by a marker #i so the metric before it can be found.
	var b strings.Builder
	last := 0
	for i, sp := range matcherSpans {
		b.WriteString(s[last:sp.start])
		b.WriteString(" #" + strconv.Itoa(i) + " ")
		last = sp.end
	}
	b.WriteString(s[last:])
	s = reRange.ReplaceAllString(b.String(), " ")
	for _, g := range reGrouping.FindAllStringSubmatch(s, -1) {
		for _, l := range strings.Split(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouping = append(grouping, l)
			}
		}
	}
	s = reGrouping.ReplaceAllString(s, " ")
	for _, loc := range reIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " ")
		if keywords[strings.ToLower(id)] || id == "VAR" || strings.HasPrefix(rest, "(") {
			continue // a keyword, a variable, or a function / aggregation name
		}
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // the exponent or unit of a number (1e3)
		}
		sel := selector{name: id}
		if strings.HasPrefix(rest, "#") {
			n, _ := strconv.Atoi(strings.Fields(rest[1:])[0])
			sel.labels = matcherLabels[n]
		}
		sels = append(sels, sel)
	}
	if len(sels) == 0 {
		return nil, nil, errors.New("no metric in the query")
	}
	return sels, grouping, nil
}

// constantNames returns the values of the metric-name constants of packages stream, cache
// and metrics, read from their source: every const whose name starts with Metric (stream,
// cache; any case) or ends with Total (metrics), string literals or references to package metrics.
func constantNames(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	values := map[string]map[string]ast.Expr{} // package -> const name -> value
	for _, pkg := range []string{"metrics", "stream", "cache"} {
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		values[pkg] = map[string]ast.Expr{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range af.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							values[pkg][n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	var resolve func(pkg string, e ast.Expr) (string, bool)
	resolve = func(pkg string, e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(x.Value)
			return s, err == nil && x.Kind == token.STRING
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && values[id.Name] != nil {
				if v, ok := values[id.Name][x.Sel.Name]; ok {
					return resolve(id.Name, v)
				}
			}
		case *ast.Ident:
			if v, ok := values[pkg][x.Name]; ok {
				return resolve(pkg, v)
			}
		}
		return "", false
	}
	names := map[string]bool{}
	for pkg, consts := range values {
		for n, v := range consts {
			if !(pkg != "metrics" && strings.HasPrefix(strings.ToLower(n), "metric") || pkg == "metrics" && strings.HasSuffix(n, "Total")) {
				continue
			}
			s, ok := resolve(pkg, v)
			if !ok {
				t.Errorf("%s.%s: cannot read its value", pkg, n)
				continue
			}
			names[s] = true
		}
	}
	if len(names) < 40 {
		t.Fatalf("only %d metric-name constants found: %v", len(names), names)
	}
	return names
}

// exposition exercises every component on a real Redis and returns the families of the
// Prometheus exposition (metrics.WritePrometheus) with the label names of their series.
func exposition(t *testing.T) map[string]map[string]bool {
	t.Helper()
	ctx := context.Background()
	client := redistest.Client(t)

	// Rate limiting: a named limiter admits one call and denies the next.
	l, err := memory.NewLimiter(redstream.FixedWindow(time.Minute, 1), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	named, err := metrics.Named("dash-api", l)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := named.AllowN(ctx, "k", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	// The Redis engine: admitted, denied by Redis, then denied locally (local denials).
	rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Minute, 1), redisbackend.Options{KeyPrefix: "dash-rl"})
	if err != nil {
		t.Fatal(err)
	}
	rnamed, err := metrics.Named("dash-redis", rl)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := rnamed.AllowN(ctx, "k", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Leased quota: a hot key leases a slice, admits from it, and renews it before the
	// lease's end (giving back what it did not use), at explicit times.
	ql, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Hour, 1000), redisbackend.Options{KeyPrefix: "dash-quota",
		Quota: redisbackend.QuotaOptions{Enabled: true, Duration: time.Second, MaxShare: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMicro(1_767_225_600_000_000).Add(time.Minute)
	for _, at := range []time.Duration{0, 100 * time.Microsecond, 200 * time.Microsecond, 800 * time.Millisecond} {
		if d, err := ql.AllowN(ctx, "hot", t0.Add(at), 1); err != nil || !d.Allowed {
			t.Fatalf("leased quota at +%v: %+v, %v", at, d, err)
		}
	}
	// Dedup: a Redis deduplicator (its failure counters exist from its construction).
	dd, err := redisbackend.NewDeduplicator(client, "dash-dedup", redstream.DedupSpec{Strategy: redstream.DedupSet}, redisbackend.DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dd.CheckAndMark(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	// Reliability: a named processor.
	pcfg := reliability.NewConfig[int]()
	pcfg.Name = "dash-proc"
	if _, err := reliability.NewProcessor(pcfg); err != nil {
		t.Fatal(err)
	}
	// Cache: a miss and a load, then a hit.
	ccfg := cache.DefaultConfig()
	ccfg.Name, ccfg.KeyPrefix = "dash-cache", "dash-cache"
	c, err := cache.New(client, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 2; i++ {
		if _, err := cache.GetOrLoad(ctx, c, "k", time.Minute, func(context.Context) (string, error) { return "v", nil }); err != nil {
			t.Fatal(err)
		}
	}
	// Stream: a producer, a consumer whose handler fails (dead letters), a replay, a failed
	// replay, a delete, a purge and a trim.
	scfg := stream.Config{BlockTimeout: 50 * time.Millisecond, Trim: stream.TrimConfig{MaxLen: 1, Mode: stream.TrimMaxLen}}
	cons, err := stream.NewConsumer(client, scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Register(cons, stream.Handler[map[string]int]{Topic: "dash-orders", Group: "g", NoRetry: true,
		Handle: func(context.Context, *stream.Message[map[string]int]) error { return errors.New("broken") }}); err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewProducer(client, scfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := p.Send(ctx, "dash-orders", stream.NewMessage(map[string]int{"n": i})); err != nil {
			t.Fatal(err)
		}
	}
	dls, _ := stream.NewDeadLetters(client, scfg)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := dls.Len(ctx, "dash-orders"); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letters")
		}
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	letters, err := dls.List(ctx, "dash-orders", stream.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dls.Replay(ctx, "dash-orders", letters[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := dls.Replay(ctx, "dash-orders", letters[0].ID); err == nil {
		t.Fatal("replaying a replayed dead letter succeeded")
	}
	if _, err := dls.Delete(ctx, "dash-orders", letters[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := dls.Purge(ctx, "dash-orders"); err != nil {
		t.Fatal(err)
	}
	tr, err := stream.NewTrimmer(client, scfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tr.Trim(ctx, "dash-orders"); err != nil || n == 0 {
		t.Fatalf("trim: %d, %v", n, err)
	}

	var buf bytes.Buffer
	metrics.WritePrometheus(&buf)
	fams := map[string]map[string]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		if fams[name] == nil {
			fams[name] = map[string]bool{}
		}
		if line[end] == '{' {
			body := line[end+1 : strings.LastIndexByte(line, '}')]
			for _, m := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`).FindAllStringSubmatch(body, -1) {
				fams[name][m[1]] = true
			}
		}
	}
	return fams
}

// onlyOnFailure are families created on the first failure only, so a healthy exercise does
// not show them; they must still be exported constants.
var onlyOnFailure = map[string]bool{"redis_streaming_mq_background_errors_total": true}

// baseName returns the family of a histogram series name (_bucket, _sum, _count).
func baseName(name string, known func(string) bool) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && known(b) {
			return b
		}
	}
	return name
}

// check returns the problems of query q against the exported constants and the exercised
// exposition.
func check(q string, consts map[string]bool, fams map[string]map[string]bool) []string {
	sels, grouping, err := parseQuery(q)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	labelsOf := map[string]bool{}
	for _, s := range sels {
		base := baseName(s.name, func(b string) bool { return consts[b] })
		if !consts[base] {
			problems = append(problems, "metric "+s.name+" is not exported by redstream")
			continue
		}
		if base != s.name && fams[base] != nil {
			problems = append(problems, "metric "+s.name+": "+base+" is not a histogram")
			continue
		}
		labels, seen := fams[s.name]
		if !seen && !onlyOnFailure[base] {
			problems = append(problems, "metric "+s.name+" is a constant but absent from the exposition of the exercised components")
			continue
		}
		for l := range labels {
			labelsOf[l] = true
		}
		for _, l := range s.labels {
			if seen && !labels[l] {
				problems = append(problems, "metric "+s.name+" has no label "+l)
			}
		}
	}
	for _, l := range grouping {
		if len(labelsOf) > 0 && !labelsOf[l] {
			problems = append(problems, "grouping by "+l+", a label none of the query's metrics has")
		}
	}
	return problems
}

// TestDashboardQueries: every query of redstream.json names only metrics and labels the
// library exports.
func TestDashboardQueries(t *testing.T) {
	d := loadDashboard(t)
	consts := constantNames(t)
	fams := exposition(t)
	for c := range consts {
		// Every constant the exercise can create is in the exposition (histograms as _bucket).
		if fams[c] == nil && fams[c+"_bucket"] == nil && !onlyOnFailure[c] {
			t.Errorf("constant %s: not in the exposition of the exercised components", c)
		}
	}
	qs := queries(t, d)
	used := map[string]bool{}
	keys := make([]string, 0, len(qs))
	for k := range qs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, where := range keys {
		q := qs[where]
		for _, p := range check(q, consts, fams) {
			t.Errorf("%s: %s\n\tquery: %s", where, p, q)
		}
		sels, _, _ := parseQuery(q)
		for _, s := range sels {
			used[baseName(s.name, func(b string) bool { return consts[b] })] = true
		}
	}
	// The dashboard covers what an operator watches.
	for _, want := range []string{"redis_streaming_mq_produced_total", "redis_streaming_mq_consumed_total", "redis_streaming_mq_handle_latency_ms_seconds", "redis_streaming_mq_pending",
		"redis_streaming_mq_lag", "redis_streaming_mq_inflight", "redis_streaming_mq_dead_total", "redis_streaming_dlq_size", "redis_streaming_mq_retried_total",
		"redis_streaming_mq_background_errors_total", "redis_streaming_rl_allowed_total", "redis_streaming_rl_denied_total", "redis_streaming_rl_errors_total",
		"redis_cache_hits_total", "redis_cache_misses_total", "redis_cache_loads_total", "redis_cache_load_errors_total",
		"redis_streaming_reliability_retries_total"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	t.Logf("%d queries over %d of the %d exported metric families", len(qs), len(used), len(consts))
}

// TestCheckRejects proves the checker fails what it should: unknown metrics, unknown
// labels, a non-histogram used as one, and garbage.
func TestCheckRejects(t *testing.T) {
	consts := map[string]bool{"redis_cache_hits_total": true, "redis_streaming_mq_handle_latency_ms_seconds": true}
	fams := map[string]map[string]bool{
		"redis_cache_hits_total":                              {"name": true},
		"redis_streaming_mq_handle_latency_ms_seconds_bucket": {"topic": true, "group": true, "le": true},
	}
	good := []string{
		`sum by (name) (rate(redis_cache_hits_total{name=~"$cache"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le, topic) (rate(redis_streaming_mq_handle_latency_ms_seconds_bucket{topic="a,b}"}[5m])))`,
		`redis_cache_hits_total * 1e3 > bool 0`,
	}
	for _, q := range good {
		if p := check(q, consts, fams); len(p) > 0 {
			t.Errorf("%s: %v", q, p)
		}
	}
	bad := map[string]string{
		`rate(redis_cache_hitz_total[5m])`:                            "not exported",
		`rate(redstream_requests_total[5m])`:                          "not exported",
		`sum by (topic) (rate(redis_cache_hits_total[5m]))`:           "grouping by topic",
		`rate(redis_cache_hits_total{topic="x"}[5m])`:                 "no label topic",
		`rate(redis_cache_hits_total_bucket[5m])`:                     "not a histogram",
		`sum(rate(redis_streaming_mq_handle_latency_ms_seconds[5m]))`: "absent from the exposition",
		`sum(rate(redis_cache_hits_total{name~"x"}[5m]))`:             "bad label matcher",
		`sum(1)`: "no metric",
		`rate(redis_cache_hits_total[5m]) / rate(nope_total[5m])`:   "nope_total",
		`label_values(redis_cache_hits_total{name="a"}, name) + up`: "metric up",
	}
	for q, want := range bad {
		p := check(q, consts, fams)
		if !strings.Contains(strings.Join(p, "; "), want) {
			t.Errorf("%s: problems %v, want one containing %q", q, p, want)
		}
	}
}
