package cache

import (
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream"
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
	// MetricRedisErrors counts Redis calls that failed (an error reply, a broken
	// connection, Timeout passed), and outages that outlived a caller's own deadline of at
	// least 10ms; calls the breaker refused and calls their caller cancelled are not
	// counted.
	MetricRedisErrors = "redis_cache_redis_errors_total"
	// MetricFallbacks counts keys answered from the loader because Redis failed
	// (OnRedisError LoadOnError), with a reason label: ReasonError, ReasonTimeout or
	// ReasonBreakerOpen.
	MetricFallbacks = "redis_cache_fallback_total"
	// MetricBreakerState is a gauge of the circuit breaker's state: 0 closed, 1
	// half-open, 2 open (redstream.BreakerState).
	MetricBreakerState = "redis_cache_breaker_state"
)

// Values of the reason label of MetricFallbacks.
const (
	// ReasonError: Redis answered with an error, or the connection failed.
	ReasonError = "error"
	// ReasonTimeout: Redis did not answer within Config.Timeout.
	ReasonTimeout = "timeout"
	// ReasonBreakerOpen: the circuit breaker was open, Redis was not asked.
	ReasonBreakerOpen = "breaker_open"
)

// Stats is a snapshot of a Cache's counters (see the Metric* names).
type Stats struct {
	Hits, Misses, NullHits, LocalHits      uint64
	Loads, LoadErrors, LockWaits, Degraded uint64
	// RedisErrors counts failed Redis calls (MetricRedisErrors).
	RedisErrors uint64
	// Fallbacks counts keys answered from the loader because Redis failed, all reasons
	// together (MetricFallbacks).
	Fallbacks uint64
	// Breaker is the circuit breaker's state (closed with Breaker.Disabled).
	Breaker redstream.BreakerState
}

type counters struct {
	set                                    *metrics.Set
	hits, misses, nullHits, localHits      *metrics.Counter
	loads, loadErrors, lockWaits, degraded *metrics.Counter
	redisErrors                            *metrics.Counter
	fallbackError, fallbackTimeout         *metrics.Counter
	fallbackOpen                           *metrics.Counter
}

// fallback returns the fallback counter of reason.
func (c *counters) fallback(reason string) *metrics.Counter {
	switch reason {
	case ReasonTimeout:
		return c.fallbackTimeout
	case ReasonBreakerOpen:
		return c.fallbackOpen
	}
	return c.fallbackError
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

		redisErrors:     c(MetricRedisErrors),
		fallbackError:   s.NewCounter(MetricFallbacks + `{name="` + escapeLabel(name) + `",reason="` + ReasonError + `"}`),
		fallbackTimeout: s.NewCounter(MetricFallbacks + `{name="` + escapeLabel(name) + `",reason="` + ReasonTimeout + `"}`),
		fallbackOpen:    s.NewCounter(MetricFallbacks + `{name="` + escapeLabel(name) + `",reason="` + ReasonBreakerOpen + `"}`),
	}
}

func (c *counters) stats() Stats {
	return Stats{
		Hits: c.hits.Get(), Misses: c.misses.Get(), NullHits: c.nullHits.Get(), LocalHits: c.localHits.Get(),
		Loads: c.loads.Get(), LoadErrors: c.loadErrors.Get(), LockWaits: c.lockWaits.Get(), Degraded: c.degraded.Get(),
		RedisErrors: c.redisErrors.Get(),
		Fallbacks:   c.fallbackError.Get() + c.fallbackTimeout.Get() + c.fallbackOpen.Get(),
	}
}

// escapeLabel escapes a label value as the Prometheus text format requires.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
