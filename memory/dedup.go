package memory

import (
	"fmt"

	"github.com/redstream-go/redstream"
)

// NewDeduplicator returns the in-memory deduplicator of spec.Strategy, with spec's zero
// fields replaced by their defaults (redstream.DedupSpec.WithDefaults):
//
//   - redstream.DedupSet: a [SetDeduplicator].
//   - redstream.DedupBloom: a [BloomDeduplicator] sized by spec.BloomParams (Insertions,
//     FPRate and Shards, the blocks the positions are computed in).
//   - redstream.DedupWindowed: a [WindowDeduplicator] of spec.Window; it implements
//     redstream.TimedDeduplicator.
//
// An unknown strategy or invalid parameters return an error wrapping
// redstream.ErrInvalidConfig.
func NewDeduplicator(spec redstream.DedupSpec, opts Options) (redstream.Deduplicator, error) {
	spec = spec.WithDefaults()
	var (
		d   redstream.Deduplicator
		err error
	)
	// Each case assigns only a non-nil engine, so d is never a typed nil.
	switch spec.Strategy {
	case redstream.DedupSet:
		var s *SetDeduplicator
		if s, err = NewSetDeduplicator(opts); err == nil {
			d = s
		}
	case redstream.DedupBloom:
		b, berr := spec.BloomParams()
		if berr != nil {
			return nil, fmt.Errorf("memory: %w", berr)
		}
		var bf *BloomDeduplicator
		if bf, err = newBloom(b, opts); err == nil {
			d = bf
		}
	case redstream.DedupWindowed:
		var w *WindowDeduplicator
		if w, err = NewWindowDeduplicator(spec.Window, opts); err == nil {
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
