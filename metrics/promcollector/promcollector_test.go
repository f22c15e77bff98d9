package promcollector_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/metrics/promcollector"
)

// scrape serves reg through promhttp on a real HTTP server and returns the body.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", res.Status, body)
	}
	return string(body)
}

func has(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		found := false
		for _, l := range strings.Split(body, "\n") {
			if l == want {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
}

// TestPromhttpScrape: redstream's counters, gauges and histograms reach a promhttp scrape
// with their types, help texts and labels, next to client_golang's own collectors, in a
// registry that checks consistency.
func TestPromhttpScrape(t *testing.T) {
	allowed, denied, _ := metrics.RateLimitCounters("promhttp-test")
	allowed.Add(4)
	denied.Inc()
	s := vm.NewSet()
	vm.RegisterSet(s)
	t.Cleanup(func() { vm.UnregisterSet(s, true) })
	h := s.GetOrCreatePrometheusHistogram(metrics.Name("redis_streaming_mq_handle_latency_ms_seconds", "topic", "orders", "group", "billing"))
	for _, v := range []float64{0.001, 0.02, 0.02, 3} {
		h.Update(v)
	}
	s.GetOrCreateGauge(metrics.Name("redis_streaming_mq_lag", "topic", "orders", "group", "billing"), nil).Set(12)
	// Two caches: one family in two sets.
	s2 := vm.NewSet()
	vm.RegisterSet(s2)
	t.Cleanup(func() { vm.UnregisterSet(s2, true) })
	s.GetOrCreateCounter(`redis_cache_hits_total{name="users"}`).Add(7)
	s2.GetOrCreateCounter(`redis_cache_hits_total{name="carts"}`).Add(8)

	c, err := promcollector.New(promcollector.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c, collectors.NewGoCollector())
	body := scrape(t, reg)
	has(t, body,
		"# HELP redis_streaming_rl_allowed_total Decisions a named rate limiter admitted.",
		"# TYPE redis_streaming_rl_allowed_total counter",
		`redis_streaming_rl_allowed_total{name="promhttp-test"} 4`,
		`redis_streaming_rl_denied_total{name="promhttp-test"} 1`,
		"# TYPE redis_streaming_mq_lag gauge",
		`redis_streaming_mq_lag{group="billing",topic="orders"} 12`,
		"# TYPE redis_streaming_mq_handle_latency_ms_seconds histogram",
		`redis_streaming_mq_handle_latency_ms_seconds_count{group="billing",topic="orders"} 4`,
		`redis_streaming_mq_handle_latency_ms_seconds_bucket{group="billing",topic="orders",le="+Inf"} 4`,
		`redis_cache_hits_total{name="carts"} 8`,
		`redis_cache_hits_total{name="users"} 7`,
	)
	if !strings.Contains(body, "go_goroutines") {
		t.Error("client_golang's own Go collector is missing from the scrape")
	}

	// The histogram's buckets and sum survive exactly.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var hist *dto.Histogram
	for _, mf := range mfs {
		if mf.GetName() == "redis_streaming_mq_handle_latency_ms_seconds" {
			for _, m := range mf.GetMetric() {
				hist = m.GetHistogram()
			}
		}
	}
	if hist == nil {
		t.Fatal("no histogram gathered")
	}
	if hist.GetSampleCount() != 4 || hist.GetSampleSum() < 3.04 || hist.GetSampleSum() > 3.042 {
		t.Errorf("histogram count %d sum %v, want 4 and 3.041", hist.GetSampleCount(), hist.GetSampleSum())
	}
	var le005 uint64
	for _, b := range hist.GetBucket() {
		if b.GetUpperBound() == 0.025 {
			le005 = b.GetCumulativeCount()
		}
	}
	if le005 != 3 {
		t.Errorf("bucket le=0.025 holds %d, want 3 (0.001, 0.02, 0.02); buckets %v", le005, hist.GetBucket())
	}

	// Values are read on every scrape.
	allowed.Add(6)
	has(t, scrape(t, reg), `redis_streaming_rl_allowed_total{name="promhttp-test"} 10`)
}

// TestNamespace: the namespace prefixes redstream's metric names in the scrape; a bad one is
// an error.
func TestNamespace(t *testing.T) {
	allowed, _, _ := metrics.RateLimitCounters("promhttp-ns")
	allowed.Inc()
	c, err := promcollector.New(promcollector.Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	body := scrape(t, reg)
	has(t, body, `shop_redis_streaming_rl_allowed_total{name="promhttp-ns"} 1`, "# TYPE shop_redis_streaming_rl_allowed_total counter")
	if strings.Contains(body, "\nredis_streaming_rl_allowed_total") {
		t.Errorf("un-namespaced series in the scrape:\n%s", body)
	}
	if _, err := promcollector.New(promcollector.Options{Namespace: "shop-eu"}); err == nil {
		t.Error("a namespace with a dash was accepted")
	}
}
