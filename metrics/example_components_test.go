package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/stream"
)

// One /metrics endpoint exposes every component: here a cache (its own set, registered by
// cache.New) and a stream producer (metrics.Stream), on an embedded Redis.
func ExampleHandler_components() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	cfg := cache.DefaultConfig()
	cfg.Name = "users"
	users, err := cache.New(client, cfg)
	if err != nil {
		panic(err)
	}
	defer users.Close() // also removes its metrics from the exposition
	_ = users.Set(ctx, "user:1", "Ada", time.Minute)
	_, _ = cache.Get[string](ctx, users, "user:1") // a hit

	producer, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		panic(err)
	}
	_, _ = producer.Send(ctx, "orders", stream.NewMessage("order 1"))

	// In a program: http.Handle("/metrics", metrics.Handler(true)).
	rec := httptest.NewRecorder()
	metrics.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, `redis_cache_hits_total{name="users"}`) ||
			strings.HasPrefix(line, `redis_streaming_mq_produced_total{topic="orders"}`) {
			fmt.Println(line)
		}
	}
	// Unordered output:
	// redis_cache_hits_total{name="users"} 1
	// redis_streaming_mq_produced_total{topic="orders"} 1
}

// An exposition with a metric-name namespace, for a Prometheus that scrapes several
// redstream programs under one prefix each.
func ExampleNewExposer() {
	e, err := metrics.NewExposer(metrics.ExposeOptions{Namespace: "shop"})
	if err != nil {
		panic(err)
	}
	allowed, _, _ := metrics.RateLimitCounters("example-exposer")
	allowed.Add(2)
	var buf strings.Builder
	e.WritePrometheus(&buf)
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "rl_allowed_total") && (strings.HasPrefix(l, "#") || strings.Contains(l, "example-exposer")) {
			fmt.Println(l)
		}
	}
	// Output:
	// # HELP shop_redis_streaming_rl_allowed_total Decisions a named rate limiter admitted.
	// # TYPE shop_redis_streaming_rl_allowed_total counter
	// shop_redis_streaming_rl_allowed_total{name="example-exposer"} 2
}
