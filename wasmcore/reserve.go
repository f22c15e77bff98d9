package wasmcore

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
// Options.Clock) exactly as AllowN does, and returns it as a reservation whose Settle later
// applies the actual cost (see redstream.Reservation; redstream.Reserve is the short form
// at the engine's clock). The charge and the settlement are computed in the module
// (redstream_limit_charge and redstream_limit_settle), so they are core's. With several
// specs the reservation is admitted by every spec or by none, and Settle adjusts each. Its
// Deadline is Options.Clock at the call plus the longest period of the specs, and at least
// a minute. Errors are AllowN's, and the module's failures (ErrTrapped).
func (l *Limiter) ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error) {
	var longest int64
	for _, lim := range l.limits {
		if !coreops.Settles(lim) {
			return nil, fmt.Errorf("wasmcore: ReserveN: %w: algorithm %q cannot settle", errInvalidConfig, lim.Name())
		}
		longest = max(longest, lim.Period())
	}
	if err := engine.CheckRequest(key, now, n); err != nil {
		return nil, fmt.Errorf("wasmcore: %w", err)
	}
	t := l.opts.cfg.Micros(now)
	var (
		d  core.Decision
		cs []coreops.Charge
	)
	err := l.withStepper(ctx, func(st *stepper) (err error) {
		d, cs, err = l.k.ReserveWith(st, st, key, t, n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("wasmcore: %w", err)
	}
	deadline := l.opts.cfg.Now() + max(longest, reservation.MinDeadline.Microseconds())
	settle := func(ctx context.Context, actual int64) error {
		at := l.opts.cfg.Now()
		if at > deadline {
			return fmt.Errorf("wasmcore: Settle: %w", redstream.ErrReservationDone)
		}
		if !now.IsZero() {
			at = t // a reservation at an explicit time settles at that time
		}
		err := l.withStepper(ctx, func(st *stepper) error { return l.k.SettleWith(st, key, cs, at, actual) })
		if err != nil {
			return fmt.Errorf("wasmcore: Settle: %w", err)
		}
		return nil
	}
	return reservation.New(d, time.UnixMicro(deadline), settle).(*redstream.Reservation), nil
}

// withStepper runs f with an instance's stepper bound to ctx and the limiter's limits.
func (l *Limiter) withStepper(ctx context.Context, f func(st *stepper) error) error {
	return withStepper(ctx, l.opts.rt, l.abi, l.from, l.carry, f)
}

// withStepper runs f with a stepper of an instance of rt bound to ctx and the limits
// (with a successor's previous limits from and strategy c).
func withStepper(ctx context.Context, rt *Runtime, limits, from []abiLimit, c core.Carry, f func(st *stepper) error) error {
	in, err := rt.acquire(ctx)
	if err != nil {
		return err
	}
	st := &in.stepper
	st.ctx, st.limits, st.from, st.carry = ctx, limits, from, c
	err = f(st)
	st.ctx, st.limits, st.from = nil, nil, nil
	rt.release(in)
	return err
}
