package metrics

// family is the metadata of one metric family redstream creates.
type family struct{ typ, help string }

// known lists every family redstream's packages create, with its type and help text (the
// names are the Java system's, kept for its dashboards).
var known = map[string]family{
	// Named rate limiters (metrics.Named), label name.
	rateLimitAllowedTotal:      {TypeCounter, "Decisions a named rate limiter admitted."},
	rateLimitDeniedTotal:       {TypeCounter, "Decisions a named rate limiter denied."},
	rateLimitErrorsTotal:       {TypeCounter, "Calls of a named rate limiter whose backend failed (whatever the failure policy answered) or that returned an error for bad input."},
	rateLimitShadowDeniedTotal: {TypeCounter, "Decisions a named rate limiter in shadow mode would have denied and admitted (counted as allowed too)."},

	// Degraded rate limiting (metrics.Named), label name (and reason).
	rateLimitFallbackTotal: {TypeCounter, "Decisions a failure policy answered (fail-open or the fallback limiter) because the backend failed, by reason (timeout, error, breaker_open, canceled)."},
	rateLimitBreakerState:  {TypeGauge, "State of the circuit breaker of a named rate limiter's engine: 0 closed, 1 half-open, 2 open."},
	dedupFailuresTotal:     {TypeCounter, "Calls of a Redis deduplicator that failed because Redis did, by reason (timeout, error, breaker_open, canceled)."},
	dedupBreakerState:      {TypeGauge, "State of a Redis deduplicator's circuit breaker: 0 closed, 1 half-open, 2 open."},

	// Redis limiters' local denials (package redisbackend), label prefix.
	rateLimitLocalDeniedTotal: {TypeCounter, "Decisions a Redis limiter denied in process, without a Redis call, from an earlier denial of the same key."},

	// Redis limiters' leased quota (package redisbackend, Options.Quota), label prefix.
	rateLimitQuotaCallsTotal:        {TypeCounter, "Script calls a Redis limiter with leased quota made for keys no lease covered (each renews the key's lease)."},
	rateLimitQuotaGrantedTotal:      {TypeCounter, "Units those calls took from Redis, the asking request's cost included."},
	rateLimitQuotaReturnedTotal:     {TypeCounter, "Unused units of leases given back to Redis by the next call on their key."},
	rateLimitQuotaLocalAllowedTotal: {TypeCounter, "Decisions a Redis limiter admitted in process from a lease, without a Redis call."},

	// Package reliability, label name (and outcome).
	reliabilityOutcomesTotal:          {TypeCounter, "Elements a failure processor handled, by outcome (success, retried, failed, skipped, dead_letter, ignored, rejected)."},
	reliabilityRetriesTotal:           {TypeCounter, "Retries (tries after the first) of a failure processor."},
	reliabilityDeadLetterDroppedTotal: {TypeCounter, "Elements a full in-memory dead-letter queue refused."},

	// Package stream, labels topic (and group).
	"redis_streaming_mq_produced_total":              {TypeCounter, "Entries written to the topic's stream."},
	"redis_streaming_mq_duplicate_sends_total":       {TypeCounter, "Sends with a unique id already held (WithUnique): refused, or debounced into the scheduled message."},
	"redis_streaming_mq_consumed_total":              {TypeCounter, "Entries a handler processed successfully."},
	"redis_streaming_mq_acked_total":                 {TypeCounter, "Entries acknowledged (dead letters included)."},
	"redis_streaming_mq_filtered_total":              {TypeCounter, "Entries a filter skipped (acknowledged without handling)."},
	"redis_streaming_mq_handler_errors_total":        {TypeCounter, "Handler errors, panics and timeouts."},
	"redis_streaming_mq_handler_timeouts_total":      {TypeCounter, "Handler calls that outlived the handler timeout."},
	"redis_streaming_mq_retried_total":               {TypeCounter, "Failed entries left pending for a retry."},
	"redis_streaming_mq_redelivered_total":           {TypeCounter, "Entries delivered again (retries and takeovers from other consumers)."},
	"redis_streaming_mq_dead_total":                  {TypeCounter, "Entries moved to the dead-letter stream."},
	"redis_streaming_mq_duplicates_total":            {TypeCounter, "Entries a handler's deduplicator skipped as business duplicates (acknowledged unhandled)."},
	"redis_streaming_mq_poison_total":                {TypeCounter, "Entries that could not be decoded."},
	"redis_streaming_mq_trimmed_while_pending_total": {TypeCounter, "Pending entries found deleted from the stream by trimming."},
	"redis_streaming_mq_handle_latency_ms_seconds":   {TypeHistogram, "Duration of handler calls, in seconds."},
	"redis_streaming_mq_inflight":                    {TypeGauge, "Handler calls running."},
	"redis_streaming_mq_max_inflight":                {TypeGauge, "Handler calls that may run at once (the handler's concurrency)."},
	"redis_streaming_mq_queued":                      {TypeGauge, "Entries read or claimed, waiting for a free handler slot."},
	"redis_streaming_mq_pending":                     {TypeGauge, "Entries delivered to the group and not yet acknowledged."},
	"redis_streaming_mq_lag":                         {TypeGauge, "Entries not yet delivered to the group."},
	"redis_streaming_mq_lease_lost_total":            {TypeCounter, "Entries in hand found owned by another consumer."},
	"redis_streaming_mq_consumers_removed_total":     {TypeCounter, "Idle consumers without pending entries removed from the group."},
	"redis_streaming_mq_background_errors_total":     {TypeCounter, "Failed background Redis calls of a consumer, by operation."},
	"redis_streaming_mq_trim_attempts_total":         {TypeCounter, "Trimming passes over the topic's stream."},
	"redis_streaming_mq_trim_deleted_total":          {TypeCounter, "Entries removed from the stream by trimming."},
	"redis_streaming_dlq_size":                       {TypeGauge, "Entries in the topic's dead-letter stream."},
	"redis_streaming_dlq_trimmed_total":              {TypeCounter, "Dead letters dropped by the dead-letter stream's bounds."},
	"redis_streaming_dlq_waiting":                    {TypeGauge, "Entries whose dead-letter write failed, pending until the write works."},
	DLQReplaySuccessTotal:                            {TypeCounter, "Dead letters replayed back to their topic."},
	"redis_streaming_dlq_replay_failure_total":       {TypeCounter, "Dead-letter replays that failed."},
	"redis_streaming_dlq_replay_latency_seconds":     {TypeHistogram, "Duration of one dead-letter replay, in seconds."},
	"redis_streaming_dlq_deleted_total":              {TypeCounter, "Dead letters deleted by id."},
	"redis_streaming_dlq_cleared_total":              {TypeCounter, "Dead letters removed by purging a dead-letter stream."},

	// Package stream: delayed delivery (label topic) and DeleteOnAck (labels topic, group).
	"redis_streaming_mq_scheduled_total":       {TypeCounter, "Messages scheduled for later delivery (WithDelay, WithDeliverAt)."},
	"redis_streaming_mq_delayed_moved_total":   {TypeCounter, "Scheduled messages moved into the topic's stream when due."},
	"redis_streaming_mq_delayed_invalid_total": {TypeCounter, "Scheduled messages found undecodable (dead-lettered) or without their entry."},
	"redis_streaming_mq_delayed":               {TypeGauge, "Scheduled messages waiting for their due time."},
	"redis_streaming_mq_deleted_on_ack_total":  {TypeCounter, "Acknowledged entries deleted from the stream (Handler.DeleteOnAck, single-group topics)."},

	// Package stream/periodic, labels topic and schedule.
	"redis_streaming_periodic_sent_total":    {TypeCounter, "Ticks of a schedule this process sent to the topic."},
	"redis_streaming_periodic_skipped_total": {TypeCounter, "Missed ticks of a schedule this process recorded as dropped by the missed-tick policy."},
	"redis_streaming_periodic_errors_total":  {TypeCounter, "Failed Redis calls of a schedule's delivery in this process (the ticks wait)."},
	// Package stream: fenced deliveries (labels topic, group, op).
	"redis_streaming_mq_stale_refused_total": {TypeCounter, "Writes of stale deliveries refused (taken over or delivered again), by operation."},
	"redis_streaming_mq_results_total":       {TypeCounter, "Result records written (Handler.Results), by the state written: active (progress), completed, failed."},
	"redis_streaming_mq_result_errors_total": {TypeCounter, "Result record writes that failed (Handler.Results)."},
	"redis_streaming_mq_limited_total":       {TypeCounter, "Deliveries parked, uncounted, until the handler's consumption limit admits them (Handler.Limit)."},

	// Package cache, label name.
	"redis_cache_hits_total":            {TypeCounter, "Cache reads that found a value."},
	"redis_cache_misses_total":          {TypeCounter, "Cache reads that found nothing (or a load in progress)."},
	"redis_cache_null_hits_total":       {TypeCounter, "Cache reads that found a cached not-found marker."},
	"redis_cache_local_hits_total":      {TypeCounter, "Cache reads answered from client-side cache memory (also counted as hits or null hits)."},
	"redis_cache_loads_total":           {TypeCounter, "Loader calls, degraded ones included."},
	"redis_cache_load_errors_total":     {TypeCounter, "Loader calls that failed (an error other than not found, or a panic)."},
	"redis_cache_lock_waits_total":      {TypeCounter, "Loads that found another process's load in progress and waited for it."},
	"redis_cache_degraded_loads_total":  {TypeCounter, "Loads done without the lock after waiting the wait timeout."},
	"redis_cache_eager_refreshes_total": {TypeCounter, "Eager refreshes: reloads of a cached key started past a fraction of its TTL."},

	// Package cache when Redis fails (deadline, circuit breaker, on-redis-error), label name
	// (and reason: error, timeout, breaker_open).
	"redis_cache_redis_errors_total": {TypeCounter, "Redis calls of a cache that failed (error reply, broken connection, timeout)."},
	"redis_cache_fallback_total":     {TypeCounter, "Keys a cache answered from the loader because Redis failed, by reason."},
	"redis_cache_stale_total":        {TypeCounter, "GetOrLoad calls a cache answered with a stale value, by reason (failure, soft_timeout)."},
	"redis_cache_breaker_state":      {TypeGauge, "State of a cache's circuit breaker in front of Redis: 0 closed, 1 open, 2 half-open."},

	// Package cache, the staleness bound of client-side cache memory, label name.
	"redis_cache_local_refused_total":      {TypeCounter, "Hits in client-side cache memory not served because the heartbeat is older than the staleness bound."},
	"redis_cache_heartbeat_failures_total": {TypeCounter, "Heartbeat rounds of client-side caching that failed or timed out."},
	"redis_cache_heartbeat_age_seconds":    {TypeGauge, "Time since the send of the last heartbeat round every connection answered."},

	// Package idempotency (and httpidem on it), in the Dedup set, label name.
	"redis_idempotency_stored_total":              {TypeCounter, "Results an Idempotent stored after its function ran once for a key."},
	"redis_idempotency_replayed_total":            {TypeCounter, "Calls answered with a stored result, without running the function."},
	"redis_idempotency_in_flight_conflicts_total": {TypeCounter, "Calls that found their key in flight (answered ErrInFlight, or waited)."},
	"redis_idempotency_mismatched_total":          {TypeCounter, "Calls whose key was bound to another fingerprint (ErrMismatch)."},
	"redis_idempotency_lease_expired_total":       {TypeCounter, "Leases that ran out before their holder stored a result: taken over by a later call, or found lost by the holder."},
	"redis_idempotency_failures_total":            {TypeCounter, "Redis calls of an Idempotent that failed (timeout, error, breaker open)."},
	"redis_idempotency_in_flight":                 {TypeGauge, "Functions an Idempotent is running in this process."},
	"redis_idempotency_breaker_state":             {TypeGauge, "State of an Idempotent's circuit breaker: 0 closed, 1 half-open, 2 open."},
}
