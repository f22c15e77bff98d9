package otelstream_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/otelstream"
)

// point returns the value of instrument name's data point whose attributes include want.
func point(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelstream.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			match := func(set attribute.Set) bool {
				for _, kv := range want {
					if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
						return false
					}
				}
				return true
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Value), true
					}
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return p.Value, true
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return p.Value, true
					}
				}
			}
		}
	}
	return 0, false
}

// TestMetricsThroughMeter runs a producer and a consumer (with the default metric set) on a
// real redis-server and reads the stream metrics back through the SDK's ManualReader:
// counters without _total, gauges, the latency histogram's count and sum, the topic and
// group as messaging attributes, the op label kept.
func TestMetricsThroughMeter(t *testing.T) {
	client := redistest.Client(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	unregister, err := otelstream.RegisterMetrics(otelstream.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	topic := "otel-metrics-" + time.Now().Format("150405.000000")
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond} // Metrics: metrics.Stream
	c, err := stream.NewConsumer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 8)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(_ context.Context, m *stream.Message[order]) error {
			defer func() { done <- struct{}{} }()
			if m.Body.ID == 3 {
				return errors.New("fails")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	p, _ := stream.NewProducer(client, cfg)
	for i := 1; i <= 3; i++ {
		if _, err := p.Send(context.Background(), topic, stream.NewMessage(order{ID: i})); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("messages not handled")
		}
	}
	dest := attribute.String("messaging.destination.name", topic)
	group := attribute.String("messaging.consumer.group.name", "g")
	want := map[string]float64{"redis_streaming_mq_produced": 3, "redis_streaming_mq_consumed": 2, "redis_streaming_mq_dead": 1,
		"redis_streaming_mq_handle_latency_ms_seconds_count": 3}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		missing := ""
		for name, v := range want {
			attrs := []attribute.KeyValue{dest}
			if name != "redis_streaming_mq_produced" {
				attrs = append(attrs, group)
			}
			if got, ok := point(t, rm, name, attrs...); !ok || got != v {
				missing = name
			}
		}
		sum, okSum := point(t, rm, "redis_streaming_mq_handle_latency_ms_seconds_sum", dest, group)
		_, okPending := point(t, rm, "redis_streaming_mq_pending", dest, group)
		if missing == "" && okSum && sum > 0 && okPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("through the meter: %s not as expected (want %v); latency sum %v (%v), pending gauge %v", missing, want, sum, okSum, okPending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := unregister(); err != nil {
		t.Errorf("unregister: %v", err)
	}
}

// TestBridgeCoversStreamMetrics: every metric family package stream declares (a metric name
// constant in its metrics.go or deadletter.go) is bridged, through stream.MetricFamilies.
func TestBridgeCoversStreamMetrics(t *testing.T) {
	src := ""
	for _, f := range []string{"../metrics.go", "../deadletter.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(b)
	}
	bridged := otelstream.BridgedFamilies()
	have := map[string]bool{}
	for _, n := range bridged {
		have[n] = true
	}
	for _, m := range regexp.MustCompile(`"(redis_streaming_(?:mq|dlq)_[a-z_]+)"`).FindAllStringSubmatch(src, -1) {
		if !have[m[1]] {
			t.Errorf("stream declares %s, which RegisterMetrics does not bridge", m[1])
		}
	}
}
