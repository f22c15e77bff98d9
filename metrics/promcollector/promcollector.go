// Package promcollector exposes redstream's metrics through prometheus/client_golang, for
// programs that serve /metrics with promhttp rather than with package metrics' Handler.
//
//	c, err := promcollector.New(promcollector.Options{Namespace: "shop"})
//	if err != nil { ... }
//	prometheus.MustRegister(c)
//	http.Handle("/metrics", promhttp.Handler())
//
// The collector reads, on every scrape, every metric set registered with VictoriaMetrics'
// default registry (the component sets of package metrics, one set per open cache, a stream
// Config.Metrics set once registered, and the program's own VictoriaMetrics metrics), the
// same series metrics.WritePrometheus writes, and hands them to client_golang as constant
// metrics: counters, gauges and histograms keep their types, HELP texts and labels. It is
// an unchecked collector (Describe sends nothing), since the families change as caches
// open and close. Go runtime and process metrics are left to client_golang's own
// collectors. Serve one exposition or the other, not both, or Prometheus scrapes every
// series twice.
//
// It is a Go module of its own (go get github.com/redstream-go/redstream/metrics/promcollector),
// so that programs that do not use client_golang never require it.
package promcollector

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redstream-go/redstream/metrics"
)

// Options configures a Collector.
type Options struct {
	// Namespace is prepended, with an underscore, to redstream's metric names, as
	// metrics.ExposeOptions.Namespace does. Blank keeps the names.
	Namespace string
}

// Collector is a prometheus.Collector of redstream's metrics. It is safe for concurrent
// use.
type Collector struct {
	e *metrics.Exposer
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector, or an error naming what is wrong with o.
func New(o Options) (*Collector, error) {
	e, err := metrics.NewExposer(metrics.ExposeOptions{Namespace: o.Namespace})
	if err != nil {
		return nil, fmt.Errorf("promcollector: %w", err)
	}
	return &Collector{e: e}, nil
}

// Describe sends nothing: the Collector is unchecked, its families change at run time.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the current value of every series. A series client_golang refuses (for
// instance a family whose series disagree on their label names) is sent as an invalid
// metric naming it, so promhttp reports it instead of dropping it silently.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	fams, err := c.e.Families()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("redstream_exposition_error", "redstream metrics that could not be read.", nil, nil), err)
	}
	for _, f := range fams {
		collectFamily(ch, f)
	}
}

func collectFamily(ch chan<- prometheus.Metric, f metrics.Family) {
	help := f.Help
	if help == "" {
		help = f.Name + " (from the VictoriaMetrics registry)."
	}
	descs := map[string]*prometheus.Desc{}
	desc := func(names []string) *prometheus.Desc {
		key := fmt.Sprint(names)
		d := descs[key]
		if d == nil {
			d = prometheus.NewDesc(f.Name, help, names, nil)
			descs[key] = d
		}
		return d
	}
	send := func(m prometheus.Metric, err error) {
		if err != nil {
			m = prometheus.NewInvalidMetric(prometheus.NewDesc(f.Name, help, nil, nil), fmt.Errorf("promcollector: %s: %w", f.Name, err))
		}
		ch <- m
	}
	switch f.Type {
	case "histogram", "summary":
		for _, s := range series(f) {
			d := desc(s.names)
			if f.Type == "histogram" {
				send(prometheus.NewConstHistogram(d, s.count, s.sum, s.buckets, s.values...))
			} else {
				send(prometheus.NewConstSummary(d, s.count, s.sum, s.quantiles, s.values...))
			}
		}
		return
	}
	vt := prometheus.UntypedValue
	switch f.Type {
	case "counter":
		vt = prometheus.CounterValue
	case "gauge":
		vt = prometheus.GaugeValue
	}
	for _, s := range f.Samples {
		names, values := split(s.Labels, "")
		send(prometheus.NewConstMetric(desc(names), vt, s.Value, values...))
	}
}

// split returns the label names and values, leaving out the label named skip.
func split(ls []metrics.Label, skip string) (names, values []string) {
	for _, l := range ls {
		if l.Name != skip {
			names = append(names, l.Name)
			values = append(values, l.Value)
		}
	}
	return names, values
}

// distribution is one histogram or summary series, gathered from its _bucket (or
// quantile), _sum and _count samples.
type distribution struct {
	names, values []string
	count         uint64
	sum           float64
	buckets       map[float64]uint64
	quantiles     map[float64]float64
}

// series groups a histogram's or summary's samples by their labels (le and quantile aside).
func series(f metrics.Family) []*distribution {
	byKey := map[string]*distribution{}
	var order []string
	for _, s := range f.Samples {
		skip := "le"
		if f.Type == "summary" {
			skip = "quantile"
		}
		names, values := split(s.Labels, skip)
		key := fmt.Sprint(names, values)
		d := byKey[key]
		if d == nil {
			d = &distribution{names: names, values: values, buckets: map[float64]uint64{}, quantiles: map[float64]float64{}}
			byKey[key] = d
			order = append(order, key)
		}
		switch s.Name {
		case f.Name + "_sum":
			d.sum = s.Value
		case f.Name + "_count":
			d.count = uint64(s.Value)
		default:
			for _, l := range s.Labels {
				if l.Name != skip {
					continue
				}
				b, err := strconv.ParseFloat(l.Value, 64)
				if err != nil || math.IsInf(b, +1) {
					break // +Inf is the count, which client_golang adds itself
				}
				if f.Type == "histogram" {
					d.buckets[b] = uint64(s.Value)
				} else {
					d.quantiles[b] = s.Value
				}
			}
		}
	}
	sort.Strings(order) // a stable order for the collector's output
	out := make([]*distribution, len(order))
	for i, k := range order {
		out[i] = byKey[k]
	}
	return out
}
