package idempotency

import (
	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redstream-go/redstream/metrics"
)

// The metric families of package idempotency, in the metrics.Dedup set, each with the label
// name (Options.Name). The table gives their type and help text.
const (
	famStored       = "redis_idempotency_stored_total"
	famReplayed     = "redis_idempotency_replayed_total"
	famConflicts    = "redis_idempotency_in_flight_conflicts_total"
	famMismatched   = "redis_idempotency_mismatched_total"
	famLeaseExpired = "redis_idempotency_lease_expired_total"
	famFailures     = "redis_idempotency_failures_total"
	famInflight     = "redis_idempotency_in_flight"
	famBreaker      = "redis_idempotency_breaker_state"
)

// families lists each family's type and help text.
var families = []struct{ name, typ, help string }{
	{famStored, metrics.TypeCounter, "Results an Idempotent stored after its function ran once for a key."},
	{famReplayed, metrics.TypeCounter, "Calls answered with a stored result, without running the function."},
	{famConflicts, metrics.TypeCounter, "Calls that found their key in flight (answered ErrInFlight, or waited)."},
	{famMismatched, metrics.TypeCounter, "Calls whose key was bound to another fingerprint (ErrMismatch)."},
	{famLeaseExpired, metrics.TypeCounter, "Leases that ran out before their holder stored a result: taken over by a later call, or found lost by the holder."},
	{famFailures, metrics.TypeCounter, "Redis calls of an Idempotent that failed (timeout, error, breaker open)."},
	{famInflight, metrics.TypeGauge, "Functions an Idempotent is running in this process."},
	{famBreaker, metrics.TypeGauge, "State of an Idempotent's circuit breaker: 0 closed, 1 half-open, 2 open."},
}

// counters are an Idempotent's series.
type counters struct {
	stored, replayed, conflicts, mismatched, leaseExpired, failures *vm.Counter
	inflight                                                        *vm.Gauge
}

func newCounters(name string) *counters {
	c := func(fam string) *vm.Counter {
		return metrics.Dedup.GetOrCreateCounter(metrics.Name(fam, "name", name))
	}
	return &counters{
		stored: c(famStored), replayed: c(famReplayed), conflicts: c(famConflicts),
		mismatched: c(famMismatched), leaseExpired: c(famLeaseExpired), failures: c(famFailures),
		inflight: metrics.Dedup.GetOrCreateGauge(metrics.Name(famInflight, "name", name), nil),
	}
}
