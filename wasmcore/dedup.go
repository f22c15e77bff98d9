package wasmcore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
)

// maxBloomBits is the largest Bloom filter (all shards together) a Deduplicator holds in
// host memory: 2^34 bits, 2 GiB.
const maxBloomBits = 1 << 34

// Deduplicator is a deduplicator for any [redstream.DedupStrategy]:
//
//   - windowed: every answer (duplicate or not, and the effective time to record) is
//     computed by the module's redstream_window_dedup_check step; the last-seen time of each
//     element and the high-water mark live on the host. Expired entries are pruned by
//     amortized sweeping. It implements [redstream.TimedDeduplicator].
//   - bloom: the shard and bit positions of each element come from the module's
//     redstream_bloom_positions step (MurmurHash3 x64 128 and double hashing, see
//     core.Bloom); the bits live on the host, allocated per shard on first write.
//     UniqueCount counts the adds that set at least one new bit.
//   - set: exact, kept on the host (set membership has no core step, so no module call is
//     made); UniqueCount is exact.
//
// The empty element is never a duplicate and is never recorded. A Deduplicator is safe for
// concurrent use; CheckAndMark is atomic per element. Its zero value is not usable; call
// [NewDeduplicator].
type Deduplicator struct {
	strategy redstream.DedupStrategy
	opts     resolved

	// windowed
	window int64
	high   atomic.Int64
	last   engine.Table[int64]

	// bloom
	bloom  core.Bloom
	blocks []bloomBlock
	unique atomic.Int64

	// set
	set engine.Table[struct{}]
}

// bloomBlock is one shard of a Bloom filter; words is nil until the first write.
type bloomBlock struct {
	mu    sync.Mutex
	words []uint64
	_     [64 - 8 - 24]byte
}

var (
	_ redstream.Deduplicator      = (*Deduplicator)(nil)
	_ redstream.TimedDeduplicator = (*Deduplicator)(nil)
)

// NewDeduplicator returns a deduplicator for spec (zero fields take the defaults of
// redstream.DedupSpec). It returns an error wrapping redstream.ErrInvalidConfig when spec or
// opts is invalid or a Bloom filter would exceed 2^34 bits. The Bloom filter's sizing is
// computed by the module's redstream_bloom_params step.
func NewDeduplicator(spec redstream.DedupSpec, opts Options) (*Deduplicator, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("wasmcore: %w", err)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	d := &Deduplicator{strategy: spec.Strategy, opts: r}
	spec = spec.WithDefaults()
	switch spec.Strategy {
	case redstream.DedupWindowed:
		d.window = spec.Window.Microseconds()
		d.last = engine.NewTable[int64](r.cfg)
	case redstream.DedupBloom:
		in, err := r.rt.acquire(context.Background())
		if err != nil {
			return nil, err
		}
		b, err := in.bloomParams(context.Background(), spec.Insertions, spec.FPRate, int32(spec.Shards))
		r.rt.release(in)
		if err != nil {
			return nil, err
		}
		if b.ShardBits*uint64(b.Shards) > maxBloomBits {
			return nil, fmt.Errorf("wasmcore: %w: a Bloom filter of %d bits exceeds %d", errInvalidConfig, b.ShardBits*uint64(b.Shards), uint64(maxBloomBits))
		}
		d.bloom = b
		d.blocks = make([]bloomBlock, b.Shards)
	default:
		d.set = engine.NewTable[struct{}](r.cfg)
	}
	return d, nil
}

// Strategy returns the deduplicator's strategy.
func (d *Deduplicator) Strategy() redstream.DedupStrategy { return d.strategy }

// IsDuplicate is shorthand for IsDuplicateAt(ctx, element, time.Time{}).
func (d *Deduplicator) IsDuplicate(ctx context.Context, element string) (bool, error) {
	return d.IsDuplicateAt(ctx, element, time.Time{})
}

// MarkSeen records element as seen at Options.Clock: CheckAndMarkAt(ctx, element,
// time.Time{}) without its answer.
func (d *Deduplicator) MarkSeen(ctx context.Context, element string) error {
	_, err := d.op(ctx, element, time.Time{}, true, false)
	return err
}

// CheckAndMark is shorthand for CheckAndMarkAt(ctx, element, time.Time{}).
func (d *Deduplicator) CheckAndMark(ctx context.Context, element string) (bool, error) {
	return d.CheckAndMarkAt(ctx, element, time.Time{})
}

// IsDuplicateAt reports whether element was seen (and, for the windowed strategy, is still
// within its window at now; the zero time means Options.Clock), without recording it. now
// is ignored by the other strategies. A windowed deduplicator returns an error wrapping
// redstream.ErrInvalidTime for a time outside [Unix epoch, core.MaxTime].
func (d *Deduplicator) IsDuplicateAt(ctx context.Context, element string, now time.Time) (bool, error) {
	return d.op(ctx, element, now, false, true)
}

// CheckAndMarkAt atomically reports whether element is a duplicate at now and records it
// (see IsDuplicateAt).
func (d *Deduplicator) CheckAndMarkAt(ctx context.Context, element string, now time.Time) (bool, error) {
	return d.op(ctx, element, now, true, true)
}

func (d *Deduplicator) op(ctx context.Context, element string, now time.Time, mark, check bool) (bool, error) {
	if element == "" {
		return false, nil
	}
	switch d.strategy {
	case redstream.DedupWindowed:
		return d.windowed(ctx, element, now, mark)
	case redstream.DedupBloom:
		return d.bloomOp(ctx, element, mark)
	}
	s, tag := d.set.Locate(element)
	s.Lock()
	i, dup := s.Find(element, tag)
	if mark && !dup {
		d.set.Insert(s, i, element, tag, struct{}{}, nil)
		d.unique.Add(1)
	}
	s.Unlock()
	return dup, nil
}

func (d *Deduplicator) windowed(ctx context.Context, element string, now time.Time, mark bool) (bool, error) {
	t := d.opts.micros(now)
	if err := coreops.CheckTime(t); err != nil {
		return false, fmt.Errorf("wasmcore: %w", err)
	}
	in, err := d.opts.rt.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer d.opts.rt.release(in)
	s, tag := d.last.Locate(element)
	s.Lock()
	defer s.Unlock()
	i, seen := s.Find(element, tag)
	var last int64
	if seen {
		last = *s.Val(i)
	}
	dup, eff, err := in.windowDedupCheck(ctx, d.window, d.high.Load(), last, seen, t)
	if err != nil || !mark {
		return dup, err
	}
	if seen {
		*s.Val(i) = eff
	} else {
		w := d.window
		d.last.Insert(s, i, element, tag, eff, func(v int64) bool { return v <= eff-w }) // WindowDedup.Expired
	}
	for {
		h := d.high.Load()
		if eff <= h || d.high.CompareAndSwap(h, eff) {
			break
		}
	}
	return dup, nil
}

func (d *Deduplicator) bloomOp(ctx context.Context, element string, mark bool) (bool, error) {
	in, err := d.opts.rt.acquire(ctx)
	if err != nil {
		return false, err
	}
	var buf [16]uint64
	shard, pos, err := in.bloomPositions(ctx, d.bloom, []byte(element), buf[:0])
	d.opts.rt.release(in)
	if err != nil {
		return false, err
	}
	b := &d.blocks[shard]
	b.mu.Lock()
	defer b.mu.Unlock()
	dup := b.words != nil
	for _, p := range pos {
		if dup && b.words[p/64]&(1<<(p%64)) == 0 {
			dup = false
		}
	}
	if !mark || dup {
		return dup, nil
	}
	if b.words == nil {
		b.words = make([]uint64, (d.bloom.ShardBits+63)/64)
	}
	set := false
	for _, p := range pos {
		w := &b.words[p/64]
		if *w&(1<<(p%64)) == 0 {
			*w |= 1 << (p % 64)
			set = true
		}
	}
	if set {
		d.unique.Add(1)
	}
	return false, nil
}

// Clear forgets every element (and resets the windowed strategy's high-water mark).
func (d *Deduplicator) Clear(ctx context.Context) error {
	switch d.strategy {
	case redstream.DedupWindowed:
		d.last.Clear()
		d.high.Store(0)
	case redstream.DedupBloom:
		for i := range d.blocks {
			b := &d.blocks[i]
			b.mu.Lock()
			b.words = nil
			b.mu.Unlock()
		}
		d.unique.Store(0)
	default:
		d.set.Clear()
		d.unique.Store(0)
	}
	return nil
}

// UniqueCount returns, for the set strategy, the exact number of distinct elements; for
// the Bloom strategy, the number of adds that set at least one new bit (an element whose
// bits were all set by others is not counted); for the windowed strategy, the number of
// elements not expired at the effective time of Options.Clock's now.
func (d *Deduplicator) UniqueCount(ctx context.Context) (int64, error) {
	if d.strategy != redstream.DedupWindowed {
		return d.unique.Load(), nil
	}
	t := max(d.high.Load(), d.opts.micros(time.Time{}))
	var n int64
	for i := range d.last.Shards() {
		s := d.last.Shard(i)
		s.Lock()
		s.Each(func(last *int64) {
			if *last > t-d.window { // not WindowDedup.Expired
				n++
			}
		})
		s.Unlock()
	}
	return n, nil
}
