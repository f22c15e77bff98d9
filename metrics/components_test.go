package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/stream"
)

// embedded starts miniredis and a client for it, both closed when the test ends.
func embedded(t *testing.T) rueidis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

// scrape returns the body Handler serves.
func scrape(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200", rec.Code)
	}
	return rec.Body.String()
}

// TestHandlerExposesEveryComponent uses a cache (its own set, registered by cache.New) and a
// stream producer (metrics.Stream) and finds their counters in one scrape, each series once.
func TestHandlerExposesEveryComponent(t *testing.T) {
	client := embedded(t)
	ctx := context.Background()

	cfg := cache.DefaultConfig()
	cfg.Name = "metrics-components-test"
	cfg.KeyPrefix = "metrics-test:"
	c, err := cache.New(client, cfg)
	if err != nil {
		t.Fatalf("cache.New: %v", err)
	}
	if err := c.Set(ctx, "k", "v", time.Minute); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got, err := cache.Get[string](ctx, c, "k"); err != nil || got != "v" {
		t.Fatalf("Get = %q, %v; want v, nil", got, err)
	}

	p, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		t.Fatalf("stream.NewProducer: %v", err)
	}
	for range 2 {
		if _, err := p.Send(ctx, "metrics-components-topic", stream.NewMessage(map[string]int{"n": 1})); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	allowed, _, _ := metrics.RateLimitCounters("metrics-components-test")
	allowed.Inc()

	body := scrape(t)
	for _, want := range []string{
		`redis_cache_hits_total{name="metrics-components-test"} 1`,
		"redis_streaming_mq_produced_total" + `{topic="metrics-components-topic"} 2`,
		"redis_streaming_rl_allowed_total" + `{name="metrics-components-test"} 1`,
	} {
		if n := countLines(body, want); n != 1 {
			t.Errorf("exposition has %d lines %q, want 1:\n%s", n, want, body)
		}
	}
	assertNoDuplicateSeries(t, body)

	// A closed cache's set is unregistered: its series leave the exposition.
	c.Close()
	if body := scrape(t); strings.Contains(body, `redis_cache_hits_total{name="metrics-components-test"}`) {
		t.Errorf("a closed cache's counters are still exposed")
	}
}

// TestWritePrometheusMatchesDefaultRegistry checks that WritePrometheus writes exactly the
// series of VictoriaMetrics' default registry (regrouped by family, with metadata), so
// serving either never misses a component.
func TestWritePrometheusMatchesDefaultRegistry(t *testing.T) {
	metrics.Stream.GetOrCreateCounter(`redstream_metrics_registry_test_total{name="x"}`).Add(7)
	var ours, theirs strings.Builder
	metrics.WritePrometheus(&ours)
	vm.WritePrometheus(&theirs, false)
	if got, want := seriesLines(ours.String()), seriesLines(theirs.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("WritePrometheus series differ from VictoriaMetrics' default registry:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := countLines(ours.String(), `redstream_metrics_registry_test_total{name="x"} 7`); n != 1 {
		t.Errorf("series written %d times, want 1", n)
	}
	assertNoDuplicateSeries(t, ours.String())
}

// seriesLines returns the sample lines of an exposition, sorted.
func seriesLines(body string) []string {
	var ls []string
	for _, l := range strings.Split(body, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			ls = append(ls, l)
		}
	}
	sort.Strings(ls)
	return ls
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
