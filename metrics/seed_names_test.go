package metrics

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// javaNamesKept are the metric names of the Java system (its seed documents and its
// Micrometer collectors, as Prometheus shows them) that redstream keeps, so that the Java
// dashboards and alerts keep working; docs/migration-java.md lists each of them as kept.
var javaNamesKept = []string{
	"redis_streaming_rl_allowed_total",
	"redis_streaming_rl_denied_total",
	"redis_streaming_dlq_replay_success_total",
	"redis_streaming_dlq_replay_failure_total",
	"redis_streaming_dlq_deleted_total",
	"redis_streaming_dlq_cleared_total",
	"redis_streaming_mq_produced_total",
	"redis_streaming_mq_consumed_total",
	"redis_streaming_mq_acked_total",
	"redis_streaming_mq_retried_total",
	"redis_streaming_mq_dead_total",
	"redis_streaming_mq_handle_latency_ms_seconds", // the Java timer redis_streaming_mq_handle_latency_ms
	"redis_streaming_mq_inflight",
	"redis_streaming_mq_max_inflight",
	"redis_streaming_mq_trim_attempts_total",
	"redis_streaming_mq_trim_deleted_total",
}

// javaNamesDropped are Java metric names redstream does not write; docs/migration-java.md
// says so and names what to use instead.
var javaNamesDropped = []string{
	"redis_streaming_dlq_replay_latency_ms_seconds", // redstream: redis_streaming_dlq_replay_latency_seconds
	"redis_streaming_mq_payload_missing_total",
	"redis_streaming_mq_max_leased_partitions",
	"redis_streaming_mq_eligible_partitions",
	"redis_streaming_mq_leased_partitions",
	"redis_streaming_mq_backpressure_wait_total",
	"redis_streaming_mq_backpressure_wait_ms",
	"redis_streaming_mq_topics_total",
	"redis_streaming_mq_messages_total",
	"redis_streaming_mq_dlq_total",
	"redis_streaming_mq_frontier_age_ms",
}

// TestJavaMetricNames: every Java metric name redstream keeps is a family it writes (with its
// type and help text), and the migration guide lists it; the names the guide says are not
// written are not families.
func TestJavaMetricNames(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "docs", "migration-java.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range javaNamesKept {
		if _, ok := known[name]; !ok {
			t.Errorf("the Java metric %s is not a redstream family (families.go)", name)
		}
		if !bytes.Contains(guide, []byte("`"+name)) {
			t.Errorf("docs/migration-java.md does not name the kept Java metric %s", name)
		}
	}
	for _, name := range javaNamesDropped {
		if _, ok := known[name]; ok {
			t.Errorf("%s is a redstream family now; docs/migration-java.md says it is not written", name)
		}
		if !bytes.Contains(guide, []byte("`"+name)) {
			t.Errorf("docs/migration-java.md does not name the dropped Java metric %s", name)
		}
	}
}

// TestJavaRateLimitLabels: the named limiters' counters carry the Java label name="...".
func TestJavaRateLimitLabels(t *testing.T) {
	allowed, denied, _ := RateLimitCounters("java-seed-names")
	allowed.Inc()
	denied.Inc()
	var b bytes.Buffer
	RateLimit.WritePrometheus(&b)
	for _, want := range []string{
		`redis_streaming_rl_allowed_total{name="java-seed-names"} `,
		`redis_streaming_rl_denied_total{name="java-seed-names"} `,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the exposition has no series %q", strings.TrimSpace(want))
		}
	}
}
