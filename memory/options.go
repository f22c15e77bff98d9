package memory

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/redstream-go/redstream"
)

// Defaults of Options.
const (
	// DefaultShards is the number of shards of every map when Options.Shards is 0.
	DefaultShards = 64
	// DefaultSweepThreshold is the number of keys a shard may hold before its first sweep
	// when Options.SweepThreshold is 0 (the seed's DEFAULT_SWEEP_THRESHOLD).
	DefaultSweepThreshold = 256
	// MaxShards is the largest accepted Options.Shards.
	MaxShards = 1 << 16
)

// Options configures every engine of this package. The zero value means the defaults.
type Options struct {
	// Clock is the engine's clock, read when a call passes the zero time.Time. Times it
	// returns must lie in [Unix epoch, core.MaxTime].
	//
	// Default (nil): time.Now's own monotonic clock, anchored to the wall clock once when the
	// package is initialized. It reads like time.Now but costs about half as much, and it
	// never jumps when the system clock is stepped (a step forward would otherwise refill
	// every bucket; a step back would freeze them). Set Clock to time.Now to follow such
	// steps.
	Clock func() time.Time

	// Shards is the number of independently locked parts each map is split into, a power of
	// two in [1, MaxShards]. More shards mean less lock contention between goroutines
	// working on different keys. Default DefaultShards.
	Shards int

	// SweepThreshold is the number of keys a shard may hold before it is first swept for
	// keys whose state has fully recovered (limiters) or expired (windowed deduplicator).
	// A shard is swept when a new key arrives and the shard already holds its mark of keys;
	// the mark starts at SweepThreshold and after each sweep is set to
	// max(SweepThreshold, 2 × keys left). Sweeping thus costs O(1) amortized per new key
	// and a shard never holds more than about twice its live keys (or SweepThreshold).
	// At least 1. Default DefaultSweepThreshold.
	SweepThreshold int
}

// resolved is Options after defaults and validation.
type resolved struct {
	clock     func() time.Time // nil: monoMicros
	shards    int
	threshold int
}

func (o Options) resolve() (resolved, error) {
	r := resolved{clock: o.Clock, shards: o.Shards, threshold: o.SweepThreshold}
	if r.shards == 0 {
		r.shards = DefaultShards
	}
	if r.threshold == 0 {
		r.threshold = DefaultSweepThreshold
	}
	if r.shards < 1 || r.shards > MaxShards || bits.OnesCount(uint(r.shards)) != 1 {
		return r, fmt.Errorf("memory: %w: Shards = %d, want a power of two in [1, %d]", redstream.ErrInvalidConfig, o.Shards, MaxShards)
	}
	if r.threshold < 1 {
		return r, fmt.Errorf("memory: %w: SweepThreshold = %d, want at least 1", redstream.ErrInvalidConfig, o.SweepThreshold)
	}
	return r, nil
}

// micros converts now to core microseconds, reading the clock for the zero time. It does
// not validate the result; core's steps do.
func (r *resolved) micros(now time.Time) int64 {
	if !now.IsZero() {
		return now.UnixMicro()
	}
	if r.clock == nil {
		return monoMicros()
	}
	return r.clock().UnixMicro()
}
