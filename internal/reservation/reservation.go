// Package reservation lets the engines build package redstream's Reservation, whose fields
// are unexported: package redstream sets [New] from its init, and an engine's ReserveN
// calls it (and asserts the result to *redstream.Reservation).
package reservation

import (
	"context"
	"time"

	"github.com/redstream-go/redstream/core"
)

// Settle is an engine's settlement of one admitted reservation: it applies actual (0
// cancels) to every limit the reservation was charged to. It returns an error wrapping
// redstream.ErrReservationDone when the reservation's deadline has passed (then nothing
// changes), a backend error when the engine could not settle (the reservation stays open),
// or nil.
type Settle func(ctx context.Context, actual int64) error

// MinDeadline is the least time a reservation stays open: its deadline is its time plus
// the longest period of its limits, and at least MinDeadline (a request may run longer than
// a fast bucket takes to refill).
const MinDeadline = time.Minute

// New returns a *redstream.Reservation of the decision d with its deadline and settlement
// (unused for a denied reservation). Package redstream sets it.
var New func(d core.Decision, deadline time.Time, settle Settle) any
