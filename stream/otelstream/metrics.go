package otelstream

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/stream"
)

// WithMeterProvider sets the meter provider of RegisterMetrics. Default:
// otel.GetMeterProvider() when RegisterMetrics is called.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// instrument kinds of the bridged families.
const (
	kindCounter   = iota // a _total family: an Int64ObservableCounter without the _total suffix
	kindGauge            // a Float64ObservableGauge of the same name
	kindHistogram        // a Prometheus histogram: its _count and _sum as observable counters
)

// family is one stream metric family the bridge exports.
type family struct {
	name, desc string
	kind       int
}

// families lists every metric family of package stream (stream.MetricFamilies) with the
// instrument it becomes, or an error for a family type the bridge has no instrument for.
func families() ([]family, error) {
	var out []family
	for _, f := range stream.MetricFamilies() {
		k := -1
		switch f.Type {
		case metrics.TypeCounter:
			k = kindCounter
		case metrics.TypeGauge:
			k = kindGauge
		case metrics.TypeHistogram:
			k = kindHistogram
		}
		if k < 0 {
			return nil, fmt.Errorf("otelstream: metric %s: no instrument for type %q", f.Name, f.Type)
		}
		out = append(out, family{f.Name, f.Help, k})
	}
	return out, nil
}

// Attribute keys of the bridged series: the topic and group labels become the messaging
// semantic-convention attributes; any other label (op) keeps its name.
var labelKeys = map[string]attribute.Key{
	"topic": semconv.MessagingDestinationNameKey,
	"group": semconv.MessagingConsumerGroupNameKey,
}

// RegisterMetrics exports the stream package's metrics through an OpenTelemetry meter
// (scope ScopeName), next to their Prometheus exposition: on each collection it reads the
// series of VictoriaMetrics' default registry (metrics.Stream, the default Config.Metrics;
// a Set of your own must be registered there with metrics.RegisterSet from
// github.com/VictoriaMetrics/metrics to be seen) and observes them:
//   - a counter family (name ending in _total) as an Int64ObservableCounter named without
//     the suffix ("redis_streaming_mq_consumed"), so that exporters adding _total (the OTel
//     Prometheus exporter) give back the original name;
//   - a gauge as a Float64ObservableGauge of the same name;
//   - a histogram (handle and replay latency) as two observable counters, <name>_count
//     and <name>_sum (seconds): the OTel API has no asynchronous histogram.
//
// The topic label becomes messaging.destination.name, group messaging.consumer.group.name;
// other labels (op) keep their names. Call the returned function to unregister. It returns
// an error when the meter refuses an instrument or the callback.
func RegisterMetrics(opts ...Option) (unregister func() error, err error) {
	c := newConfig(opts)
	mp := c.mp
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	counters := map[string]metric.Int64ObservableCounter{} // series name -> instrument
	gauges := map[string]metric.Float64ObservableGauge{}
	sums := map[string]metric.Float64ObservableCounter{}
	var all []metric.Observable
	fams, err := families()
	if err != nil {
		return nil, err
	}
	for _, f := range fams {
		switch f.kind {
		case kindCounter:
			inst, err := meter.Int64ObservableCounter(strings.TrimSuffix(f.name, "_total"), metric.WithDescription(f.desc), metric.WithUnit("1"))
			if err != nil {
				return nil, fmt.Errorf("otelstream: instrument for %s: %w", f.name, err)
			}
			counters[f.name] = inst
			all = append(all, inst)
		case kindGauge:
			inst, err := meter.Float64ObservableGauge(f.name, metric.WithDescription(f.desc), metric.WithUnit("1"))
			if err != nil {
				return nil, fmt.Errorf("otelstream: instrument for %s: %w", f.name, err)
			}
			gauges[f.name] = inst
			all = append(all, inst)
		case kindHistogram:
			n, err := meter.Int64ObservableCounter(f.name+"_count", metric.WithDescription(f.desc+" Number of observations."), metric.WithUnit("1"))
			if err != nil {
				return nil, fmt.Errorf("otelstream: instrument for %s: %w", f.name, err)
			}
			s, err := meter.Float64ObservableCounter(f.name+"_sum", metric.WithDescription(f.desc+" Sum of observations."), metric.WithUnit("s"))
			if err != nil {
				return nil, fmt.Errorf("otelstream: instrument for %s: %w", f.name, err)
			}
			counters[f.name+"_count"] = n
			sums[f.name+"_sum"] = s
			all = append(all, n, s)
		}
	}
	exp, err := metrics.NewExposer(metrics.ExposeOptions{})
	if err != nil {
		return nil, fmt.Errorf("otelstream: %w", err)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		fams, ferr := exp.Families() // an unreadable line is left out; the rest is observed
		for _, fam := range fams {
			for _, s := range fam.Samples {
				if inst, ok := counters[s.Name]; ok {
					o.ObserveInt64(inst, int64(s.Value), metric.WithAttributes(attributes(s.Labels)...))
				} else if inst, ok := gauges[s.Name]; ok {
					o.ObserveFloat64(inst, s.Value, metric.WithAttributes(attributes(s.Labels)...))
				} else if inst, ok := sums[s.Name]; ok {
					o.ObserveFloat64(inst, s.Value, metric.WithAttributes(attributes(s.Labels)...))
				}
			}
		}
		if ferr != nil {
			return fmt.Errorf("otelstream: %w", ferr)
		}
		return nil
	}, all...)
	if err != nil {
		return nil, fmt.Errorf("otelstream: register the metrics callback: %w", err)
	}
	return reg.Unregister, nil
}

// BridgedFamilies returns the names of the metric families RegisterMetrics exports, as
// package stream names them.
func BridgedFamilies() []string {
	fams, _ := families()
	out := make([]string, len(fams))
	for i, f := range fams {
		out[i] = f.name
	}
	return out
}

// attributes turns a series' labels into attributes (histogram bucket bounds excluded).
func attributes(labels []metrics.Label) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(labels))
	for _, l := range labels {
		if l.Name == "le" || l.Name == "vmrange" {
			continue
		}
		k, ok := labelKeys[l.Name]
		if !ok {
			k = attribute.Key(l.Name)
		}
		out = append(out, k.String(l.Value))
	}
	return out
}
