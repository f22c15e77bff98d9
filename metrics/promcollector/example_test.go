package promcollector_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/metrics/promcollector"
)

// A program serving promhttp registers the collector once; every redstream metric then
// appears in its /metrics.
func Example() {
	c, err := promcollector.New(promcollector.Options{Namespace: "shop"})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	allowed, _, _ := metrics.RateLimitCounters("checkout")
	allowed.Add(3)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if strings.Contains(l, "rl_allowed_total") && (strings.HasPrefix(l, "#") || strings.Contains(l, "checkout")) {
			fmt.Println(l)
		}
	}
	// Output:
	// # HELP shop_redis_streaming_rl_allowed_total Decisions a named rate limiter admitted.
	// # TYPE shop_redis_streaming_rl_allowed_total counter
	// shop_redis_streaming_rl_allowed_total{name="checkout"} 3
}
