// Package idempotency runs a function at most once per key: the idempotency keys of payment,
// order and webhook APIs (Stripe's, and the IETF draft-ietf-httpapi-idempotency-key-header
// that package httpidem follows), usable outside HTTP.
//
// [Idempotent.Do] takes a key, a fingerprint of the request the key was made for, and the
// function. The first call takes the key's lease and runs the function; its result is
// stored for [Options.Retention] and later calls with the same key and fingerprint get it
// back without running anything ([Result].Replayed). A call while the function runs elsewhere
// gets [ErrInFlight] (or waits, [Options.Wait]); a call with another fingerprint gets
// [ErrMismatch]. A function that fails releases its key; a holder that crashes releases it
// when its [Options.Lease] runs out, and the next call runs the function again.
//
// [NewRedis] keeps the records in Redis (a server or a cluster: one key, so one slot, per
// idempotency key), shared by every process; [NewMemory] in this process. Every Redis call
// has a deadline ([Options.Timeout]) and a circuit breaker ([Options.Breaker]). When Redis
// fails, calls fail closed by default: the function does not run and Do returns the error.
// [Options.FailOpen] runs it unprotected instead.
//
// [Idempotent.Stream] is the same for the handlers of package stream, keyed by the message
// key: a side effect runs once across redeliveries.
//
// Metrics (the metrics.Dedup set, label name): redis_idempotency_stored_total,
// _replayed_total, _in_flight_conflicts_total, _mismatched_total, _lease_expired_total,
// _failures_total, the gauge redis_idempotency_in_flight and, for Redis,
// redis_idempotency_breaker_state.
package idempotency
