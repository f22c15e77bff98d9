package cache

import (
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream"
)

// Metric names. Each carries a name="..." label, Config.Name.
const (
	// metricHits counts reads (Get, GetOrLoad) that found a value.
	metricHits = "redis_cache_hits_total"
	// metricMisses counts reads that found nothing (or a load in progress).
	metricMisses = "redis_cache_misses_total"
	// metricNullHits counts reads that found a null marker (a cached "not found").
	metricNullHits = "redis_cache_null_hits_total"
	// metricLocalHits counts reads answered from client-side cache memory without a round
	// trip; they are also counted as hits or null hits.
	metricLocalHits = "redis_cache_local_hits_total"
	// metricLocalRefused counts reads that client-side cache memory would have answered
	// but did not, because the connections that deliver invalidations had not answered a
	// heartbeat within ClientSideCache.MaxStaleness; they went to Redis instead (and are
	// not counted as local hits).
	metricLocalRefused = "redis_cache_local_refused_total"
	// metricHeartbeatFailures counts heartbeats of client-side caching that not every
	// connection answered within their deadline (MaxStaleness).
	metricHeartbeatFailures = "redis_cache_heartbeat_failures_total"
	// metricHeartbeatAge is a gauge of the seconds since the last heartbeat that every
	// connection answered was sent: how far behind Redis client-side cache memory may be.
	// Reads are not answered from memory while it exceeds ClientSideCache.MaxStaleness.
	// 0 without client-side caching.
	metricHeartbeatAge = "redis_cache_heartbeat_age_seconds"
	// metricLoads counts loader calls, degraded ones included.
	metricLoads = "redis_cache_loads_total"
	// metricLoadErrors counts loader calls that failed (an error other than ErrNotFound, or
	// a panic).
	metricLoadErrors = "redis_cache_load_errors_total"
	// metricLockWaits counts GetOrLoad flights that found another process's load in progress
	// and waited for it.
	metricLockWaits = "redis_cache_lock_waits_total"
	// metricDegradedLoads counts loads done without the lock after waiting WaitTimeout.
	metricDegradedLoads = "redis_cache_degraded_loads_total"
	// metricRedisErrors counts Redis calls that failed (an error reply, a broken
	// connection, Timeout passed), and outages that outlived a caller's own deadline of at
	// least 10ms; calls the breaker refused and calls their caller cancelled are not
	// counted.
	metricRedisErrors = "redis_cache_redis_errors_total"
	// metricFallbacks counts keys answered from the loader because Redis failed
	// (OnRedisError LoadOnError), with a reason label: reasonError, reasonTimeout or
	// reasonBreakerOpen.
	metricFallbacks = "redis_cache_fallback_total"
	// metricStale counts GetOrLoad calls answered with a stale value, with a reason
	// label: reasonFailure (fail-safe: the loader or Redis failed, or the key's source is
	// throttled after a failure) or reasonSoftTimeout (the load outlived the soft timeout).
	metricStale = "redis_cache_stale_total"
	// metricRefreshes counts eager refreshes: loads of a key still cached, started by a
	// read past Config.EagerRefresh of its TTL, that reloaded it.
	metricRefreshes = "redis_cache_eager_refreshes_total"
	// metricBreakerState is a gauge of the circuit breaker's state: 0 closed, 1
	// half-open, 2 open (redstream.BreakerState).
	metricBreakerState = "redis_cache_breaker_state"
)

// Values of the reason label of metricFallbacks.
const (
	// reasonError: Redis answered with an error, or the connection failed.
	reasonError = "error"
	// reasonTimeout: Redis did not answer within Config.Timeout.
	reasonTimeout = "timeout"
	// reasonBreakerOpen: the circuit breaker was open, Redis was not asked.
	reasonBreakerOpen = "breaker_open"
)

// Values of the reason label of metricStale.
const (
	reasonFailure     = "failure"
	reasonSoftTimeout = "soft_timeout"
)

// Stats is a snapshot of a Cache's counters (the redis_cache_* metrics of Cache.Metrics).
type Stats struct {
	Hits, Misses, NullHits, LocalHits      uint64
	Loads, LoadErrors, LockWaits, Degraded uint64
	// RedisErrors counts failed Redis calls (metricRedisErrors).
	RedisErrors uint64
	// Fallbacks counts keys answered from the loader because Redis failed, all reasons
	// together (metricFallbacks).
	Fallbacks uint64
	// LocalRefused counts reads not answered from memory because the connections had been
	// silent for longer than ClientSideCache.MaxStaleness (metricLocalRefused).
	LocalRefused uint64
	// HeartbeatFailures counts heartbeats not every connection answered
	// (metricHeartbeatFailures).
	HeartbeatFailures uint64
	// Stale counts GetOrLoad calls answered with a stale value, both reasons together
	// (metricStale).
	Stale uint64
	// Refreshes counts eager refreshes (metricRefreshes).
	Refreshes uint64
	// HeartbeatAge is how long ago the last heartbeat every connection answered was sent
	// (metricHeartbeatAge); 0 without client-side caching.
	HeartbeatAge time.Duration
	// Breaker is the circuit breaker's state (closed with Breaker.Disabled); on a
	// cluster, the worst of its masters' breakers (open when any is open).
	Breaker redstream.BreakerState
}

type counters struct {
	set                                    *metrics.Set
	hits, misses, nullHits, localHits      *metrics.Counter
	loads, loadErrors, lockWaits, degraded *metrics.Counter
	redisErrors                            *metrics.Counter
	localRefused, heartbeatFailures        *metrics.Counter
	fallbackError, fallbackTimeout         *metrics.Counter
	fallbackOpen                           *metrics.Counter
	staleServed, softTimeouts              *metrics.Counter
	refreshes                              *metrics.Counter
}

// fallback returns the fallback counter of reason.
func (c *counters) fallback(reason string) *metrics.Counter {
	switch reason {
	case reasonTimeout:
		return c.fallbackTimeout
	case reasonBreakerOpen:
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
		hits:       c(metricHits),
		misses:     c(metricMisses),
		nullHits:   c(metricNullHits),
		localHits:  c(metricLocalHits),
		loads:      c(metricLoads),
		loadErrors: c(metricLoadErrors),
		lockWaits:  c(metricLockWaits),
		degraded:   c(metricDegradedLoads),
		refreshes:  c(metricRefreshes),

		redisErrors:       c(metricRedisErrors),
		localRefused:      c(metricLocalRefused),
		heartbeatFailures: c(metricHeartbeatFailures),
		fallbackError:     s.NewCounter(metricFallbacks + `{name="` + escapeLabel(name) + `",reason="` + reasonError + `"}`),
		fallbackTimeout:   s.NewCounter(metricFallbacks + `{name="` + escapeLabel(name) + `",reason="` + reasonTimeout + `"}`),
		fallbackOpen:      s.NewCounter(metricFallbacks + `{name="` + escapeLabel(name) + `",reason="` + reasonBreakerOpen + `"}`),
		staleServed:       s.NewCounter(metricStale + `{name="` + escapeLabel(name) + `",reason="` + reasonFailure + `"}`),
		softTimeouts:      s.NewCounter(metricStale + `{name="` + escapeLabel(name) + `",reason="` + reasonSoftTimeout + `"}`),
	}
}

func (c *counters) stats() Stats {
	return Stats{
		Hits: c.hits.Get(), Misses: c.misses.Get(), NullHits: c.nullHits.Get(), LocalHits: c.localHits.Get(),
		Loads: c.loads.Get(), LoadErrors: c.loadErrors.Get(), LockWaits: c.lockWaits.Get(), Degraded: c.degraded.Get(),
		RedisErrors:  c.redisErrors.Get(),
		Fallbacks:    c.fallbackError.Get() + c.fallbackTimeout.Get() + c.fallbackOpen.Get(),
		LocalRefused: c.localRefused.Get(), HeartbeatFailures: c.heartbeatFailures.Get(),
		Stale: c.staleServed.Get() + c.softTimeouts.Get(), Refreshes: c.refreshes.Get(),
	}
}

// escapeLabel escapes a label value as the Prometheus text format requires.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
