package redstream

import (
	"context"
	"errors"
	"time"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/failure"
)

// Decision is the outcome of one rate-limit decision. It is a plain value, safe to copy.
type Decision struct {
	// Allowed reports whether the request was admitted and its cost consumed. A denied
	// request consumes nothing.
	Allowed bool
	// Limit is the most a key can hold: the burst of a bucket or the limit of a window.
	Limit int64
	// Remaining is how much more cost the key would admit now, after this decision.
	Remaining int64
	// RetryAfter is 0 when allowed; otherwise the time until the same request could pass if
	// no other traffic hit the key.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its initial state.
	ResetAfter time.Duration
	// Delay is set by the leaky bucket only: how long an admitted request should wait so
	// that admitted requests leave evenly spaced (traffic shaping). 0 otherwise.
	Delay time.Duration
	// Shadow reports a shadow denial: the limit denied the request, and a limiter in
	// shadow mode ([Shadow]) admitted it anyway. Allowed is then true, nothing was
	// consumed, and Limit, Remaining, RetryAfter and ResetAfter are the denial's (RetryAfter
	// is what the caller would have waited). False for every other decision.
	Shadow bool
}

// Limiter decides whether requests for a key may proceed. Implementations are safe for
// concurrent use.
//
// A zero now means "the engine's clock": the injected clock of an in-process engine, or the
// Redis server's TIME for a Redis engine (so clients need no synchronized clocks). A non-zero
// now is used as is, which makes decisions reproducible in tests and replays.
//
// The interface holds only the full form; [Allow] is its shorthand for one request now.
type Limiter interface {
	// AllowN decides a request of cost n for key at now. It returns ErrEmptyKey for an
	// empty key, ErrInvalidCost for n <= 0, ErrCostTooLarge when n exceeds the limit,
	// ErrInvalidTime for a time before the Unix epoch or after core.MaxTime.
	AllowN(ctx context.Context, key string, now time.Time, n int64) (Decision, error)
}

// Allow is shorthand for l.AllowN(ctx, key, time.Time{}, 1): a request of cost 1 at the
// engine's clock.
func Allow(ctx context.Context, l Limiter, key string) (Decision, error) {
	return l.AllowN(ctx, key, time.Time{}, 1)
}

// Deduplicator tells whether an element was seen before. Implementations are safe for
// concurrent use. The empty element is never a duplicate and is never recorded.
type Deduplicator interface {
	// IsDuplicate reports whether element was seen (and, for a windowed deduplicator,
	// still within its window), without recording it.
	IsDuplicate(ctx context.Context, element string) (bool, error)
	// MarkSeen records element as seen.
	MarkSeen(ctx context.Context, element string) error
	// CheckAndMark atomically reports whether element is a duplicate and records it.
	// It returns false exactly once for a new element, even across processes where the
	// engine is shared.
	CheckAndMark(ctx context.Context, element string) (bool, error)
	// Clear forgets every element.
	Clear(ctx context.Context) error
	// UniqueCount returns the number of distinct elements recorded (see each engine for
	// whether it is exact).
	UniqueCount(ctx context.Context) (int64, error)
}

// TimedDeduplicator is implemented by deduplicators whose answer depends on time (the
// windowed deduplicator of every engine, found by type assertion on what the engines'
// NewDeduplicator return). A zero now means the engine's clock, as for Limiter; the
// methods of Deduplicator are these at the engine's clock (MarkSeen is CheckAndMarkAt
// without its answer).
type TimedDeduplicator interface {
	Deduplicator
	// IsDuplicateAt reports whether element was seen within the window before now,
	// without recording it.
	IsDuplicateAt(ctx context.Context, element string, now time.Time) (bool, error)
	// CheckAndMarkAt atomically reports whether element is a duplicate at now and
	// records the sighting.
	CheckAndMarkAt(ctx context.Context, element string, now time.Time) (bool, error)
}

// Sentinel errors. Engines wrap them with context; compare with errors.Is.
var (
	// ErrInvalidConfig is returned by constructors given bad parameters.
	ErrInvalidConfig = core.ErrInvalidConfig
	// ErrInvalidCost is returned for a cost n <= 0.
	ErrInvalidCost = core.ErrInvalidCost
	// ErrCostTooLarge is returned when a cost exceeds what a key can ever hold.
	ErrCostTooLarge = core.ErrCostTooLarge
	// ErrInvalidTime is returned for a time before the Unix epoch or after core.MaxTime.
	ErrInvalidTime = core.ErrInvalidTime
	// ErrEmptyKey is returned by limiters for an empty key: an empty key is almost always a
	// bug in the caller's key function, and silently sharing one bucket among all callers
	// would be a wrong answer.
	ErrEmptyKey = failure.ErrEmptyKey
	// ErrNotFound is returned when a name is not registered.
	ErrNotFound = errors.New("redstream: not found")
)

// Sink receives values, one call per value: the end of a pipeline (a writer, a publisher, a
// database). Implementations document whether they are safe for concurrent use.
type Sink[T any] interface {
	// Invoke delivers value. An error means the value was not delivered.
	Invoke(ctx context.Context, value T) error
}
