package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/internal/reservation"
)

var (
	scriptReserve = newScript("reserve.lua")
	scriptSettle  = newScript("settle.lua")
)

// ReserveN admits or denies a request of cost n for key at now (the zero time reads the
// Redis server's TIME) exactly as AllowN does, in one round trip (reserve.lua), and returns
// it as a reservation whose Settle applies the actual cost later in one more round trip
// (settle.lua) at the same explicit time or, for the zero time, at the server's TIME then
// (see redstream.Reservation; redstream.Reserve is the short form at the server's clock).
// With several specs (NewMultiLimiter) the reservation is admitted by every spec or by
// none, and Settle adjusts each; the keys of one user key share a hash tag, so a
// reservation and its settlement run on one node of a cluster. A limiter carrying state
// (Options.Previous) seeds a key that does not exist yet from its previous spec's key in the
// same call, exactly as a decision does (carry.lua), before reserving.
//
// Deadline is the local clock at the call plus the longest period of the specs, and at
// least a minute; Settle
// checks it against the local clock. Every call is bounded by Options.Timeout and goes
// through the circuit breaker, as AllowN's. A refund made by another process is not seen by
// this limiter's local denials until they end (they may deny a little longer than Redis
// would, never admit more). A Settle that provably never reached Redis (the
// breaker open, the client not made yet, a failed dial) leaves the reservation open, to be
// settled again; any other failure (a timeout, a dropped connection) may have applied it,
// so the reservation is closed (the error wraps redstream.ErrReservationDone and the cause)
// and keeps its estimate rather than risk a second refund. Local denials are not consulted: a reservation always asks
// Redis, and a settlement forgets the key's local denial. Errors are AllowN's; a
// JavaCompatible limiter cannot reserve (an error wrapping redstream.ErrInvalidConfig).
func (l *Limiter) ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error) {
	if l.java {
		return nil, fmt.Errorf("redisbackend: ReserveN: %w: a JavaCompatible limiter cannot reserve", errInvalidConfig)
	}
	if err := l.check(key, now, n); err != nil {
		return nil, err
	}
	limits, longest, err := l.settling()
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, 4+8*len(limits))
	args = append(args, timeArg(now), strconv.FormatInt(n, 10), l.margin)
	for i, p := range limits {
		args = append(append(args, l.codes[i]), paddedParams(p)...)
	}
	keys := l.Keys(key)
	callKeys := keys
	if l.oldRoles != nil {
		// carry.lua's layout (useCarry): the previous specs' keys after the keys, the
		// strategy and the previous specs after the limits; reserve.lua seeds a new key from
		// them first, in the same call.
		callKeys = l.callKeys(key)
		args = append(args, l.params[1+4*len(limits):]...)
	}
	start := time.Now()
	r, err := l.call(ctx, scriptReserve, callKeys, args)
	if err != nil {
		return nil, err
	}
	vs, err := r.AsIntSlice()
	if err != nil || len(vs) != 6*len(limits)+1 {
		return nil, scriptReserve.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
	}
	at := vs[6*len(limits)]
	ds := make([]core.Decision, len(limits))
	cs := make([]coreops.Charge, len(limits))
	for i, p := range limits {
		ds[i] = coreDecision(vs[6*i:])
		cs[i] = coreops.ChargeOf(p, at, n, &ds[i])
	}
	d := core.Combine(ds)
	if d.Allowed {
		l.local.forget(key)
	}
	deadline := start.Add(max(time.Duration(longest)*time.Microsecond, reservation.MinDeadline))
	settle := func(ctx context.Context, actual int64) error {
		if time.Now().After(deadline) {
			return fmt.Errorf("redisbackend: Settle: %w", redstream.ErrReservationDone)
		}
		sargs := make([]string, 0, 3+6*len(limits))
		sargs = append(sargs, timeArg(now), strconv.FormatInt(actual, 10), l.margin)
		for i, p := range limits {
			sargs = append(append(sargs, l.codes[i]), paddedParams(p)...)
			sargs = append(sargs, strconv.FormatInt(cs[i].At, 10), strconv.FormatInt(cs[i].N, 10))
		}
		r, err := l.call(ctx, scriptSettle, keys, sargs)
		l.local.forget(key)
		if err != nil {
			if unsent(err) {
				return err
			}
			// The script may have run (a timeout, a dropped connection): settling again
			// could refund twice, so the reservation is closed and keeps what it has.
			return fmt.Errorf("redisbackend: Settle: %w; the settlement may not have been applied: %w", redstream.ErrReservationDone, err)
		}
		if vs, err := r.AsIntSlice(); err != nil || len(vs) != len(limits) {
			return scriptSettle.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
		}
		return nil
	}
	return reservation.New(d, deadline, settle).(*redstream.Reservation), nil
}

// settling returns the limits of the limiter's specs, which must all settle, and the
// longest of their periods (µs).
func (l *Limiter) settling() ([]core.Limit, int64, error) {
	limits := make([]core.Limit, len(l.specs))
	var longest int64
	for i, s := range l.specs {
		p, err := s.Core()
		if err != nil {
			return nil, 0, err
		}
		if !coreops.Settles(p) {
			return nil, 0, fmt.Errorf("redisbackend: ReserveN: %w: algorithm %q cannot settle", errInvalidConfig, p.Name())
		}
		limits[i], longest = p, max(longest, p.Period())
	}
	return limits, longest, nil
}

// unsent reports an error of a call that provably never reached Redis: the circuit breaker
// was open, the client not made yet, or the dial failed.
func unsent(err error) bool {
	return errors.Is(err, redstream.ErrCircuitOpen) || errors.Is(err, ErrNotConnected) || health.NotSent(err)
}

// timeArg is ARGV[1] of the limit scripts: now in µs, or ” for the server's TIME.
func timeArg(now time.Time) string {
	if now.IsZero() {
		return ""
	}
	return strconv.FormatInt(now.UnixMicro(), 10)
}
