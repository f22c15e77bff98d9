package stream

import (
	"slices"
	"strconv"

	"github.com/redstream-go/redstream/metrics"
)

// Metric names, in Prometheus base units (seconds, counts). Counters and gauges of a consumer
// carry topic="..." and group="..." labels; producer, trimming and dead-letter metrics carry
// topic="..." only; redis_streaming_mq_background_errors_total also carries op="...". The
// consumer-side metrics of a partitioned topic (Config.Partitions) carry partition="<i>"
// too, after topic (topic stays the topic's name); producer metrics are per topic. They
// are registered in Config.Metrics (metrics.Stream by default). docs/metrics.md lists
// them; MetricFamilies returns them with their types and help texts.
const (
	metricProduced          = "redis_streaming_mq_produced_total"              // entries written by Send
	metricDuplicateSends    = "redis_streaming_mq_duplicate_sends_total"       // WithUnique sends refused or debounced
	metricConsumed          = "redis_streaming_mq_consumed_total"              // handler successes
	metricAcked             = "redis_streaming_mq_acked_total"                 // entries acknowledged (dead letters included)
	metricFiltered          = "redis_streaming_mq_filtered_total"              // entries a Filter skipped (acknowledged unhandled)
	metricDuplicates        = "redis_streaming_mq_duplicates_total"            // entries Handler.Dedup skipped (acknowledged unhandled)
	metricHandlerErrors     = "redis_streaming_mq_handler_errors_total"        // handler errors, panics and timeouts
	metricHandlerTimeouts   = "redis_streaming_mq_handler_timeouts_total"      // Handle calls that outlived Handler.Timeout
	metricRetried           = "redis_streaming_mq_retried_total"               // failures left pending for a retry
	metricRedelivered       = "redis_streaming_mq_redelivered_total"           // entries delivered again (retries and takeovers)
	metricDeadLettered      = "redis_streaming_mq_dead_total"                  // entries moved to the dead-letter stream
	metricPoison            = "redis_streaming_mq_poison_total"                // undecodable entries
	metricTrimmedWhilePend  = "redis_streaming_mq_trimmed_while_pending_total" // pending entries found deleted from the stream
	metricHandleLatency     = "redis_streaming_mq_handle_latency_ms_seconds"   // Prometheus histogram of Handle's duration
	metricInFlight          = "redis_streaming_mq_inflight"                    // gauge: Handle calls running
	metricMaxInFlight       = "redis_streaming_mq_max_inflight"                // gauge: handler slots (Handler.Concurrency)
	metricQueued            = "redis_streaming_mq_queued"                      // gauge: entries read or claimed, waiting for a handler slot
	metricPending           = "redis_streaming_mq_pending"                     // gauge: the group's pending entries
	metricLag               = "redis_streaming_mq_lag"                         // gauge: entries not yet delivered to the group
	metricLeaseLost         = "redis_streaming_mq_lease_lost_total"            // held entries found owned by another consumer
	metricConsumersRemoved  = "redis_streaming_mq_consumers_removed_total"     // idle, empty consumers deleted from the group
	metricBackgroundErrors  = "redis_streaming_mq_background_errors_total"     // failed background Redis calls, by op
	metricTrimAttempts      = "redis_streaming_mq_trim_attempts_total"         // trimming passes (Trimmer.Trim calls)
	metricTrimDeleted       = "redis_streaming_mq_trim_deleted_total"          // entries removed by trimming
	metricDeadLetterSize    = "redis_streaming_dlq_size"                       // gauge: entries in the topic's dead-letter stream
	metricDeadLetterTrimmed = "redis_streaming_dlq_trimmed_total"              // dead letters dropped by DeadLetterConfig bounds
	metricDeadLetterWaiting = "redis_streaming_dlq_waiting"                    // gauge: entries whose dead-letter write failed, pending until it works
	metricReplaySuccess     = "redis_streaming_dlq_replay_success_total"       // dead letters replayed
	metricReplayFailure     = "redis_streaming_dlq_replay_failure_total"       // replays that failed
	// Delayed delivery (WithDelay, WithDeliverAt), label topic.
	metricScheduled      = "redis_streaming_mq_scheduled_total"       // messages scheduled by Send
	metricDelayedMoved   = "redis_streaming_mq_delayed_moved_total"   // scheduled messages moved into the stream when due
	metricDelayedInvalid = "redis_streaming_mq_delayed_invalid_total" // scheduled messages found undecodable (dead-lettered) or without entry
	metricDelayed        = "redis_streaming_mq_delayed"               // gauge: scheduled messages waiting for their due time
	// Handler.DeleteOnAck, labels topic and group.
	metricDeletedOnAck = "redis_streaming_mq_deleted_on_ack_total" // acknowledged entries deleted from the stream
	// Fenced deliveries, labels topic, group and op (ack, dead_letter, guard).
	metricStaleRefused = "redis_streaming_mq_stale_refused_total" // writes of stale deliveries refused
	// Result records (Handler.Results), labels topic, group and (for the first) state.
	metricResults      = "redis_streaming_mq_results_total"       // result records written, by state (active, completed, failed)
	metricResultErrors = "redis_streaming_mq_result_errors_total" // result writes that failed (Redis)
	// Consumption limits (Handler.Limit), labels topic and group.
	metricLimited = "redis_streaming_mq_limited_total" // deliveries parked, uncounted, until the limit admits them
)

// families are the metric families of the package, in the order of docs/metrics.md.
var families = []metrics.Family{
	{Name: metricProduced, Type: metrics.TypeCounter, Help: "Entries written to the topic's stream."},
	{Name: metricDuplicateSends, Type: metrics.TypeCounter, Help: "Sends with a unique id already held (WithUnique): refused, or debounced into the scheduled message."},
	{Name: metricConsumed, Type: metrics.TypeCounter, Help: "Entries a handler processed successfully."},
	{Name: metricAcked, Type: metrics.TypeCounter, Help: "Entries acknowledged (dead letters included)."},
	{Name: metricFiltered, Type: metrics.TypeCounter, Help: "Entries a filter skipped (acknowledged without handling)."},
	{Name: metricDuplicates, Type: metrics.TypeCounter, Help: "Entries a handler's deduplicator skipped as business duplicates (acknowledged unhandled)."},
	{Name: metricHandlerErrors, Type: metrics.TypeCounter, Help: "Handler errors, panics and timeouts."},
	{Name: metricHandlerTimeouts, Type: metrics.TypeCounter, Help: "Handler calls that outlived the handler timeout."},
	{Name: metricRetried, Type: metrics.TypeCounter, Help: "Failed entries left pending for a retry."},
	{Name: metricRedelivered, Type: metrics.TypeCounter, Help: "Entries delivered again (retries and takeovers from other consumers)."},
	{Name: metricDeadLettered, Type: metrics.TypeCounter, Help: "Entries moved to the dead-letter stream."},
	{Name: metricPoison, Type: metrics.TypeCounter, Help: "Entries that could not be decoded."},
	{Name: metricTrimmedWhilePend, Type: metrics.TypeCounter, Help: "Pending entries found deleted from the stream by trimming."},
	{Name: metricHandleLatency, Type: metrics.TypeHistogram, Help: "Duration of handler calls, in seconds."},
	{Name: metricInFlight, Type: metrics.TypeGauge, Help: "Handler calls running."},
	{Name: metricMaxInFlight, Type: metrics.TypeGauge, Help: "Handler calls that may run at once (the handler's concurrency)."},
	{Name: metricQueued, Type: metrics.TypeGauge, Help: "Entries read or claimed, waiting for a free handler slot."},
	{Name: metricPending, Type: metrics.TypeGauge, Help: "Entries delivered to the group and not yet acknowledged."},
	{Name: metricLag, Type: metrics.TypeGauge, Help: "Entries not yet delivered to the group."},
	{Name: metricLeaseLost, Type: metrics.TypeCounter, Help: "Entries in hand found owned by another consumer."},
	{Name: metricConsumersRemoved, Type: metrics.TypeCounter, Help: "Idle consumers without pending entries removed from the group."},
	{Name: metricBackgroundErrors, Type: metrics.TypeCounter, Help: "Failed background Redis calls of a consumer, by operation."},
	{Name: metricTrimAttempts, Type: metrics.TypeCounter, Help: "Trimming passes over the topic's stream."},
	{Name: metricTrimDeleted, Type: metrics.TypeCounter, Help: "Entries removed from the stream by trimming."},
	{Name: metricDeadLetterSize, Type: metrics.TypeGauge, Help: "Entries in the topic's dead-letter stream."},
	{Name: metricDeadLetterTrimmed, Type: metrics.TypeCounter, Help: "Dead letters dropped by the dead-letter stream's bounds."},
	{Name: metricDeadLetterWaiting, Type: metrics.TypeGauge, Help: "Entries whose dead-letter write failed, pending until the write works."},
	{Name: metricReplaySuccess, Type: metrics.TypeCounter, Help: "Dead letters replayed back to their topic."},
	{Name: metricReplayFailure, Type: metrics.TypeCounter, Help: "Dead-letter replays that failed."},
	{Name: metricReplayLatency, Type: metrics.TypeHistogram, Help: "Duration of one dead-letter replay, in seconds."},
	{Name: metricDeadLettersDeleted, Type: metrics.TypeCounter, Help: "Dead letters deleted by id."},
	{Name: metricDeadLettersCleared, Type: metrics.TypeCounter, Help: "Dead letters removed by purging a dead-letter stream."},
	{Name: metricScheduled, Type: metrics.TypeCounter, Help: "Messages scheduled for later delivery (WithDelay, WithDeliverAt)."},
	{Name: metricDelayedMoved, Type: metrics.TypeCounter, Help: "Scheduled messages moved into the topic's stream when due."},
	{Name: metricDelayedInvalid, Type: metrics.TypeCounter, Help: "Scheduled messages found undecodable (dead-lettered) or without their entry."},
	{Name: metricDelayed, Type: metrics.TypeGauge, Help: "Scheduled messages waiting for their due time."},
	{Name: metricDeletedOnAck, Type: metrics.TypeCounter, Help: "Acknowledged entries deleted from the stream (Handler.DeleteOnAck, single-group topics)."},
	{Name: metricStaleRefused, Type: metrics.TypeCounter, Help: "Writes of stale deliveries refused (taken over or delivered again), by operation."},
	{Name: metricResults, Type: metrics.TypeCounter, Help: "Result records written (Handler.Results), by the state written: active (progress), completed, failed."},
	{Name: metricResultErrors, Type: metrics.TypeCounter, Help: "Result record writes that failed (Handler.Results)."},
	{Name: metricLimited, Type: metrics.TypeCounter, Help: "Deliveries parked, uncounted, until the handler's consumption limit admits them (Handler.Limit)."},
}

// MetricFamilies returns every metric family the package creates, for bridges to other
// metric systems (package otelstream): each one's Name, Type (metrics.TypeCounter,
// TypeGauge or TypeHistogram) and Help; Samples are nil. docs/metrics.md lists the same
// families with their labels. The slice is a new copy on each call.
func MetricFamilies() []metrics.Family { return slices.Clone(families) }

// Values of the op label of redis_streaming_mq_background_errors_total.
const (
	opRead, opAck, opScan, opRetry, opLease = "read", "ack", "scan", "retry", "lease"
	opDeadLetter, opGauges, opHousekeeping  = "dead_letter", "gauges", "housekeeping"
	opHistory                               = "history"
	opGroup, opDelay, opLimit               = "group", "delay", "limit"
)

// handlerMetrics are one handler's (topic, group) metrics, created once.
type handlerMetrics struct {
	hist                                                    historyCounts // since the last history write (history.go)
	set                                                     *metrics.Set
	topic, group                                            string
	part                                                    int
	consumed, acked, filtered, errors, retried, redelivered *metrics.Counter
	duplicates, deletedOnAck                                *metrics.Counter
	deadLettered, poison, trimmedPending, dlqTrimmed        *metrics.Counter
	timeouts, leaseLost, consumersRemoved                   *metrics.Counter
	duration                                                handlerHistogram
	pending, lag, dlqSize, inflight, queued, dlWaiting      gauge
	maxInflight                                             gauge
	staleAck, staleDL, staleGuard, staleResult              *metrics.Counter
	resultErrors                                            *metrics.Counter
	resultsActive, resultsCompleted, resultsFailed          *metrics.Counter
	limited                                                 *metrics.Counter
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

// newHandlerMetrics returns the metrics of a handler of concurrency slots reading priority
// level (-1 for a topic without levels).
func newHandlerMetrics(set *metrics.Set, topic string, part, level int, group string, concurrency int) *handlerMetrics {
	var lv []string
	if level >= 0 {
		lv = []string{"priority", strconv.Itoa(level)}
	}
	tg := topicLabels(topic, part, append(lv, "group", group)...)
	tl := topicLabels(topic, part)
	c := func(name string) *metrics.Counter {
		return set.GetOrCreateCounter(metrics.Name(name, tg...))
	}
	g := func(name string) gauge {
		return set.GetOrCreateGauge(metrics.Name(name, tg...), nil)
	}
	m := &handlerMetrics{
		set: set, topic: topic, part: part, group: group,
		consumed:         c(metricConsumed),
		acked:            c(metricAcked),
		filtered:         c(metricFiltered),
		duplicates:       c(metricDuplicates),
		deletedOnAck:     c(metricDeletedOnAck),
		errors:           c(metricHandlerErrors),
		timeouts:         c(metricHandlerTimeouts),
		retried:          c(metricRetried),
		redelivered:      c(metricRedelivered),
		deadLettered:     c(metricDeadLettered),
		poison:           c(metricPoison),
		trimmedPending:   c(metricTrimmedWhilePend),
		leaseLost:        c(metricLeaseLost),
		consumersRemoved: c(metricConsumersRemoved),
		dlqTrimmed:       set.GetOrCreateCounter(metrics.Name(metricDeadLetterTrimmed, tl...)),
		duration:         set.GetOrCreatePrometheusHistogram(metrics.Name(metricHandleLatency, tg...)),
		pending:          g(metricPending),
		lag:              g(metricLag),
		inflight:         g(metricInFlight),
		maxInflight:      g(metricMaxInFlight),
		queued:           g(metricQueued),
		dlWaiting:        g(metricDeadLetterWaiting),
		dlqSize:          set.GetOrCreateGauge(metrics.Name(metricDeadLetterSize, tl...), nil),
	}
	stale := func(op string) *metrics.Counter {
		return set.GetOrCreateCounter(metrics.Name(metricStaleRefused, topicLabels(topic, part, append(lv, "group", group, "op", op)...)...))
	}
	m.staleAck, m.staleDL, m.staleGuard, m.staleResult = stale(opAck), stale(opDeadLetter), stale(opGuard), stale(opResult)
	m.resultErrors = c(metricResultErrors)
	m.limited = c(metricLimited)
	res := func(state ResultState) *metrics.Counter {
		return set.GetOrCreateCounter(metrics.Name(metricResults, topicLabels(topic, part, append(lv, "group", group, "state", string(state))...)...))
	}
	m.resultsActive, m.resultsCompleted, m.resultsFailed = res(ResultActive), res(ResultCompleted), res(ResultFailed)
	m.maxInflight.Set(float64(concurrency))
	return m
}

// staleRefused returns the counter of op's refused writes of stale deliveries.
func (m *handlerMetrics) staleRefused(op string) *metrics.Counter {
	switch op {
	case opAck:
		return m.staleAck
	case opDeadLetter:
		return m.staleDL
	case opResult:
		return m.staleResult
	}
	return m.staleGuard
}

// results returns the counter of result records written in mode (result.lua's modes).
func (m *handlerMetrics) results(mode string) *metrics.Counter {
	switch mode {
	case "progress":
		return m.resultsActive
	case "completed":
		return m.resultsCompleted
	}
	return m.resultsFailed
}

// backgroundError counts one failed background call of op.
func (m *handlerMetrics) backgroundError(op string) {
	m.set.GetOrCreateCounter(backgroundErrorName(m.topic, m.part, m.group, op)).Inc()
}

func backgroundErrorName(topic string, part int, group, op string) string {
	if group == "" {
		return metrics.Name(metricBackgroundErrors, topicLabels(topic, part, "op", op)...)
	}
	return metrics.Name(metricBackgroundErrors, topicLabels(topic, part, "group", group, "op", op)...)
}
