package memory

import (
	"fmt"

	"github.com/redstream-go/redstream"
)

// NewDeduplicator returns the in-memory deduplicator of spec.Strategy, with spec's zero
// fields replaced by their defaults (redstream.DedupSpec.WithDefaults):
//
//   - redstream.DedupSet: exact; it remembers every element until Clear, in a sharded map
//     (of opts only Shards is used), so its memory grows with the distinct elements.
//   - redstream.DedupBloom: a Bloom filter sized by spec.BloomParams (Insertions, FPRate
//     and Shards, the blocks the positions are computed in), with core's bit positions, so
//     it sets the bits a Redis engine of the same spec sets; fixed memory (at most
//     MaxBloomBits), no false negatives, false positives at about FPRate once it holds
//     Insertions elements. UniqueCount is the number of adds that set a bit (the elements
//     it took as new) since the last Clear. Of opts only Shards is used, as its locks.
//   - redstream.DedupWindowed: forgets an element spec.Window after it was last seen
//     (core.WindowDedup): a sighting is a duplicate iff the element was seen less than
//     Window ago, and CheckAndMark refreshes the last-seen time of a duplicate too.
//     Expired elements are pruned by the sweep of Options.SweepThreshold and by
//     UniqueCount. It keeps a high-water mark, the latest time a write used, and runs every
//     operation at max(mark, now), so a clock going backwards never brings an expired
//     element back. It implements redstream.TimedDeduplicator.
//
// Each is safe for concurrent use, and CheckAndMark is atomic: of several goroutines
// marking the same new element exactly one sees it as new. The empty element is never a
// duplicate and is never recorded. An unknown strategy or invalid parameters return an
// error wrapping redstream.ErrInvalidConfig.
func NewDeduplicator(spec redstream.DedupSpec, opts Options) (redstream.Deduplicator, error) {
	spec = spec.WithDefaults()
	var (
		d   redstream.Deduplicator
		err error
	)
	// Each case assigns only a non-nil engine, so d is never a typed nil.
	switch spec.Strategy {
	case redstream.DedupSet:
		var s *setDedup
		if s, err = newSetDedup(opts); err == nil {
			d = s
		}
	case redstream.DedupBloom:
		b, berr := spec.BloomParams()
		if berr != nil {
			return nil, fmt.Errorf("memory: %w", berr)
		}
		var bf *bloomDedup
		if bf, err = newBloom(b, opts); err == nil {
			d = bf
		}
	case redstream.DedupWindowed:
		var w *windowDedup
		if w, err = newWindowDedup(spec.Window, opts); err == nil {
			d = w
		}
	default:
		err = fmt.Errorf("memory: %w: unknown deduplication strategy %q", redstream.ErrInvalidConfig, spec.Strategy)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}
