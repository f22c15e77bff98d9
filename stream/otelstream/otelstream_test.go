package otelstream_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
	"github.com/redstream-go/redstream/stream/otelstream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

type order struct {
	ID int `json:"id"`
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTraceCrossesTheStream sends a message inside an application span through a real
// redis-server and checks, with the SDK's in-memory exporter, that the consumer span is a
// child of (and linked to) the producer span in the same trace, with the messaging
// attributes, and that the handler's ctx carries it; a failed first delivery is recorded.
func TestTraceCrossesTheStream(t *testing.T) {
	client := redistest.Client(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	topic := "otel-" + time.Now().Format("150405.000000")
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond,
		Autoclaim: stream.AutoclaimConfig{MinIdle: 150 * time.Millisecond, Interval: 50 * time.Millisecond}}

	p, err := stream.NewProducer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Use(otelstream.SendMiddleware(otelstream.WithTracerProvider(tp)))
	c, err := stream.NewConsumer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Use(otelstream.Middleware(otelstream.WithTracerProvider(tp)), stream.Recover())
	handlerSpans := make(chan trace.SpanContext, 2)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			handlerSpans <- trace.SpanContextFromContext(ctx)
			if m.DeliveryCount == 1 {
				return errors.New("first delivery fails")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })

	ctx, app := tp.Tracer("app").Start(context.Background(), "checkout")
	id, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 1}))
	app.End()
	if err != nil {
		t.Fatal(err)
	}
	var got []trace.SpanContext
	for len(got) < 2 {
		select {
		case sc := <-handlerSpans:
			got = append(got, sc)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d deliveries handled, want 2", len(got))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(exp.GetSpans()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	spans := exp.GetSpans()
	var send tracetest.SpanStub
	var process []tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case "send " + topic:
			send = s
		case "process " + topic:
			process = append(process, s)
		}
	}
	if !send.SpanContext.IsValid() || len(process) != 2 {
		t.Fatalf("spans %d (send valid %v, %d process), want 1 send and 2 process", len(spans), send.SpanContext.IsValid(), len(process))
	}
	if send.SpanKind != trace.SpanKindProducer || send.Parent.SpanID() != app.SpanContext().SpanID() {
		t.Errorf("send span kind %v parent %v, want producer, child of the app span", send.SpanKind, send.Parent.SpanID())
	}
	sa := attrs(send)
	for k, want := range map[attribute.Key]string{"messaging.system": "redis", "messaging.destination.name": topic,
		"messaging.operation.name": "send", "messaging.operation.type": "send", "messaging.message.id": id} {
		if v := sa[k].AsString(); v != want {
			t.Errorf("send span %s = %q, want %q", k, v, want)
		}
	}
	for i, s := range process {
		if s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("process span %d kind %v, want consumer", i, s.SpanKind)
		}
		if s.SpanContext.TraceID() != send.SpanContext.TraceID() || s.Parent.SpanID() != send.SpanContext.SpanID() {
			t.Errorf("process span %d: trace %v parent %v, want child of the send span %v", i, s.SpanContext.TraceID(), s.Parent.SpanID(), send.SpanContext.SpanID())
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() {
			t.Errorf("process span %d links %v, want one link to the send span", i, s.Links)
		}
		pa := attrs(s)
		for k, want := range map[attribute.Key]string{"messaging.system": "redis", "messaging.destination.name": topic,
			"messaging.operation.name": "process", "messaging.operation.type": "process", "messaging.message.id": id,
			"messaging.consumer.group.name": "g"} {
			if v := pa[k].AsString(); v != want {
				t.Errorf("process span %d %s = %q, want %q", i, k, v, want)
			}
		}
		dc := pa[otelstream.DeliveryCountKey].AsInt64()
		if wantErr := dc == 1; (s.Status.Code == codes.Error) != wantErr {
			t.Errorf("process span of delivery %d: status %v, want error %v", dc, s.Status, wantErr)
		}
		found := false
		for _, sc := range got {
			found = found || sc.SpanID() == s.SpanContext.SpanID()
		}
		if !found {
			t.Errorf("process span %d is not the span in the handler's ctx", i)
		}
	}
}
