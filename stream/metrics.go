package stream

import (
	"strconv"

	"github.com/redstream-go/redstream/metrics"
)

// Metric names, in Prometheus base units (seconds, counts). Counters and gauges of a consumer
// carry topic="..." and group="..." labels; producer, trimming and dead-letter metrics carry
// topic="..." only; redis_streaming_mq_background_errors_total also carries op="...". The
// consumer-side metrics of a partitioned topic (Config.Partitions) carry partition="<i>"
// too, after topic (topic stays the topic's name); producer metrics are per topic. They
// are registered in Config.Metrics (metrics.Stream by default). README's metric table maps
// each one.
const (
	MetricProduced          = "redis_streaming_mq_produced_total"              // entries written by Send
	MetricConsumed          = "redis_streaming_mq_consumed_total"              // handler successes
	MetricAcked             = "redis_streaming_mq_acked_total"                 // entries acknowledged (dead letters included)
	MetricFiltered          = "redis_streaming_mq_filtered_total"              // entries a Filter skipped (acknowledged unhandled)
	MetricDuplicates        = "redis_streaming_mq_duplicates_total"            // entries Handler.Dedup skipped (acknowledged unhandled)
	MetricHandlerErrors     = "redis_streaming_mq_handler_errors_total"        // handler errors, panics and timeouts
	MetricHandlerTimeouts   = "redis_streaming_mq_handler_timeouts_total"      // Handle calls that outlived Handler.Timeout
	MetricRetried           = "redis_streaming_mq_retried_total"               // failures left pending for a retry
	MetricRedelivered       = "redis_streaming_mq_redelivered_total"           // entries delivered again (retries and takeovers)
	MetricDeadLettered      = "redis_streaming_mq_dead_total"                  // entries moved to the dead-letter stream
	MetricPoison            = "redis_streaming_mq_poison_total"                // undecodable entries
	MetricTrimmedWhilePend  = "redis_streaming_mq_trimmed_while_pending_total" // pending entries found deleted from the stream
	MetricHandleLatency     = "redis_streaming_mq_handle_latency_seconds"      // Prometheus histogram of Handle's duration
	MetricInFlight          = "redis_streaming_mq_inflight"                    // gauge: Handle calls running
	MetricQueued            = "redis_streaming_mq_queued"                      // gauge: entries read or claimed, waiting for a handler slot
	MetricPending           = "redis_streaming_mq_pending"                     // gauge: the group's pending entries
	MetricLag               = "redis_streaming_mq_lag"                         // gauge: entries not yet delivered to the group
	MetricLeaseLost         = "redis_streaming_mq_lease_lost_total"            // held entries found owned by another consumer
	MetricConsumersRemoved  = "redis_streaming_mq_consumers_removed_total"     // idle, empty consumers deleted from the group
	MetricBackgroundErrors  = "redis_streaming_mq_background_errors_total"     // failed background Redis calls, by op
	MetricTrimAttempts      = "redis_streaming_mq_trim_attempts_total"         // trimming passes (Trimmer.Trim calls)
	MetricTrimDeleted       = "redis_streaming_mq_trim_deleted_total"          // entries removed by trimming
	MetricDeadLetterSize    = "redis_streaming_dlq_size"                       // gauge: entries in the topic's dead-letter stream
	MetricDeadLetterTrimmed = "redis_streaming_dlq_trimmed_total"              // dead letters dropped by DeadLetterConfig bounds
	MetricReplaySuccess     = metrics.DLQReplaySuccessTotal                    // dead letters replayed
	MetricReplayFailure     = "redis_streaming_dlq_replay_failure_total"       // replays that failed
	// Delayed delivery (WithDelay, WithDeliverAt), label topic.
	MetricScheduled      = "redis_streaming_mq_scheduled_total"       // messages scheduled by Send
	MetricDelayedMoved   = "redis_streaming_mq_delayed_moved_total"   // scheduled messages moved into the stream when due
	MetricDelayedInvalid = "redis_streaming_mq_delayed_invalid_total" // scheduled messages found undecodable (dead-lettered) or without entry
	MetricDelayed        = "redis_streaming_mq_delayed"               // gauge: scheduled messages waiting for their due time
	// Handler.DeleteOnAck, labels topic and group.
	MetricDeletedOnAck = "redis_streaming_mq_deleted_on_ack_total" // acknowledged entries deleted from the stream
)

// Values of the op label of redis_streaming_mq_background_errors_total.
const (
	opRead, opAck, opScan, opRetry, opLease = "read", "ack", "scan", "retry", "lease"
	opDeadLetter, opGauges, opHousekeeping  = "dead_letter", "gauges", "housekeeping"
	opGroup, opDelay                        = "group", "delay"
)

// handlerMetrics are one handler's (topic, group) metrics, created once.
type handlerMetrics struct {
	set                                                     *metrics.Set
	topic, group                                            string
	part                                                    int
	consumed, acked, filtered, errors, retried, redelivered *metrics.Counter
	duplicates, deletedOnAck                                *metrics.Counter
	deadLettered, poison, trimmedPending, dlqTrimmed        *metrics.Counter
	timeouts, leaseLost, consumersRemoved                   *metrics.Counter
	duration                                                handlerHistogram
	pending, lag, dlqSize, inflight, queued                 gauge
}

type handlerHistogram interface{ Update(v float64) }

type gauge interface{ Set(v float64) }

// topicLabels returns the labels naming topic, or partition part of it when part >= 0.
func topicLabels(topic string, part int, more ...string) []string {
	l := make([]string, 0, 4+len(more))
	l = append(l, "topic", topic)
	if part >= 0 {
		l = append(l, "partition", strconv.Itoa(part))
	}
	return append(l, more...)
}

func newHandlerMetrics(set *metrics.Set, topic string, part int, group string) *handlerMetrics {
	tg := topicLabels(topic, part, "group", group)
	tl := topicLabels(topic, part)
	c := func(name string) *metrics.Counter {
		return set.GetOrCreateCounter(metrics.Name(name, tg...))
	}
	g := func(name string) gauge {
		return set.GetOrCreateGauge(metrics.Name(name, tg...), nil)
	}
	return &handlerMetrics{
		set: set, topic: topic, part: part, group: group,
		consumed:         c(MetricConsumed),
		acked:            c(MetricAcked),
		filtered:         c(MetricFiltered),
		duplicates:       c(MetricDuplicates),
		deletedOnAck:     c(MetricDeletedOnAck),
		errors:           c(MetricHandlerErrors),
		timeouts:         c(MetricHandlerTimeouts),
		retried:          c(MetricRetried),
		redelivered:      c(MetricRedelivered),
		deadLettered:     c(MetricDeadLettered),
		poison:           c(MetricPoison),
		trimmedPending:   c(MetricTrimmedWhilePend),
		leaseLost:        c(MetricLeaseLost),
		consumersRemoved: c(MetricConsumersRemoved),
		dlqTrimmed:       set.GetOrCreateCounter(metrics.Name(MetricDeadLetterTrimmed, tl...)),
		duration:         set.GetOrCreatePrometheusHistogram(metrics.Name(MetricHandleLatency, tg...)),
		pending:          g(MetricPending),
		lag:              g(MetricLag),
		inflight:         g(MetricInFlight),
		queued:           g(MetricQueued),
		dlqSize:          set.GetOrCreateGauge(metrics.Name(MetricDeadLetterSize, tl...), nil),
	}
}

// backgroundError counts one failed background call of op.
func (m *handlerMetrics) backgroundError(op string) {
	m.set.GetOrCreateCounter(backgroundErrorName(m.topic, m.part, m.group, op)).Inc()
}

func backgroundErrorName(topic string, part int, group, op string) string {
	if group == "" {
		return metrics.Name(MetricBackgroundErrors, topicLabels(topic, part, "op", op)...)
	}
	return metrics.Name(MetricBackgroundErrors, topicLabels(topic, part, "group", group, "op", op)...)
}
