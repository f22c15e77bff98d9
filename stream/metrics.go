package stream

import (
	"github.com/redstream-go/redstream/metrics"
)

// Metric names. Counters and gauges of a consumer carry topic="..." and group="..." labels;
// producer, trimming and dead-letter metrics carry topic="..." only. They are registered in
// Config.Metrics (metrics.Stream by default).
const (
	MetricProduced          = "redis_streaming_mq_produced_total"              // entries written by Send
	MetricConsumed          = "redis_streaming_mq_consumed_total"              // handler successes
	MetricAcked             = "redis_streaming_mq_acked_total"                 // entries acknowledged (dead letters included)
	MetricFiltered          = "redis_streaming_mq_filtered_total"              // entries a Filter skipped (acknowledged unhandled)
	MetricHandlerErrors     = "redis_streaming_mq_handler_errors_total"        // handler errors and panics
	MetricRetried           = "redis_streaming_mq_retried_total"               // failures left pending for a retry
	MetricRedelivered       = "redis_streaming_mq_redelivered_total"           // entries re-claimed by the pending scan
	MetricDeadLettered      = "redis_streaming_mq_dead_lettered_total"         // entries moved to the dead-letter stream
	MetricPoison            = "redis_streaming_mq_poison_total"                // undecodable entries
	MetricTrimmedWhilePend  = "redis_streaming_mq_trimmed_while_pending_total" // pending entries found deleted from the stream
	MetricHandlerDuration   = "redis_streaming_mq_handler_duration_seconds"    // Prometheus histogram of Handle
	MetricPending           = "redis_streaming_mq_pending"                     // gauge: the group's pending entries
	MetricLag               = "redis_streaming_mq_lag"                         // gauge: entries not yet delivered to the group
	MetricTrimmed           = "redis_streaming_mq_trimmed_total"               // entries removed by trimming
	MetricDeadLetterSize    = "redis_streaming_dlq_size"                       // gauge: entries in the topic's dead-letter stream
	MetricDeadLetterTrimmed = "redis_streaming_dlq_trimmed_total"              // dead letters dropped by DeadLetterConfig bounds
	MetricReplaySuccess     = metrics.DLQReplaySuccessTotal                    // dead letters replayed
	MetricReplayFailure     = "redis_streaming_dlq_replay_failure_total"       // replays that failed
)

// handlerMetrics are one handler's (topic, group) metrics, created once.
type handlerMetrics struct {
	consumed, acked, filtered, errors, retried, redelivered *metrics.Counter
	deadLettered, poison, trimmedPending, dlqTrimmed        *metrics.Counter
	duration                                                handlerHistogram
	pending, lag, dlqSize                                   gauge
}

type handlerHistogram interface{ Update(v float64) }

type gauge interface{ Set(v float64) }

func newHandlerMetrics(set *metrics.Set, topic, group string) *handlerMetrics {
	c := func(name string) *metrics.Counter {
		return set.GetOrCreateCounter(metrics.Name(name, "topic", topic, "group", group))
	}
	g := func(name string) gauge {
		return set.GetOrCreateGauge(metrics.Name(name, "topic", topic, "group", group), nil)
	}
	return &handlerMetrics{
		consumed:       c(MetricConsumed),
		acked:          c(MetricAcked),
		filtered:       c(MetricFiltered),
		errors:         c(MetricHandlerErrors),
		retried:        c(MetricRetried),
		redelivered:    c(MetricRedelivered),
		deadLettered:   c(MetricDeadLettered),
		poison:         c(MetricPoison),
		trimmedPending: c(MetricTrimmedWhilePend),
		dlqTrimmed:     set.GetOrCreateCounter(metrics.Name(MetricDeadLetterTrimmed, "topic", topic)),
		duration:       set.GetOrCreatePrometheusHistogram(metrics.Name(MetricHandlerDuration, "topic", topic, "group", group)),
		pending:        g(MetricPending),
		lag:            g(MetricLag),
		dlqSize:        set.GetOrCreateGauge(metrics.Name(MetricDeadLetterSize, "topic", topic), nil),
	}
}
