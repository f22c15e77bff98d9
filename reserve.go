package redstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/reservation"
)

// ErrReservationDone is returned by Reservation.Settle and Cancel when nothing can be
// settled any more: the reservation was denied, is already settled or cancelled, or its
// deadline has passed (it then stays charged at its estimate).
var ErrReservationDone = errors.New("redstream: reservation already settled, denied or past its deadline")

// Reservation is a request admitted at an estimated cost whose actual cost is known only
// afterwards (an LLM call's tokens, a query's cost, bytes served): [Reserve] admits or denies
// it like AllowN at the estimate, and Settle later gives back what the request did not use
// or takes what it used beyond the estimate. How each algorithm applies the difference is
// core's settlement (see package core, "Settling a reservation"): with no other traffic,
// reserving n and settling actual leaves the key as admitting actual would have; a refund
// never gives back more than the reservation took, and a charge never takes a key past full
// (no debt). On a multi-limiter the reservation is admitted by every limit or by none (a
// denial takes nothing from any limit), and Settle adjusts each limit.
//
// A reservation is settled at most once; one not settled by its Deadline stays charged at
// its estimate. A Reservation is safe for concurrent use.
type Reservation struct {
	// Decision is the reservation's decision at its estimate. A denied reservation
	// consumed nothing and has nothing to settle.
	Decision
	// Deadline is when the reservation can no longer be settled, by the engine's clock at
	// the reservation: the reservation's time plus the longest period of its limits
	// (core.Limit.Period), after which a refund could no longer change what the key
	// admits, and at least a minute (a request may run longer than a fast bucket takes to
	// refill). The zero time for a denied reservation.
	Deadline time.Time

	mu     sync.Mutex
	settle reservation.Settle // nil once settled, or when denied
}

func init() {
	reservation.New = func(d core.Decision, deadline time.Time, settle reservation.Settle) any {
		us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
		r := &Reservation{Decision: Decision{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
			RetryAfter: us(d.RetryAfter), ResetAfter: us(d.ResetAfter), Delay: us(d.Delay)}}
		if r.Allowed {
			r.Deadline, r.settle = deadline, settle
		}
		return r
	}
}

// reserver is implemented by the engines that reserve: memory.Limiter,
// redisbackend.Limiter and wasmcore.Limiter.
type reserver interface {
	ReserveN(ctx context.Context, key string, now time.Time, n int64) (*Reservation, error)
}

// Reserve is shorthand for the engine's ReserveN(ctx, key, time.Time{}, estimate): it
// admits or denies a request of cost estimate for key at the engine's clock, as AllowN
// would, and returns the reservation to settle with its actual cost. l is an engine's
// limiter (memory.Limiter, redisbackend.Limiter, wasmcore.Limiter) or a limiter wrapping one with an Unwrap()
// Limiter method ([Multi], [WithFailurePolicy], metrics.Named), which Reserve unwraps: a
// reservation goes to the engine, and a failure policy does not apply to it (a backend
// failure is returned). Errors are AllowN's, and one wrapping ErrInvalidConfig when no
// engine under l reserves or one of its algorithms cannot settle.
func Reserve(ctx context.Context, l Limiter, key string, estimate int64) (*Reservation, error) {
	for l != nil {
		if r, ok := l.(reserver); ok {
			return r.ReserveN(ctx, key, time.Time{}, estimate)
		}
		u, ok := l.(interface{ Unwrap() Limiter })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	return nil, fmt.Errorf("redstream: Reserve: %w: %T does not reserve", ErrInvalidConfig, l)
}

// Settle settles the reservation at its actual cost (at least 0; 0 is Cancel): the
// difference from the estimate is given back to, or taken from, every limit the
// reservation was charged to. It returns ErrInvalidCost for actual < 0, ErrReservationDone
// when the reservation was denied, settled or cancelled already, or is past its Deadline,
// and a backend error when the engine could not settle: when the engine knows the
// settlement was not applied the reservation stays open and Settle may be called again;
// when it may have been (a Redis call that timed out), the error also wraps
// ErrReservationDone and the reservation is closed, never settled twice. A reservation made at an explicit time settles at
// that time; one made at the engine's clock settles at the engine's clock.
func (r *Reservation) Settle(ctx context.Context, actual int64) error {
	if actual < 0 {
		return fmt.Errorf("redstream: Settle: %w: actual = %d", ErrInvalidCost, actual)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settle == nil {
		return ErrReservationDone
	}
	err := r.settle(ctx, actual)
	if err == nil || errors.Is(err, ErrReservationDone) {
		r.settle = nil
	}
	return err
}

// Cancel is shorthand for r.Settle(ctx, 0): the request did not happen, and everything the
// reservation took is given back.
func (r *Reservation) Cancel(ctx context.Context) error { return r.Settle(ctx, 0) }
