// Package dashboards holds redstream's Grafana dashboard, redstream.json: stream
// throughput, handle latency quantiles, pending, lag and in-flight entries, retries and
// dead letters, rate-limit decisions per limiter, cache hits, misses and loads, failure
// processors and Redis errors, over the metrics the library exports (README, "Operating: CLI
// and dashboards"). Import it into Grafana (Dashboards > New > Import) and pick the
// Prometheus data source that scrapes the application's metrics endpoint.
//
// The package has no Go API: its test loads the dashboard and fails when a query names a
// metric, or a label matcher a label, that the library does not export.
package dashboards
