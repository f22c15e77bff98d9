// Package health is the circuit breaker and state reporter shared by redstream's Redis
// components (the limiters and deduplicators of redisbackend, the cache): it turns an
// outage into one failed call per cool-down instead of one per request, logs one line per
// change of state, calls the component's hooks and keeps the counts that metrics read.
//
// A [Breaker] is closed while the backend answers. It opens after Config.Failures
// consecutive failures, or when at least Config.MinCalls calls in the last Config.Window
// failed at Config.ErrorRate or more. While open, [Breaker.Allow] fails at once with an
// error wrapping redstream.ErrCircuitOpen, without touching the backend (a few hundred
// nanoseconds). Config.CoolDown after opening it lets Config.Probes calls through
// (half-open): a probe that succeeds closes it once Probes probes have succeeded, a probe
// that fails opens it again for another cool-down.
//
// A breaker counts causes, not calls. When a connection drops, every call in flight on it
// fails at once with the same connection-level error (EOF, a reset or refused connection,
// rueidis's closed client; see [ConnectionLevel]): such a failure of a call that was
// admitted before the last counted connection-level failure, and that arrives within
// Config.Burst of it, belongs to that failure's episode and is not counted again (it is
// counted in Stats.Collapsed). Calls admitted after a counted failure count anew, so
// sequential calls to a dead server still open the breaker after Config.Failures calls.
// Timeouts and error replies are never collapsed: a hung server opens the breaker as fast
// as before.
//
// A [Set] keeps one Breaker per node of a Redis Cluster (the master serving a key's hash
// slot), so that one failing master fails fast only the keys it serves.
//
// Use:
//
//	t, err := b.Allow()
//	if err != nil {
//		return fail(err) // open: the failure policy answers
//	}
//	err = callRedis(ctx)
//	b.Done(ctx, t, err)
//
// Logging: one Warn when the breaker opens from closed (healthy to degraded), one Info when
// it closes again (recovered); a probe failing again logs nothing, so an outage of any
// length logs two lines.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
)

// Defaults of Config, used for its zero fields.
const (
	// DefaultFailures is the number of consecutive failures that opens a breaker.
	DefaultFailures = 3
	// DefaultErrorRate is the fraction of failed calls over DefaultWindow that opens a
	// breaker, once DefaultMinCalls calls were made in the window.
	DefaultErrorRate = 0.5
	// DefaultMinCalls is the number of calls in the window below which the error rate is
	// not judged.
	DefaultMinCalls = 20
	// DefaultWindow is the period the error rate is measured over.
	DefaultWindow = 10 * time.Second
	// DefaultCoolDown is how long an open breaker fails calls before it probes.
	DefaultCoolDown = time.Second
	// DefaultProbes is the number of concurrent probe calls of a half-open breaker, and
	// the number of successful probes that close it.
	DefaultProbes = 1
	// DefaultBurst is how long after a counted connection-level failure the
	// connection-level failures of calls already in flight then belong to its episode.
	DefaultBurst = 50 * time.Millisecond
)

// windowBuckets is the number of buckets the error-rate window is split into.
const windowBuckets = 10

// Config configures a Breaker: the options users set (redstream.BreakerOptions, whose
// zero fields take the Default* values; Disabled is the caller's to honour) and what the
// component adds. The zero value is valid.
type Config struct {
	redstream.BreakerOptions
	// Burst is how long after a counted connection-level failure the connection-level
	// failures of calls admitted before it are part of the same episode and not counted
	// (default DefaultBurst); negative counts every failure.
	Burst time.Duration
	// Clock returns the current time (default time.Now); tests inject a fake one.
	Clock func() time.Time

	// Component names what the breaker guards in log lines, for example
	// "redisbackend: limiter" (default "redstream").
	Component string
	// Degraded says what calls do while the breaker is open, appended to the Warn line,
	// for example "decisions follow the failure policy".
	Degraded string
	// Attrs identify the instance in every log line (a key prefix, a name).
	Attrs []slog.Attr
	// Logger receives one Warn when the breaker opens from closed and one Info when it
	// closes again (default slog.Default()).
	Logger *slog.Logger
}

// Change is one transition of a Breaker (Node names the cluster node, empty for the
// breaker of a single server or of a Set's keys of unknown node).
type Change = redstream.BreakerChange

// Stats are a Breaker's counts since it was made. Counts only grow.
type Stats struct {
	// State is the breaker's state now.
	State redstream.BreakerState
	// ConsecutiveFailures is the number of failures since the last success.
	ConsecutiveFailures int64
	// Successes and Failures count the calls reported to Done that reached the backend.
	Successes, Failures uint64
	// Collapsed counts the Failures that belonged to the episode of a connection-level
	// failure counted before (see the package documentation): they moved nothing.
	Collapsed uint64
	// Rejected counts the calls Allow failed because the breaker was open.
	Rejected uint64
	// Opens counts transitions to open (from closed or half-open).
	Opens uint64
}

// Ticket is the permission Allow gives for one call; pass it to Done.
type Ticket struct {
	v     uint64 // the state word when Allow ran
	ep    int64  // the breaker's episode when Allow ran
	probe bool
}

// Breaker is a circuit breaker with a state reporter. It is safe for concurrent use; a
// call on a closed breaker costs a few atomic operations and one clock read.
type Breaker struct {
	cfg  Config
	log  *slog.Logger
	base time.Time // clock origin: times are nanoseconds since base

	// sv packs the state (low 2 bits) and a generation, bumped on every transition, so
	// that the outcome of a call that started in an earlier state changes nothing.
	sv      atomic.Uint64
	consec  atomic.Int64
	buckets [windowBuckets]bucket
	bucket  int64 // ns per bucket

	succ, fail, rejected, opens, collapsed atomic.Uint64

	// ep is when (ns) the current episode of connection-level failures began; a ticket
	// carries the value it had when the call was admitted.
	ep atomic.Int64
	// node names the breaker's node in log lines and changes (Set).
	node string
	// retired is set once a Set dropped the breaker's node (guarded by mu).
	retired bool

	mu       sync.Mutex // guards transitions and the fields below
	openedAt int64      // ns; while open or half-open: when the cool-down began
	probing  int        // probes in flight (half-open)
	probeOK  int        // probes that succeeded (half-open)
	probeAt  int64      // ns; when the last probe was let through
}

type bucket struct {
	epoch       atomic.Int64
	calls, errs atomic.Int64
}

// Effective returns o with each zero threshold replaced by its default: the breaker New
// builds from o.
func Effective(o redstream.BreakerOptions) redstream.BreakerOptions {
	if o.Failures == 0 {
		o.Failures = DefaultFailures
	}
	if o.ErrorRate == 0 {
		o.ErrorRate = DefaultErrorRate
	}
	if o.MinCalls == 0 {
		o.MinCalls = DefaultMinCalls
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.CoolDown == 0 {
		o.CoolDown = DefaultCoolDown
	}
	if o.Probes == 0 {
		o.Probes = DefaultProbes
	}
	return o
}

// New returns a closed Breaker. It returns an error wrapping redstream.ErrInvalidConfig
// for a negative duration, an ErrorRate above 1 or a negative MinCalls or Probes.
func New(c Config) (*Breaker, error) {
	c.BreakerOptions = Effective(c.BreakerOptions)
	switch {
	case c.ErrorRate > 1 || c.ErrorRate != c.ErrorRate:
		return nil, fmt.Errorf("health: %w: ErrorRate = %v, want at most 1 (negative disables it)", redstream.ErrInvalidConfig, c.ErrorRate)
	case c.MinCalls < 0:
		return nil, fmt.Errorf("health: %w: MinCalls = %d, want >= 0", redstream.ErrInvalidConfig, c.MinCalls)
	case c.Window < windowBuckets:
		return nil, fmt.Errorf("health: %w: Window = %v, want > 0", redstream.ErrInvalidConfig, c.Window)
	case c.CoolDown < 0:
		return nil, fmt.Errorf("health: %w: CoolDown = %v, want > 0", redstream.ErrInvalidConfig, c.CoolDown)
	case c.Probes < 0:
		return nil, fmt.Errorf("health: %w: Probes = %d, want > 0", redstream.ErrInvalidConfig, c.Probes)
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Component == "" {
		c.Component = "redstream"
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Breaker{cfg: c, log: log, base: c.Clock(), bucket: int64(c.Window / windowBuckets)}
	for i := range b.buckets {
		b.buckets[i].epoch.Store(-1)
	}
	b.ep.Store(-1)
	return b, nil
}

func (b *Breaker) now() int64 { return int64(b.cfg.Clock().Sub(b.base)) }

func stateOf(v uint64) redstream.BreakerState { return redstream.BreakerState(v & 3) }

// State returns the breaker's state. An open breaker whose cool-down is over reads open
// until a call makes it half-open.
func (b *Breaker) State() redstream.BreakerState { return stateOf(b.sv.Load()) }

// Stats returns the breaker's counts.
func (b *Breaker) Stats() Stats {
	return Stats{
		State:               b.State(),
		ConsecutiveFailures: b.consec.Load(),
		Successes:           b.succ.Load(),
		Failures:            b.fail.Load(),
		Collapsed:           b.collapsed.Load(),
		Rejected:            b.rejected.Load(),
		Opens:               b.opens.Load(),
	}
}

// Allow reports whether a call may reach the backend now. When it may, err is nil and the
// caller must report the call's outcome with Done. When the breaker is open (or half-open
// with every probe slot taken) err wraps redstream.ErrCircuitOpen, and the caller must not
// call the backend nor Done.
func (b *Breaker) Allow() (Ticket, error) {
	v := b.sv.Load()
	if stateOf(v) == redstream.BreakerClosed {
		return Ticket{v: v, ep: b.ep.Load()}, nil
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	v = b.sv.Load()
	switch stateOf(v) {
	case redstream.BreakerClosed:
		return Ticket{v: v, ep: b.ep.Load()}, nil
	case redstream.BreakerOpen:
		if now-b.openedAt < int64(b.cfg.CoolDown) {
			return b.reject(now)
		}
		v = b.transition(v, redstream.BreakerHalfOpen, nil, now)
		b.probing, b.probeOK = 0, 0
	}
	// Half-open. A probe that never reported within a cool-down is given up, so that a
	// caller that lost its Ticket cannot keep the breaker half-open for ever.
	if b.probing >= b.cfg.Probes {
		if now-b.probeAt < int64(b.cfg.CoolDown) {
			return b.reject(now)
		}
		b.probing = 0
	}
	b.probing++
	b.probeAt = now
	return Ticket{v: v, probe: true}, nil
}

// reject counts a fast failure; b.mu is held.
func (b *Breaker) reject(now int64) (Ticket, error) {
	b.rejected.Add(1)
	left := time.Duration(int64(b.cfg.CoolDown) - (now - b.openedAt))
	if left < 0 {
		return Ticket{}, fmt.Errorf("%w (probing)", redstream.ErrCircuitOpen)
	}
	return Ticket{}, fmt.Errorf("%w (probing again in %v)", redstream.ErrCircuitOpen, left.Round(time.Millisecond))
}

// Done reports the outcome of a call Allow let through. err nil means the backend
// answered (pass nil too for an error reply that proves the backend alive, if the
// component decides so). A non-nil err counts as a backend failure, except when ctx, the
// caller's context, is done: a caller that gave up says nothing about the backend, and
// the call is forgotten (a probe's slot is freed).
func (b *Breaker) Done(ctx context.Context, t Ticket, err error) {
	switch {
	case err == nil:
		b.success(t)
	case ctx != nil && ctx.Err() != nil && !errors.Is(err, redstream.ErrCircuitOpen):
		b.release(t)
	default:
		b.failure(t, err)
	}
}

func (b *Breaker) success(t Ticket) {
	b.succ.Add(1)
	if !t.probe {
		if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
		if stateOf(t.v) == redstream.BreakerClosed {
			b.record(b.now(), false)
		}
		return
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.sv.Load()
	if v != t.v {
		return
	}
	b.probing--
	b.probeOK++
	if b.probeOK >= b.cfg.Probes {
		b.consec.Store(0)
		b.transition(v, redstream.BreakerClosed, nil, now)
	}
}

func (b *Breaker) release(t Ticket) {
	if !t.probe {
		return
	}
	b.mu.Lock()
	if b.sv.Load() == t.v && b.probing > 0 {
		b.probing--
	}
	b.mu.Unlock()
}

func (b *Breaker) failure(t Ticket, err error) {
	b.fail.Add(1)
	if f := b.cfg.OnFailure; f != nil {
		f(err)
	}
	now := b.now()
	if !t.probe && stateOf(t.v) == redstream.BreakerClosed && b.cfg.Burst > 0 && ConnectionLevel(err) && b.collapse(t, now) {
		b.collapsed.Add(1)
		return
	}
	c := b.consec.Add(1)
	if !t.probe {
		if stateOf(t.v) != redstream.BreakerClosed {
			return
		}
		rate := b.record(now, true)
		if (b.cfg.Failures < 0 || c < int64(b.cfg.Failures)) && !rate {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.sv.Load()
	if v != t.v {
		return // another call already moved the breaker on
	}
	b.openedAt = now
	b.probing, b.probeOK = 0, 0
	b.transition(v, redstream.BreakerOpen, err, now)
}

// collapse reports whether a connection-level failure at now, of the call of ticket t,
// belongs to the current episode; if not, it begins a new episode (and is counted). A call
// admitted before the episode began was in flight when its first failure came: the same
// dropped connection, or the same outage, failed it. Of failures racing to begin an
// episode, one wins and the others belong to it.
func (b *Breaker) collapse(t Ticket, now int64) bool {
	cur := b.ep.Load()
	if cur >= 0 && t.ep != cur && now-cur <= int64(b.cfg.Burst) {
		return true
	}
	return !b.ep.CompareAndSwap(cur, max(now, cur+1))
}

// record counts one call in the error-rate window and reports whether the window now
// calls for opening the breaker (only judged on a failure).
func (b *Breaker) record(now int64, failed bool) bool {
	if b.cfg.ErrorRate < 0 {
		return false
	}
	epoch := now / b.bucket
	bk := &b.buckets[epoch%windowBuckets]
	if e := bk.epoch.Load(); e != epoch && bk.epoch.CompareAndSwap(e, epoch) {
		bk.calls.Store(0)
		bk.errs.Store(0)
	}
	bk.calls.Add(1)
	if !failed {
		return false
	}
	bk.errs.Add(1)
	var calls, errs int64
	for i := range b.buckets {
		x := &b.buckets[i]
		if e := x.epoch.Load(); e > epoch-windowBuckets && e <= epoch {
			calls += x.calls.Load()
			errs += x.errs.Load()
		}
	}
	return calls >= int64(b.cfg.MinCalls) && float64(errs) >= b.cfg.ErrorRate*float64(calls)
}

// transition moves the breaker from the state word v to state to, logs healthy/degraded
// changes and calls OnStateChange; b.mu is held. It returns the new state word.
func (b *Breaker) transition(v uint64, to redstream.BreakerState, err error, now int64) uint64 {
	from := stateOf(v)
	nv := (v>>2+1)<<2 | uint64(to)
	b.sv.Store(nv)
	if to == redstream.BreakerOpen {
		b.opens.Add(1)
		for i := range b.buckets {
			b.buckets[i].epoch.Store(-1)
		}
	}
	ctx := context.Background()
	switch {
	case from == redstream.BreakerClosed && to == redstream.BreakerOpen:
		msg := b.cfg.Component + ": backend failing, circuit breaker open"
		if b.cfg.Degraded != "" {
			msg += "; " + b.cfg.Degraded
		}
		attrs := append(append([]slog.Attr(nil), b.cfg.Attrs...),
			slog.Int64("consecutive_failures", b.consec.Load()),
			slog.Uint64("collapsed_failures", b.collapsed.Load()),
			slog.Duration("cool_down", b.cfg.CoolDown),
			slog.Any("error", err))
		b.log.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
	case to == redstream.BreakerClosed && b.retired:
		b.log.LogAttrs(ctx, slog.LevelInfo, b.cfg.Component+": cluster node serves no slots any more (failed over), its circuit breaker closed", b.cfg.Attrs...)
	case to == redstream.BreakerClosed:
		b.log.LogAttrs(ctx, slog.LevelInfo, b.cfg.Component+": backend answers again, circuit breaker closed", b.cfg.Attrs...)
	}
	if f := b.cfg.OnStateChange; f != nil {
		f(Change{Node: b.node, From: from, To: to, Err: err, At: b.base.Add(time.Duration(now))})
	}
	return nv
}

// Forget gives up the call of ticket t without an outcome, as Done does for a caller that
// gave up: nothing is counted, and a probe's slot is freed.
func (b *Breaker) Forget(t Ticket) { b.release(t) }

// retire closes a breaker whose node a Set dropped, if it is not closed: its failures are
// over for the Set's calls, whose keys have another node's breaker now.
func (b *Breaker) retire() {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retired = true
	if v := b.sv.Load(); stateOf(v) != redstream.BreakerClosed {
		b.consec.Store(0)
		b.transition(v, redstream.BreakerClosed, nil, now)
	}
}

// WithTimeout returns ctx bounded by d (no bound for d <= 0), the deadline of one backend
// call: when ctx's own deadline comes sooner, ctx is returned as is (with a no-op cancel),
// which saves a timer.
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
