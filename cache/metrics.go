package cache

import (
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// Metric names. Each carries a name="..." label, Config.Name.
const (
	// MetricHits counts reads (Get, GetOrLoad) that found a value.
	MetricHits = "redis_cache_hits_total"
	// MetricMisses counts reads that found nothing (or a load in progress).
	MetricMisses = "redis_cache_misses_total"
	// MetricNullHits counts reads that found a null marker (a cached "not found").
	MetricNullHits = "redis_cache_null_hits_total"
	// MetricLocalHits counts reads answered from client-side cache memory without a round
	// trip; they are also counted as hits or null hits.
	MetricLocalHits = "redis_cache_local_hits_total"
	// MetricLoads counts loader calls, degraded ones included.
	MetricLoads = "redis_cache_loads_total"
	// MetricLoadErrors counts loader calls that failed (an error other than ErrNotFound, or
	// a panic).
	MetricLoadErrors = "redis_cache_load_errors_total"
	// MetricLockWaits counts GetOrLoad flights that found another process's load in progress
	// and waited for it.
	MetricLockWaits = "redis_cache_lock_waits_total"
	// MetricDegradedLoads counts loads done without the lock after waiting WaitTimeout.
	MetricDegradedLoads = "redis_cache_degraded_loads_total"
)

// Stats is a snapshot of a Cache's counters (see the Metric* names).
type Stats struct {
	Hits, Misses, NullHits, LocalHits      uint64
	Loads, LoadErrors, LockWaits, Degraded uint64
}

type counters struct {
	set                                    *metrics.Set
	hits, misses, nullHits, localHits      *metrics.Counter
	loads, loadErrors, lockWaits, degraded *metrics.Counter
}

func newCounters(name string) *counters {
	s := metrics.NewSet()
	label := `{name="` + escapeLabel(name) + `"}`
	c := func(family string) *metrics.Counter { return s.NewCounter(family + label) }
	return &counters{
		set:        s,
		hits:       c(MetricHits),
		misses:     c(MetricMisses),
		nullHits:   c(MetricNullHits),
		localHits:  c(MetricLocalHits),
		loads:      c(MetricLoads),
		loadErrors: c(MetricLoadErrors),
		lockWaits:  c(MetricLockWaits),
		degraded:   c(MetricDegradedLoads),
	}
}

func (c *counters) stats() Stats {
	return Stats{
		Hits: c.hits.Get(), Misses: c.misses.Get(), NullHits: c.nullHits.Get(), LocalHits: c.localHits.Get(),
		Loads: c.loads.Get(), LoadErrors: c.loadErrors.Get(), LockWaits: c.lockWaits.Get(), Degraded: c.degraded.Get(),
	}
}

// escapeLabel escapes a label value as the Prometheus text format requires.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
