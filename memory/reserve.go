package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
	"github.com/redstream-go/redstream/internal/reservation"
)

// ReserveN admits or denies a request of cost n for key at now (the zero time means
// Options.Clock) exactly as AllowN does, and returns it as a reservation whose Settle
// later applies the actual cost (see redstream.Reservation; redstream.Reserve is the short
// form at the engine's clock). With several specs the reservation is admitted by every
// spec or by none, and Settle adjusts each. Its Deadline is Options.Clock at the call plus
// the longest period of the specs, and at least a minute; Settle checks it against
// Options.Clock. Errors are
// AllowN's; every algorithm of core's registry can settle, and a spec whose algorithm
// cannot is an error wrapping redstream.ErrInvalidConfig.
//
// ctx is not used: a reservation and its settlement do no I/O.
func (l *Limiter) ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error) {
	var longest int64
	for _, lim := range l.limits {
		if !coreops.Settles(lim) {
			return nil, fmt.Errorf("memory: ReserveN: %w: algorithm %q cannot settle", redstream.ErrInvalidConfig, lim.Name())
		}
		longest = max(longest, lim.Period())
	}
	if key == "" || n <= 0 {
		return nil, wrap(engine.CheckRequest(key, now, n))
	}
	t := l.cfg.Micros(now)
	if err := coreops.CheckTime(t); err != nil {
		return nil, wrap(err)
	}
	var (
		d   core.Decision
		cs  []coreops.Charge
		err error
	)
	if l.buckets != nil {
		d, cs, err = l.buckets.Reserve(key, t, n)
	} else {
		d, cs, err = l.k.Reserve(key, t, n)
	}
	if err != nil {
		return nil, wrap(err)
	}
	deadline := l.cfg.Now() + max(longest, reservation.MinDeadline.Microseconds())
	settle := func(_ context.Context, actual int64) error {
		at := l.cfg.Now()
		if at > deadline {
			return fmt.Errorf("memory: Settle: %w", redstream.ErrReservationDone)
		}
		if !now.IsZero() {
			at = t // a reservation at an explicit time settles at that time
		}
		if l.buckets != nil {
			return wrap(l.buckets.Settle(key, cs, at, actual))
		}
		return wrap(l.k.Settle(key, cs, at, actual))
	}
	return reservation.New(d, time.UnixMicro(deadline), settle).(*redstream.Reservation), nil
}
