package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/failure"
)

// Defaults of Options, used for its zero fields.
const (
	// DefaultRetention is the default of Options.Retention: how long a completed key keeps
	// its result (Stripe keeps keys 24 hours).
	DefaultRetention = 24 * time.Hour
	// DefaultLease is the default of Options.Lease: how long a crashed holder keeps its key.
	DefaultLease = 30 * time.Second
	// DefaultMaxResult is the default of Options.MaxResult, in bytes (1 MiB).
	DefaultMaxResult = 1 << 20
	// DefaultTimeout is the default of Options.Timeout: the deadline of each Redis call.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultKeyPrefix is the default of Options.KeyPrefix.
	DefaultKeyPrefix = "redstream:idem"
)

// Options configures an Idempotent. The zero value is valid: each zero field takes its
// default. The YAML keys are those of the struct tags (durations in milliseconds).
type Options struct {
	// Name names the Idempotent in metrics (label name) and log lines, and separates the keys
	// of Idempotents that share a KeyPrefix (default "default"). It may not contain '{' or
	// '}', nor may KeyPrefix.
	Name string `yaml:"name"`
	// KeyPrefix starts every Redis key: "<KeyPrefix>:<Name>:{<sha-256 of the key>}"
	// (default DefaultKeyPrefix). Ignored by the memory engine.
	KeyPrefix string `yaml:"key-prefix"`
	// Retention is how long a completed key keeps its result and its fingerprint, from its
	// completion (default DefaultRetention). A call after it runs again.
	Retention time.Duration `yaml:"retention-ms" unit:"ms"`
	// Lease is how long a key stays in flight after its holder was last heard of (default
	// DefaultLease, at most Retention). A live holder renews it every Lease/3 while its
	// function runs; a holder that crashed or hung releases the key when the lease runs out,
	// and the next call runs the function again.
	Lease time.Duration `yaml:"lease-ms" unit:"ms"`
	// Wait makes a call that finds its key in flight wait, polling with backoff, until the
	// holder completes (and return its stored result), releases the key (and run itself),
	// or the caller's context ends (ErrInFlight). Default false: ErrInFlight at once.
	Wait bool `yaml:"wait"`
	// MaxResult bounds a stored result, in bytes (default DefaultMaxResult). A larger result
	// is not stored: its key completes with a marker, and later calls get ErrTooLarge.
	MaxResult int `yaml:"max-result-bytes"`
	// Timeout bounds each Redis call, whatever the caller's context allows (default
	// DefaultTimeout; negative: the caller's context alone).
	Timeout time.Duration `yaml:"timeout-ms" unit:"ms"`
	// FailOpen runs the function without protection when Redis fails (down, timed out, its
	// breaker open): at-most-once is lost for those calls, the service stays up. Default
	// false (fail closed): Do returns the backend's error and does not run the function,
	// because running a payment twice is worse than refusing it. Ignored by the memory
	// engine, which cannot fail.
	FailOpen bool `yaml:"fail-open"`
	// Breaker configures the circuit breaker of the Redis engine (one per cluster master):
	// while it is open, calls fail at once with an error wrapping redstream.ErrCircuitOpen
	// (then FailOpen decides). The writes that follow a function that ran (storing its
	// result, releasing or renewing its key) are tried whatever the breaker's state, within
	// Timeout.
	Breaker redstream.BreakerOptions `yaml:"breaker"`
	// Logger receives the breaker's state changes and the warnings of results that could
	// not be stored (default slog.Default()).
	Logger *slog.Logger `yaml:"-"`
}

// Errors of Do. Callers test them with errors.Is.
var (
	// ErrInFlight is returned when another call holds the key's lease (its function is
	// running), without Options.Wait or when the wait ended with the caller's context. The
	// HTTP answer is 409 Conflict.
	ErrInFlight = errors.New("idempotency: a call with this key is in flight")
	// ErrMismatch is returned when the key is bound to another fingerprint: it was used
	// for a different request within its retention. The HTTP answer is 422.
	ErrMismatch = errors.New("idempotency: key reused with a different fingerprint")
	// ErrTooLarge is returned when the key completed with a result larger than
	// Options.MaxResult, which was not stored (and, wrapped, with that result to the call
	// that produced it).
	ErrTooLarge = errors.New("idempotency: result too large to store")
	// ErrLeaseLost is returned, with the function's result, when the function finished after
	// its lease expired and another call took the key: the result was not stored. The
	// context passed to the function is cancelled with this cause as soon as a renewal finds
	// the lease lost.
	ErrLeaseLost = errors.New("idempotency: lease lost before the result was stored")
)

// Result is the outcome of Do.
type Result struct {
	// Value is the function's result: the stored one when Replayed.
	Value []byte
	// Replayed reports that the function did not run: Value was stored by an earlier call.
	Replayed bool
}

// Idempotent runs functions at most once per key within a retention window, across the
// processes that share its engine. It is safe for concurrent use.
type Idempotent struct {
	o   Options
	eng engine
	m   *counters
	log *slog.Logger
}

// reply codes of engine.acquire (and of acquire.lua).
const (
	stAcquired = 0 // the caller holds the lease of a new record
	stDone     = 1 // completed with the same fingerprint: replay
	stRunning  = 2 // another holder's lease
	stMismatch = 3 // another fingerprint
	stTakeover = 4 // the caller holds the lease of a record whose lease had expired
)

// reply is what acquire found.
type reply struct {
	code     int
	value    []byte        // stDone
	tooLarge bool          // stDone
	left     time.Duration // stRunning: what is left of the holder's lease
}

// engine stores the records: Redis or memory. Every method is atomic per record key.
type engine interface {
	acquire(ctx context.Context, rk, key, fp, token string, lease, retention time.Duration) (reply, error)
	complete(ctx context.Context, rk, token string, value []byte, tooLarge bool, retention time.Duration) (bool, error)
	release(ctx context.Context, rk, token string) error
	renew(ctx context.Context, rk, token string, lease time.Duration) (bool, error)
}

// Validate reports the first invalid option, as NewMemory and NewRedis would: a retention
// under 1 ms, a lease under 3 ms or above the retention, a negative MaxResult, a Name or
// KeyPrefix with '{' or '}'. The error wraps redstream.ErrInvalidConfig.
func (o Options) Validate() error {
	_, err := o.resolved()
	return err
}

// resolved returns o with its defaults, or the error of its first invalid option.
func (o Options) resolved() (Options, error) {
	if o.Name == "" {
		o.Name = "default"
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Lease == 0 {
		o.Lease = min(DefaultLease, o.Retention)
	}
	if o.MaxResult == 0 {
		o.MaxResult = DefaultMaxResult
	}
	switch {
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	case o.Timeout < 0:
		o.Timeout = 0
	}
	switch {
	case o.Retention < time.Millisecond:
		return o, invalid("Retention = %v, want at least 1ms", o.Retention)
	case o.Lease < 3*time.Millisecond || o.Lease > o.Retention:
		return o, invalid("Lease = %v, want 3ms to Retention (%v)", o.Lease, o.Retention)
	case o.MaxResult < 0:
		return o, invalid("MaxResult = %d, want >= 0", o.MaxResult)
	case strings.ContainsAny(o.Name+o.KeyPrefix, "{}"):
		return o, invalid("Name %q and KeyPrefix %q may not contain '{' or '}' (the hash tag is the key's digest)", o.Name, o.KeyPrefix)
	}
	return o, nil
}

func newIdempotent(o Options, eng func(o Options) (engine, error)) (*Idempotent, error) {
	o, err := o.resolved()
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	e, err := eng(o)
	if err != nil {
		return nil, err
	}
	return &Idempotent{o: o, eng: e, m: newCounters(o.Name), log: o.Logger}, nil
}

// recordKey returns the record key of key: a digest, so that any key (any bytes, any
// length) makes a key of one hash slot.
func (i *Idempotent) recordKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return i.o.KeyPrefix + ":" + i.o.Name + ":{" + hex.EncodeToString(sum[:]) + "}"
}

// Do runs fn once per key within the retention window, and returns its result:
//
//   - the first call with key takes the key's lease and runs fn; when fn returns nil its
//     result is stored under key with fingerprint, and Do returns it;
//   - a later call with the same key and fingerprint does not run fn and returns the stored
//     result (Result.Replayed);
//   - a call while fn runs elsewhere returns ErrInFlight (or waits, with Options.Wait);
//   - a call with the same key and another fingerprint returns ErrMismatch;
//   - when fn returns an error, or panics, the key is released: Do returns fn's error (or
//     panics again) and the next call runs fn. A holder that crashes releases the key when
//     its lease runs out.
//
// The fingerprint identifies the request the key was made for (a digest of its payload);
// "" is a fingerprint like any other. fn receives a context cancelled with the caller's,
// and with ErrLeaseLost when a renewal finds the lease lost. When the result cannot be
// stored (the lease was lost, Redis failed, it exceeds Options.MaxResult) Do returns it with
// an error wrapping the reason: fn ran. A key that is empty is an error wrapping
// redstream.ErrEmptyKey. When Redis fails before fn runs, Do returns an error wrapping the
// backend's (redstream.ErrCircuitOpen when the breaker is open), unless Options.FailOpen.
func (i *Idempotent) Do(ctx context.Context, key, fingerprint string, fn func(ctx context.Context) ([]byte, error)) (Result, error) {
	if key == "" {
		return Result{}, fmt.Errorf("idempotency: %w", redstream.ErrEmptyKey)
	}
	rk := i.recordKey(key)
	token := newToken()
	wait, waited := 5*time.Millisecond, false
	for {
		rep, err := i.eng.acquire(ctx, rk, key, fingerprint, token, i.o.Lease, i.o.Retention)
		if err != nil {
			i.m.failures.Inc()
			if i.o.FailOpen && ctx.Err() == nil {
				v, ferr := fn(ctx)
				return Result{Value: v}, ferr
			}
			return Result{}, fmt.Errorf("idempotency: %w", err)
		}
		switch rep.code {
		case stDone:
			i.m.replayed.Inc()
			if rep.tooLarge {
				return Result{Replayed: true}, ErrTooLarge
			}
			return Result{Value: rep.value, Replayed: true}, nil
		case stMismatch:
			i.m.mismatched.Inc()
			return Result{}, ErrMismatch
		case stRunning:
			if !waited {
				i.m.conflicts.Inc()
				waited = true
			}
			if !i.o.Wait {
				return Result{}, ErrInFlight
			}
			t := time.NewTimer(min(wait, max(rep.left, time.Millisecond)))
			select {
			case <-ctx.Done():
				t.Stop()
				return Result{}, fmt.Errorf("%w (waited until %w)", ErrInFlight, ctx.Err())
			case <-t.C:
			}
			wait = min(2*wait, 100*time.Millisecond)
			continue
		case stTakeover:
			i.m.leaseExpired.Inc()
		}
		return i.run(ctx, rk, token, fn)
	}
}

// run runs fn under the lease of token on rk, renewing it, and stores its result.
func (i *Idempotent) run(ctx context.Context, rk, token string, fn func(ctx context.Context) ([]byte, error)) (Result, error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := i.keepAlive(fctx, rk, token, cancel)
	bg := context.WithoutCancel(ctx) // the outcome is written even when the caller gave up
	i.m.inflight.Inc()
	defer i.m.inflight.Dec()
	done := false
	defer func() {
		if !done { // fn panicked
			stop()
			_ = i.eng.release(bg, rk, token)
		}
	}()
	v, err := fn(fctx)
	done = true
	stop()
	if err != nil {
		if rerr := i.eng.release(bg, rk, token); rerr != nil {
			i.log.Warn("idempotency: could not release a key after its function failed; it stays in flight until its lease ends",
				"name", i.o.Name, "lease", i.o.Lease, "error", rerr)
		}
		return Result{}, err
	}
	tooLarge := len(v) > i.o.MaxResult
	stored := v
	if tooLarge {
		stored = nil
	}
	ok, err := i.eng.complete(bg, rk, token, stored, tooLarge, i.o.Retention)
	switch {
	case err != nil:
		i.m.failures.Inc()
		i.log.Warn("idempotency: could not store a result; the key stays in flight until its lease ends, then runs again",
			"name", i.o.Name, "lease", i.o.Lease, "error", err)
		return Result{Value: v}, fmt.Errorf("idempotency: storing the result: %w", err)
	case !ok:
		i.m.leaseExpired.Inc()
		return Result{Value: v}, ErrLeaseLost
	case tooLarge:
		i.m.stored.Inc()
		return Result{Value: v}, fmt.Errorf("%w: %d bytes, MaxResult %d", ErrTooLarge, len(v), i.o.MaxResult)
	}
	i.m.stored.Inc()
	return Result{Value: v}, nil
}

// keepAlive renews the lease of token on rk every Lease/3 until the returned stop is
// called, even after ctx ends (a function may outlive its caller's context, and while it
// runs its key must stay in flight); a renewal that finds the lease lost cancels fn's
// context with ErrLeaseLost. Renewals run on timers: no goroutine waits between them, and
// stop does not wait for one in progress (a renewal after the completion finds the key
// completed and changes nothing).
func (i *Idempotent) keepAlive(ctx context.Context, rk, token string, cancel context.CancelCauseFunc) (stop func()) {
	var (
		mu      sync.Mutex
		t       *time.Timer
		stopped bool
	)
	bg := context.WithoutCancel(ctx)
	renew := func() {
		ok, err := i.eng.renew(bg, rk, token, i.o.Lease)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stopped:
		case err == nil && !ok:
			cancel(ErrLeaseLost)
		default:
			t.Reset(i.o.Lease / 3)
		}
	}
	mu.Lock()
	t = time.AfterFunc(i.o.Lease/3, renew)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// newToken returns a random holder token.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// invalid is an error of an option: "idempotency: invalid configuration: <what>", matching
// redstream.ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return failure.Prefixed("idempotency", fmt.Errorf("%w: "+format, append([]any{redstream.ErrInvalidConfig}, args...)...))
}
