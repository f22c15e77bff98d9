package wasmcore

import (
	"time"

	"github.com/redstream-go/redstream/internal/engine"
)

// Defaults of Options.
const (
	// DefaultShards is the number of shards of the engines' host-side tables.
	DefaultShards = engine.DefaultShards
	// DefaultSweepThreshold is the number of keys a shard may hold before its first sweep.
	DefaultSweepThreshold = engine.DefaultSweepThreshold
)

// Options configures an engine. The zero value means the defaults.
type Options struct {
	// Runtime is the pool of module instances the engine decides with. Engines may share
	// one Runtime; the engine does not close it. Default: the process-wide [Default].
	Runtime *Runtime
	// Clock is read when a call passes the zero time.Time. Default time.Now. Times it
	// returns must lie in [Unix epoch, core.MaxTime].
	Clock func() time.Time
	// Shards is the number of independently locked parts of the engine's host-side state
	// (per-key states, per-element last-seen times), a power of two in [1, 65536].
	// Default DefaultShards.
	Shards int
	// SweepThreshold is the number of keys a shard may hold before it is first swept for
	// keys whose state has fully recovered (limiters) or expired (windowed deduplicator);
	// after a sweep the mark is max(SweepThreshold, 2 × keys left). At least 1. Default
	// DefaultSweepThreshold.
	SweepThreshold int
}

// resolved is Options after defaults and validation.
type resolved struct {
	rt  *Runtime
	cfg engine.Config
}

func (o Options) resolve() (resolved, error) {
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	c, err := engine.Resolve("wasmcore", engine.Options{Clock: clock, Shards: o.Shards, SweepThreshold: o.SweepThreshold})
	if err != nil {
		return resolved{}, err
	}
	r := resolved{rt: o.Runtime, cfg: c}
	if r.rt == nil {
		rt, err := Default()
		if err != nil {
			return r, err
		}
		r.rt = rt
	}
	return r, nil
}

// micros converts now to core microseconds, reading the clock for the zero time.
func (r *resolved) micros(now time.Time) int64 { return r.cfg.Micros(now) }
