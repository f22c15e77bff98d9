package metrics_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream/metrics"
)

func TestName(t *testing.T) {
	tests := []struct {
		family string
		labels []string
		want   string
	}{
		{"x_total", nil, "x_total"},
		{"x_total", []string{"name"}, "x_total"},
		{"x_total", []string{"name", "api1"}, `x_total{name="api1"}`},
		{"x_total", []string{"name", "a", "outcome", "ok"}, `x_total{name="a",outcome="ok"}`},
		{"x_total", []string{"name", "q\"b\\s\nn"}, `x_total{name="q\"b\\s\nn"}`},
	}
	for _, tt := range tests {
		if got := metrics.Name(tt.family, tt.labels...); got != tt.want {
			t.Errorf("Name(%q, %q) = %s, want %s", tt.family, tt.labels, got, tt.want)
		}
		// Every name Name builds is accepted by VictoriaMetrics (it panics otherwise).
		vm.NewSet().GetOrCreateCounter(metrics.Name(tt.family, tt.labels...))
	}
}

func TestRateLimitCountersAndHandler(t *testing.T) {
	a, d, e := metrics.RateLimitCounters("metrics-test")
	a.Add(3)
	d.Inc()
	a2, _, _ := metrics.RateLimitCounters("metrics-test")
	if a2 != a || a2.Get() != 3 || e.Get() != 0 {
		t.Fatalf("RateLimitCounters is not idempotent: %p %p %d", a, a2, a2.Get())
	}
	rec := httptest.NewRecorder()
	metrics.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`redis_streaming_rl_allowed_total{name="metrics-test"} 3`,
		`redis_streaming_rl_denied_total{name="metrics-test"} 1`,
		`redis_streaming_rl_errors_total{name="metrics-test"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q:\n%s", want, body)
		}
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if strings.Contains(body, "go_goroutines") {
		t.Errorf("process metrics written without being asked for")
	}
	rec = httptest.NewRecorder()
	metrics.Handler(true).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Errorf("Handler(true) lacks the Go runtime metrics")
	}
}

func TestSetsRegisteredGlobally(t *testing.T) {
	for name, set := range map[string]*metrics.Set{"ratelimit": metrics.RateLimit, "reliability": metrics.Reliability,
		"dedup": metrics.Dedup, "stream": metrics.Stream, "cache": metrics.Cache} {
		series := `redstream_metrics_test_total{set="` + name + `"}`
		set.GetOrCreateCounter(series).Inc()
		var b bytes.Buffer
		vm.WritePrometheus(&b, false) // VictoriaMetrics' default registry
		if !strings.Contains(b.String(), series+" 1") {
			t.Errorf("the %s set is not exposed by VictoriaMetrics' WritePrometheus", name)
		}
	}
}

func ExampleHandler() {
	allowed, denied, _ := metrics.RateLimitCounters("example")
	allowed.Add(2)
	denied.Inc()

	// In a program: http.Handle("/metrics", metrics.Handler(true)).
	rec := httptest.NewRecorder()
	metrics.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.Contains(line, `{name="example"}`) {
			fmt.Println(line)
		}
	}
	// Output:
	// redis_streaming_rl_allowed_total{name="example"} 2
	// redis_streaming_rl_denied_total{name="example"} 1
	// redis_streaming_rl_errors_total{name="example"} 0
}
