package otelstream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/otelstream"
)

func Example() {
	srv, _ := miniredis.Run() // any Redis; an in-process one here
	defer srv.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	defer client.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx := context.Background()

	producer, _ := stream.NewProducer(client, stream.Config{})
	producer.Use(otelstream.SendMiddleware(otelstream.WithTracerProvider(tp)))

	consumer, _ := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	consumer.Use(otelstream.Middleware(otelstream.WithTracerProvider(tp)), stream.Recover())
	traced := make(chan trace.SpanContext, 1)
	_ = stream.Register(consumer, stream.Handler[string]{Topic: "orders", Group: "billing",
		Handle: func(ctx context.Context, msg *stream.Message[string]) error {
			traced <- trace.SpanContextFromContext(ctx) // the consumer span
			return nil
		}})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	sendCtx, span := tp.Tracer("app").Start(ctx, "checkout")
	_, _ = producer.Send(sendCtx, "orders", stream.NewMessage("order 1"))
	span.End()
	sc := <-traced
	fmt.Println("same trace as the sender:", sc.TraceID() == span.SpanContext().TraceID())
	// Output: same trace as the sender: true
}
