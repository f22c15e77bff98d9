package redstream

import (
	"context"
	"errors"
	"time"
)

// AlgorithmConcurrency caps the cost held at once per key, by leases: Spec.Limit units at
// most, each lease freeing itself Spec.Window (the lease TTL) after it was taken or last
// extended. As a plain Limiter (AllowN) an admission is a lease nobody releases; a
// [ConcurrencyLimiter] hands out leases to release and extend.
const AlgorithmConcurrency Algorithm = "concurrency"

// Concurrency returns the Spec of a concurrency limit: at most limit units held at once per
// key, a lease freeing itself leaseTTL after it was taken or last extended (so a crashed
// holder's slots come back by themselves).
func Concurrency(limit int64, leaseTTL time.Duration) Spec {
	return Spec{Algorithm: AlgorithmConcurrency, Window: leaseTTL, Limit: limit}
}

// ErrLeaseLost is returned by ConcurrencyLimiter.Extend for a lease that no longer holds its
// slots: it expired, was released, or its token is stale.
var ErrLeaseLost = errors.New("redstream: lease lost")

// Lease is what ConcurrencyLimiter.Acquire returns: the admission's Decision and, when it
// is Allowed, the lease of N units of Key, named by Token, held until Expiry unless
// released or extended first. A denied Acquire returns a Lease whose Token is 0 and whose
// RetryAfter is the time until the earliest lease that must go expires. A Lease is a plain
// value, safe to copy and to hand to another goroutine or process (all its fields are
// exported); it holds no resource of its own.
type Lease struct {
	Decision
	// Key is the key the lease holds slots of.
	Key string
	// N is the number of units (slots) the lease holds.
	N int64
	// Token names the lease (non-zero when Allowed): Release and Extend act only on the
	// lease this token was issued for.
	Token uint64
	// Expiry is when the lease frees itself: the acquisition (or extension) time plus the
	// lease TTL, in the caller's clock (with a Redis engine at the server's clock, the
	// caller's time of the call plus the TTL Redis reported).
	Expiry time.Time
}

// ConcurrencyLimiter hands out leases on a concurrency limit ([AlgorithmConcurrency]),
// alone or all-or-nothing with rate limits on the same key. A zero now means the engine's
// clock, as for [Limiter]. Implementations are safe for concurrent use.
//
// A release after the lease expired, a second release, or a stale token changes nothing;
// a holder that crashes without releasing loses its slots when its lease expires.
type ConcurrencyLimiter interface {
	// Acquire asks for n units of key at now. Rate limits composed with the concurrency
	// limit are charged n as by AllowN; a denial by any limit takes nothing. It returns
	// the errors of Limiter.AllowN for bad input.
	Acquire(ctx context.Context, key string, now time.Time, n int64) (Lease, error)
	// Release frees the lease's units if it still holds them, and reports whether it did.
	// Rate limits keep what the acquisition was charged.
	Release(ctx context.Context, lease Lease, now time.Time) (bool, error)
	// Extend renews a lease that still holds its units for another lease TTL from now (a
	// heartbeat) and returns it with its new Expiry, or ErrLeaseLost.
	Extend(ctx context.Context, lease Lease, now time.Time) (Lease, error)
}
