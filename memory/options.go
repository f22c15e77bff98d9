package memory

import (
	"time"

	"github.com/redstream-go/redstream/internal/engine"
)

// Defaults of Options.
const (
	// DefaultShards is the number of shards of every map when Options.Shards is 0.
	DefaultShards = engine.DefaultShards
	// DefaultSweepThreshold is the number of keys a shard may hold before its first sweep
	// when Options.SweepThreshold is 0 (the Java starter's DEFAULT_SWEEP_THRESHOLD).
	DefaultSweepThreshold = engine.DefaultSweepThreshold
	// MaxShards is the largest accepted Options.Shards.
	MaxShards = engine.MaxShards
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

// resolve validates o into the kernel's configuration.
func (o Options) resolve() (engine.Config, error) {
	return engine.Resolve("memory", engine.Options{Clock: o.Clock, Shards: o.Shards, SweepThreshold: o.SweepThreshold})
}
