// Package metrics holds redstream's metrics: one VictoriaMetrics/metrics [Set] per
// component, under the Java system's metric names (so existing dashboards and alerts work
// unchanged; docs/metrics.md lists them), and Prometheus text exposition through [WritePrometheus] and [Handler],
// with # HELP and # TYPE lines and an optional metric-name namespace ([NewExposer]).
// Programs serving prometheus/client_golang's promhttp register the same metrics through
// package metrics/promcollector instead.
//
// Every metric redstream creates lives in a Set registered with VictoriaMetrics' default
// registry: the component sets here ([RateLimit], [Reliability], [Dedup], [Stream], [Cache])
// at init, and each cache.Cache's own set from cache.New until its Close. [WritePrometheus]
// and [Handler] write that registry, so one endpoint exposes every component, each set once.
// A program that already serves metrics.WritePrometheus from
// github.com/VictoriaMetrics/metrics exposes the same series without further wiring; serve
// one or the other, not both into one response. VictoriaMetrics' own writer has no # HELP
// or # TYPE lines unless the program calls its ExposeMetadata(true), and then repeats them
// for a family split across sets (one set per cache); the writers here write each family
// once.
//
// Metric names with labels are built by [Name], which escapes label values, so any limiter
// name is safe to use.
package metrics

import (
	"io"
	"net/http"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// Set is a VictoriaMetrics metric set.
type Set = vm.Set

// Counter is a VictoriaMetrics counter: Inc is one atomic add.
type Counter = vm.Counter

// The component sets. Each is safe for concurrent use.
var (
	// RateLimit holds the named limiters' counters (redis_streaming_rl_*).
	RateLimit = vm.NewSet()
	// Reliability holds the retry executor's and failure processors' counters
	// (redis_streaming_reliability_*).
	Reliability = vm.NewSet()
	// Dedup holds the deduplicators' counters.
	Dedup = vm.NewSet()
	// Stream holds the Redis Streams SDK's counters (redis_streaming_mq_*,
	// redis_streaming_dlq_*).
	Stream = vm.NewSet()
	// Cache holds the cache-aside template's counters.
	Cache = vm.NewSet()
)

func init() {
	for _, set := range []*Set{RateLimit, Reliability, Dedup, Stream, Cache} {
		vm.RegisterSet(set)
	}
}

// Metric names of the rate limiters. Each carries a name="..." label, the limiter's name.
const (
	// rateLimitAllowedTotal counts admitted decisions of a named limiter.
	rateLimitAllowedTotal = "redis_streaming_rl_allowed_total"
	// rateLimitDeniedTotal counts denied decisions of a named limiter.
	rateLimitDeniedTotal = "redis_streaming_rl_denied_total"
	// rateLimitErrorsTotal counts calls of a named limiter whose backend failed, whatever
	// its failure policy answered (an error under fail-closed, an admission under
	// fail-open, the fallback's decision), and calls that returned an error for bad input.
	// It is new in redstream: the Java system had no such counter.
	rateLimitErrorsTotal = "redis_streaming_rl_errors_total"
	// rateLimitShadowDeniedTotal counts the denials of a named limiter in shadow mode
	// (redstream.Shadow): requests the limit denied and the limiter admitted.
	rateLimitShadowDeniedTotal = "redis_streaming_rl_shadow_denied_total"
)

// Local denials of the Redis limiters (package redisbackend), label prefix: the limiter's
// key prefix.
const (
	// rateLimitLocalDeniedTotal counts decisions a Redis limiter denied in process, without
	// a Redis call, because an earlier denial of the same key proves them denied (see
	// redisbackend.Options.DisableLocalDenials). A Named limiter counts them among its
	// denials too.
	rateLimitLocalDeniedTotal = "redis_streaming_rl_local_denied_total"
)

// LocalDeniedCounter returns the local-denials counter of the Redis limiters with key
// prefix prefix (redis_streaming_rl_local_denied_total{prefix="..."}: decisions denied in
// process, without a Redis call), creating it on first use. Limiters sharing a prefix share
// it. It is safe for concurrent use.
func LocalDeniedCounter(prefix string) *Counter {
	return RateLimit.GetOrCreateCounter(Name(rateLimitLocalDeniedTotal, "prefix", prefix))
}

// Leased quota of the Redis limiters (package redisbackend, Options.Quota), label prefix:
// the limiter's key prefix.
const (
	// rateLimitQuotaCallsTotal counts the script calls a Redis limiter with leased quota made
	// for a key no lease of it covered: each gives back the previous lease's unused units and
	// takes the next lease (or admits or denies the request alone).
	rateLimitQuotaCallsTotal = "redis_streaming_rl_quota_calls_total"
	// rateLimitQuotaGrantedTotal counts the units those calls took, the asking request's
	// cost included (a call that denies takes none).
	rateLimitQuotaGrantedTotal = "redis_streaming_rl_quota_granted_total"
	// rateLimitQuotaReturnedTotal counts the units of leases given back unused by the next
	// call on their key.
	rateLimitQuotaReturnedTotal = "redis_streaming_rl_quota_returned_total"
	// rateLimitQuotaLocalAllowedTotal counts decisions a Redis limiter admitted in process
	// from a lease, without a Redis call. A Named limiter counts them among its admissions
	// too.
	rateLimitQuotaLocalAllowedTotal = "redis_streaming_rl_quota_local_allowed_total"
)

// QuotaCounters are the leased-quota counters of the Redis limiters of one key prefix (see
// redisbackend.QuotaOptions). Units granted and not admitted are either returned or, when
// the key went quiet past its lease or the process forgot the lease, stay spent in Redis:
// Granted minus Returned is what the leases admitted plus what they left spent.
type QuotaCounters struct {
	// Calls is redis_streaming_rl_quota_calls_total{prefix}: script calls made for keys no
	// lease covered (one per lease renewal).
	Calls *Counter
	// Granted is redis_streaming_rl_quota_granted_total{prefix}: units the calls took,
	// the asking request's cost included.
	Granted *Counter
	// Returned is redis_streaming_rl_quota_returned_total{prefix}: unused units of leases
	// given back by the next call on their key, counted when the call's time shows the
	// script took them back (before a token bucket's lease ended, within a window
	// algorithm's lease window). Units of a key another client deleted or moved to a later
	// window meanwhile are counted though they stayed spent.
	Returned *Counter
	// LocalAllowed is redis_streaming_rl_quota_local_allowed_total{prefix}: decisions
	// admitted in process from a lease, without a Redis call.
	LocalAllowed *Counter
}

// LeasedQuotaCounters returns the leased-quota counters of the Redis limiters with key
// prefix prefix, creating them on first use. Limiters sharing a prefix share them. It is
// safe for concurrent use.
func LeasedQuotaCounters(prefix string) QuotaCounters {
	c := func(family string) *Counter { return RateLimit.GetOrCreateCounter(Name(family, "prefix", prefix)) }
	return QuotaCounters{
		Calls:        c(rateLimitQuotaCallsTotal),
		Granted:      c(rateLimitQuotaGrantedTotal),
		Returned:     c(rateLimitQuotaReturnedTotal),
		LocalAllowed: c(rateLimitQuotaLocalAllowedTotal),
	}
}

// Metric names of degraded rate limiting (a backend failing, a circuit breaker open).
// Each carries a name="..." label, the limiter's name.
const (
	// rateLimitFallbackTotal counts decisions a failure policy answered (fail-open or the
	// fallback limiter) because the backend failed, with a reason="..." label:
	// timeout, error, breaker_open or canceled (the failure reasons).
	rateLimitFallbackTotal = "redis_streaming_rl_fallback_total"
	// rateLimitBreakerState is the state of the circuit breaker of a named limiter's
	// engine: 0 closed (healthy), 1 half-open (probing), 2 open (failing fast).
	rateLimitBreakerState = "redis_streaming_rl_breaker_state"
	// dedupFailuresTotal counts calls of a Redis deduplicator that failed because Redis
	// did, with name="..." (the deduplicator's name) and reason="..." labels (timeout,
	// error, breaker_open, canceled). redisbackend's deduplicators count it themselves.
	dedupFailuresTotal = "redis_streaming_dedup_failures_total"
	// dedupBreakerState is the state of a Redis deduplicator's circuit breaker, label
	// name: 0 closed, 1 half-open, 2 open.
	dedupBreakerState = "redis_streaming_dedup_breaker_state"
)

// Metric names of package reliability. Each carries a name="..." label (the processor's name)
// and, for the outcome counter, an outcome="..." label.
const (
	// reliabilityOutcomesTotal counts elements handled by a failure processor, by outcome:
	// success, retried (succeeded after at least one retry), failed, skipped, dead_letter,
	// ignored, rejected (the processor was stopped).
	reliabilityOutcomesTotal = "redis_streaming_reliability_outcomes_total"
	// reliabilityRetriesTotal counts retries (tries after the first) of a failure processor.
	reliabilityRetriesTotal = "redis_streaming_reliability_retries_total"
	// reliabilityDeadLetterDroppedTotal counts elements a full in-memory dead-letter queue
	// refused.
	reliabilityDeadLetterDroppedTotal = "redis_streaming_reliability_dlq_dropped_total"
)

// Metric names of the stream dead-letter operations, as in the Java system.
const (
	// DLQReplaySuccessTotal counts dead letters replayed back to their topic.
	DLQReplaySuccessTotal = "redis_streaming_dlq_replay_success_total"
)

// Name returns a metric name with labels, e.g. Name("x_total", "name", "api1") is
// `x_total{name="api1"}`. labels alternate label names and values; a trailing name without
// a value is ignored. Values are escaped as the Prometheus text format requires (backslash,
// double quote, newline), so any string is a safe value.
func Name(family string, labels ...string) string {
	if len(labels) < 2 {
		return family
	}
	var b strings.Builder
	b.Grow(len(family) + 16*len(labels))
	b.WriteString(family)
	b.WriteByte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		escape(&b, labels[i+1])
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// labelWriter is what escape writes to (strings.Builder, bytes.Buffer).
type labelWriter interface {
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

// escape writes v as the inside of a quoted Prometheus label value: backslash, double quote
// and newline escaped.
func escape(b labelWriter, v string) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
}

// RateLimitCounters returns the allowed, denied and errors counters of the limiter named
// name, creating them on first use. Counters live as long as the process (a limiter name is
// expected to come from configuration, not from request data).
func RateLimitCounters(name string) (allowed, denied, errors *Counter) {
	return RateLimit.GetOrCreateCounter(Name(rateLimitAllowedTotal, "name", name)),
		RateLimit.GetOrCreateCounter(Name(rateLimitDeniedTotal, "name", name)),
		RateLimit.GetOrCreateCounter(Name(rateLimitErrorsTotal, "name", name))
}

// WritePrometheus writes, in the Prometheus text exposition format, every metric set
// registered with VictoriaMetrics' default registry, each once: the component sets, the sets
// of open caches (cache.New registers one per cache), a custom stream Config.Metrics set once
// the program registers it (vm.RegisterSet), and the program's own metrics in that registry.
// Series of different sets are written set after set, as VictoriaMetrics itself writes them.
// It is safe for concurrent use.
//
// Each family is written once, its series together, after its # HELP (for redstream's
// families) and # TYPE lines; [NewExposer] adds a metric-name namespace.
func WritePrometheus(w io.Writer) {
	defaultExposer.WritePrometheus(w)
}

// contentType is the Content-Type of the Prometheus text exposition format.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler returns an http.Handler serving [WritePrometheus] (for a /metrics endpoint). With
// processMetrics it also writes VictoriaMetrics' Go runtime and process metrics
// (go_*, process_*).
func Handler(processMetrics bool) http.Handler {
	if processMetrics {
		return processExposer
	}
	return defaultExposer
}
