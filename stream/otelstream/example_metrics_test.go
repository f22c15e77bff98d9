package otelstream_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/otelstream"
)

func ExampleRegisterMetrics() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	defer client.Close()

	reader := sdkmetric.NewManualReader() // in a program: a periodic reader and an OTLP exporter
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	unregister, err := otelstream.RegisterMetrics(otelstream.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer unregister()

	producer, _ := stream.NewProducer(client, stream.Config{}) // metrics in metrics.Stream, the default
	_, _ = producer.Send(context.Background(), "example-otel-orders", stream.NewMessage(map[string]int{"id": 1}))

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "redis_streaming_mq_produced" {
			continue
		}
		for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
			if v, _ := p.Attributes.Value("messaging.destination.name"); v.AsString() == "example-otel-orders" {
				fmt.Println(m.Name, p.Value)
			}
		}
	}
	// Output: redis_streaming_mq_produced 1
}
