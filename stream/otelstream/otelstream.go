// Package otelstream traces redstream's stream package with OpenTelemetry: [SendMiddleware]
// starts a producer span per Send and injects its W3C trace context into the message's
// headers (h:traceparent, h:tracestate, ...); [Middleware] extracts it on the consumer and
// starts the consumer span as a child of the producer span, so one trace crosses the
// stream. Spans carry the messaging semantic-convention attributes (messaging.system
// "redis", messaging.destination.name, messaging.operation.name and .type,
// messaging.message.id, messaging.consumer.group.name).
//
// [RegisterMetrics] exports the stream metrics (counters, gauges, latency histograms'
// count and sum) through an OpenTelemetry meter as well, read from the same
// VictoriaMetrics sets the Prometheus exposition serves.
//
// It is its own Go module, so that the core module does not depend on the OpenTelemetry
// SDK.
//
//	producer.Use(otelstream.SendMiddleware())
//	consumer.Use(otelstream.Middleware(), stream.Recover())
package otelstream

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redstream-go/redstream/stream"
)

// ScopeName is the instrumentation scope of the tracer.
const ScopeName = "github.com/redstream-go/redstream/stream/otelstream"

// System is the messaging.system attribute value.
const System = "redis"

// DeliveryCountKey is the attribute holding a delivery's count (1 on the first delivery).
const DeliveryCountKey = attribute.Key("redstream.delivery_count")

// Option configures SendMiddleware, Middleware and RegisterMetrics.
type Option func(*config)

type config struct {
	tp    trace.TracerProvider
	props propagation.TextMapPropagator
	mp    metric.MeterProvider // RegisterMetrics
}

// WithTracerProvider sets the tracer provider. Default: otel.GetTracerProvider() when the
// middleware is built.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator sets the propagator. Default: otel.GetTextMapPropagator() when the
// middleware is built, or W3C trace context and baggage when that is the no-op default.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.props = p }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.props == nil {
		c.props = otel.GetTextMapPropagator()
		if len(c.props.Fields()) == 0 {
			c.props = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
		}
	}
	return c
}

// SendMiddleware returns producer middleware: for each Send, a span "send <topic>" of kind
// Producer (a child of the span in the Send's ctx), whose context it injects into the
// outgoing headers; the span records the entry id, or the error when the send fails.
func SendMiddleware(opts ...Option) stream.SendMiddleware {
	c := newConfig(opts)
	tracer := c.tp.Tracer(ScopeName)
	return func(next stream.SendFunc) stream.SendFunc {
		return func(ctx context.Context, out *stream.Outgoing) (string, error) {
			ctx, span := tracer.Start(ctx, "send "+out.Topic,
				trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(
					semconv.MessagingSystemKey.String(System),
					semconv.MessagingDestinationName(out.Topic),
					semconv.MessagingOperationName("send"),
					semconv.MessagingOperationTypeSend,
				))
			defer span.End()
			c.props.Inject(ctx, propagation.MapCarrier(out.Headers))
			id, err := next(ctx, out)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				return id, err
			}
			span.SetAttributes(semconv.MessagingMessageID(id))
			return id, nil
		}
	}
}

// Middleware returns consumer middleware: for each delivery, a span "process <topic>" of
// kind Consumer, a child of the producer span whose context the message's headers carry
// (a root span when they carry none), linked to it as well, with the delivery's id, group
// and delivery count. The handler's ctx carries the span (and the message's baggage); a
// failed delivery records the error. Put it outside stream.Recover to see panics as errors.
func Middleware(opts ...Option) stream.Middleware {
	c := newConfig(opts)
	tracer := c.tp.Tracer(ScopeName)
	return func(next stream.HandleFunc) stream.HandleFunc {
		return func(ctx context.Context, d *stream.Delivery) error {
			pctx := c.props.Extract(ctx, propagation.MapCarrier(d.Headers))
			sopts := []trace.SpanStartOption{
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					semconv.MessagingSystemKey.String(System),
					semconv.MessagingDestinationName(d.Topic),
					semconv.MessagingOperationName("process"),
					semconv.MessagingOperationTypeProcess,
					semconv.MessagingMessageID(d.ID),
					semconv.MessagingConsumerGroupName(d.Group),
					DeliveryCountKey.Int64(d.DeliveryCount),
				),
			}
			if sc := trace.SpanContextFromContext(pctx); sc.IsValid() && sc.IsRemote() {
				sopts = append(sopts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
			ctx, span := tracer.Start(pctx, "process "+d.Topic, sopts...)
			defer span.End()
			err := next(ctx, d)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			return err
		}
	}
}
