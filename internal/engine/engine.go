// Package engine is the in-process kernel shared by redstream's in-process engines (package
// memory, which steps with core natively, and package wasmcore, which steps in a WebAssembly
// instance): the sharded key table and its sweep, the clock, the request checks, and one
// all-or-nothing driver over []core.Limit, generic over who steps ([Stepper]).
//
// An engine is a thin constructor over it: it validates its options into a [Config], builds
// a [Limiter] from the specs' core limits and decides each request with its own Stepper.
// The token and leaky bucket of a single-limit native limiter keep their lock-free
// compare-and-swap path ([Buckets]), the one concrete fast path (its table, gcraShaping,
// is keyed by algorithm and optional); every other single native limit is stepped in place
// with core.Limit.StepState. Every path writes its decision through a pointer
// (DecideInto; see convert for why).
package engine

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/failure"
)

// Defaults of Options.
const (
	// DefaultShards is the number of shards of every table when Options.Shards is 0.
	DefaultShards = 64
	// DefaultSweepThreshold is the number of keys a shard may hold before its first sweep
	// when Options.SweepThreshold is 0 (the Java starter's DEFAULT_SWEEP_THRESHOLD).
	DefaultSweepThreshold = 256
	// MaxShards is the largest accepted Options.Shards.
	MaxShards = 1 << 16
)

// Options are the kernel's settings, as the engines' Options spell them.
type Options struct {
	Clock          func() time.Time
	Shards         int
	SweepThreshold int
}

// Config is Options after defaults and validation.
type Config struct {
	clock          func() time.Time // nil: MonoMicros
	Shards         int
	SweepThreshold int
}

// Resolve applies the defaults to o and validates it; pkg prefixes the error, which wraps
// redstream.ErrInvalidConfig and names the field.
func Resolve(pkg string, o Options) (Config, error) {
	c := Config{clock: o.Clock, Shards: o.Shards, SweepThreshold: o.SweepThreshold}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.SweepThreshold == 0 {
		c.SweepThreshold = DefaultSweepThreshold
	}
	if c.Shards < 1 || c.Shards > MaxShards || bits.OnesCount(uint(c.Shards)) != 1 {
		return c, fmt.Errorf("%s: %w: Shards = %d, want a power of two in [1, %d]", pkg, redstream.ErrInvalidConfig, o.Shards, MaxShards)
	}
	if c.SweepThreshold < 1 {
		return c, fmt.Errorf("%s: %w: SweepThreshold = %d, want at least 1", pkg, redstream.ErrInvalidConfig, o.SweepThreshold)
	}
	return c, nil
}

// Micros converts now to core microseconds, reading the clock for the zero time. It does
// not validate the result; core's steps do.
func (c *Config) Micros(now time.Time) int64 {
	if !now.IsZero() {
		return now.UnixMicro()
	}
	if c.clock == nil {
		return MonoMicros()
	}
	return c.clock().UnixMicro()
}

// Now reads the clock in core microseconds: MonoMicros, or Options.Clock when set.
func (c *Config) Now() int64 {
	if c.clock == nil {
		return MonoMicros()
	}
	return c.clock().UnixMicro()
}

// MicrosOf converts t to core microseconds since the Unix epoch; the zero time maps to 0,
// which a Redis engine reads as "use the server's clock".
func MicrosOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// CheckRequest validates the arguments shared by every limiter call: a non-empty key, a
// positive cost and, unless now is zero, a time in [Unix epoch, core.MaxTime]. Every
// engine calls it first, so every engine reports the same error for the same bad input.
func CheckRequest(key string, now time.Time, n int64) error {
	if key == "" {
		return redstream.ErrEmptyKey
	}
	if n <= 0 {
		return core.ErrInvalidCost
	}
	if !now.IsZero() {
		return coreops.CheckTime(now.UnixMicro())
	}
	return nil
}

// Decision converts a core decision (microseconds) into a redstream.Decision.
func Decision(d core.Decision) redstream.Decision {
	var out redstream.Decision
	convert(&out, &d)
	return out
}

// coreOf is the inverse of convert (exact: the durations are whole microseconds).
func coreOf(d *redstream.Decision) core.Decision {
	return core.Decision{
		Allowed:    d.Allowed,
		Limit:      d.Limit,
		Remaining:  d.Remaining,
		RetryAfter: d.RetryAfter.Microseconds(),
		ResetAfter: d.ResetAfter.Microseconds(),
		Delay:      d.Delay.Microseconds(),
	}
}

// convert is Decision from *d into *out, field by field. The kernel's paths work on
// pointers because a Decision is too large to live in registers: Go returns one by storing
// it field by field and copying it on 16 bytes at a time, and such a copy of a value just
// stored stalls on store-to-load forwarding (about 4 ns, at every call layer it crosses).
func convert(out *redstream.Decision, d *core.Decision) {
	out.Allowed = d.Allowed
	out.Limit = d.Limit
	out.Remaining = d.Remaining
	out.RetryAfter = time.Duration(d.RetryAfter) * time.Microsecond
	out.ResetAfter = time.Duration(d.ResetAfter) * time.Microsecond
	out.Delay = time.Duration(d.Delay) * time.Microsecond
}

// Limits validates specs (at least one) into core limits; pkg prefixes the errors that do
// not carry the root's prefix already (failure.Prefixed), which name the spec when there
// are several.
func Limits(pkg string, specs []redstream.Spec) ([]core.Limit, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s: %w: no specs", pkg, redstream.ErrInvalidConfig)
	}
	ls := make([]core.Limit, len(specs))
	for i, s := range specs {
		l, err := s.Core()
		if err != nil {
			if len(specs) > 1 {
				err = fmt.Errorf("%w (specs[%d])", err, i)
			}
			return nil, failure.Prefixed(pkg, err)
		}
		ls[i] = l
	}
	return ls, nil
}
