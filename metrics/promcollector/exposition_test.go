// The exposition of package metrics, read by Prometheus' own text parser: these tests live
// in this module so that the root module does not require github.com/prometheus/common.

package promcollector_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/redstream-go/redstream/metrics"
)

// register returns a new set in VictoriaMetrics' default registry, unregistered when t ends.
func register(t *testing.T) *vm.Set {
	t.Helper()
	s := vm.NewSet()
	vm.RegisterSet(s)
	t.Cleanup(func() { vm.UnregisterSet(s, true) })
	return s
}

// parse reads an exposition with Prometheus' own text parser, which rejects a family whose
// series are split or whose # TYPE line is repeated.
func parse(t *testing.T, body string) map[string]*familyView {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus' parser rejects the exposition: %v\n%s", err, body)
	}
	out := map[string]*familyView{}
	for name, f := range fams {
		out[name] = &familyView{typ: strings.ToLower(f.GetType().String()), help: f.GetHelp(), n: len(f.GetMetric())}
	}
	return out
}

type familyView struct {
	typ, help string
	n         int
}

// TestExpositionMetadata: /metrics has # HELP and # TYPE lines, one per family, and a
// family spread over several sets (two caches, two stream configurations) is written once
// with all its series, so Prometheus' strict parser accepts it.
func TestExpositionMetadata(t *testing.T) {
	a, b := register(t), register(t)
	a.GetOrCreateCounter(`redis_cache_hits_total{name="meta-a"}`).Add(2)
	b.GetOrCreateCounter(`redis_cache_hits_total{name="meta-b"}`).Add(3)
	a.GetOrCreateGauge(`redis_streaming_mq_lag{topic="meta",group="g"}`, nil).Set(4)
	h := b.GetOrCreatePrometheusHistogram(`redis_streaming_mq_handle_latency_ms_seconds{topic="meta",group="g"}`)
	h.Update(0.002)
	h.Update(0.3)
	b.GetOrCreatePrometheusHistogram(`redis_streaming_mq_handle_latency_ms_seconds{topic="meta2",group="g"}`).Update(1)
	a.GetOrCreateCounter(`meta_program_requests_total`).Inc() // a family redstream does not know
	a.GetOrCreateGauge(`meta_program_temperature`, nil).Set(21.5)

	rec := httptest.NewRecorder()
	metrics.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	fams := parse(t, body)
	for name, want := range map[string]familyView{
		"redis_cache_hits_total":                       {typ: "counter", n: 2},
		"redis_streaming_mq_lag":                       {typ: "gauge", n: 1},
		"redis_streaming_mq_handle_latency_ms_seconds": {typ: "histogram", n: 2},
		"meta_program_requests_total":                  {typ: "counter", n: 1},
		"meta_program_temperature":                     {typ: "untyped", n: 1},
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("family %s missing:\n%s", name, body)
			continue
		}
		if f.typ != want.typ || f.n < want.n {
			t.Errorf("family %s: type %s with %d series, want %s with %d", name, f.typ, f.n, want.typ, want.n)
		}
		if strings.HasPrefix(name, "redis_") && f.help == "" {
			t.Errorf("family %s has no help text", name)
		}
	}
	for _, want := range []string{
		"# TYPE redis_cache_hits_total counter",
		"# HELP redis_cache_hits_total Cache reads that found a value.",
		"# TYPE redis_streaming_mq_handle_latency_ms_seconds histogram",
		`redis_cache_hits_total{name="meta-a"} 2`,
		`redis_cache_hits_total{name="meta-b"} 3`,
		`redis_streaming_mq_handle_latency_ms_seconds_count{topic="meta",group="g"} 2`,
		`meta_program_temperature 21.5`,
	} {
		if n := countLines(body, want); n != 1 {
			t.Errorf("%d lines %q, want 1:\n%s", n, want, body)
		}
	}
	assertNoDuplicateSeries(t, body)
}

// TestExpositionNamespace: a namespace prefixes redstream's families only; a bad one is an
// error naming it.
func TestExpositionNamespace(t *testing.T) {
	s := register(t)
	s.GetOrCreateCounter(`redis_streaming_rl_allowed_total{name="ns-test"}`).Add(5)
	s.GetOrCreatePrometheusHistogram(`redis_streaming_mq_handle_latency_ms_seconds{topic="ns",group="g"}`).Update(0.1)
	s.GetOrCreateCounter(`ns_program_total`).Inc()
	e, err := metrics.NewExposer(metrics.ExposeOptions{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	e.WritePrometheus(&buf)
	body := buf.String()
	fams := parse(t, body)
	for _, name := range []string{"shop_redis_streaming_rl_allowed_total", "shop_redis_streaming_mq_handle_latency_ms_seconds", "ns_program_total"} {
		if fams[name] == nil {
			t.Errorf("family %s missing:\n%s", name, body)
		}
	}
	for _, want := range []string{
		`shop_redis_streaming_rl_allowed_total{name="ns-test"} 5`,
		`shop_redis_streaming_mq_handle_latency_ms_seconds_count{topic="ns",group="g"} 1`,
		"# TYPE shop_redis_streaming_mq_handle_latency_ms_seconds histogram",
	} {
		if countLines(body, want) != 1 {
			t.Errorf("missing %q:\n%s", want, body)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "redis_") {
			t.Errorf("family %s kept its name under a namespace", name)
		}
	}
	for _, bad := range []string{"1shop", "shop-eu", "shop:eu", "sh op", "é"} {
		if _, err := metrics.NewExposer(metrics.ExposeOptions{Namespace: bad}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("NewExposer(%q) = %v, want an error naming it", bad, err)
		}
	}
}

// TestExpositionHostileLabels: label values with quotes, backslashes, newlines and
// non-ASCII bytes survive the regrouping unchanged.
func TestExpositionHostileLabels(t *testing.T) {
	s := register(t)
	hostile := "q\"b\\s\nn} x=\"y\", é"
	s.GetOrCreateCounter(metrics.Name("redis_streaming_rl_denied_total", "name", hostile)).Add(9)
	e, _ := metrics.NewExposer(metrics.ExposeOptions{})
	fams, err := e.Families()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		for _, smp := range f.Samples {
			if f.Name == "redis_streaming_rl_denied_total" && len(smp.Labels) == 1 && smp.Labels[0].Value == hostile {
				found = smp.Value == 9
			}
		}
	}
	if !found {
		t.Fatalf("the hostile label value did not survive: %+v", fams)
	}
	var buf bytes.Buffer
	e.WritePrometheus(&buf)
	parse(t, buf.String())
}

func countLines(body, line string) int {
	n := 0
	for _, l := range strings.Split(body, "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// assertNoDuplicateSeries fails when a series (name and labels) appears twice.
func assertNoDuplicateSeries(t *testing.T, body string) {
	t.Helper()
	seen := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		series := l[:strings.LastIndexByte(l, ' ')]
		if seen[series] {
			t.Errorf("series %s is written twice", series)
		}
		seen[series] = true
	}
}
