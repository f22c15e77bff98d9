package memory

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/failure"
)

// MaxBloomBits is the largest in-memory Bloom filter (all shards together, in bits)
// NewDeduplicator accepts: 2^33 bits, 1 GiB, about 1.2 billion expected insertions at a
// 1% false-positive rate. A larger request is almost always a typo, and would take the
// memory at construction.
const MaxBloomBits = 1 << 33

// bloomDedup is a probabilistic deduplicator: a Bloom filter in an in-memory bitset,
// sized and addressed exactly as core.Bloom defines (MurmurHash3 x64_128 positions, split
// into core.Bloom.Shards blocks), so it sets the same bits as a Redis engine given the same
// parameters. It never forgets an element (no false negatives) and reports a never-seen
// element as a duplicate with probability about the false-positive rate once it holds its
// expected number of insertions.
//
// Bits are read and set with atomic operations; MarkSeen and CheckAndMark of one element
// are serialized by a lock chosen by the element, so of several goroutines marking the same
// new element exactly one sees it as new. The empty element is never a duplicate and is
// never recorded.
//
// A bloomDedup is safe for concurrent use. NewDeduplicator builds it.
type bloomDedup struct {
	b         core.Bloom
	words     []uint64 // shard s occupies words[s*shardWords : (s+1)*shardWords]
	shardWrds uint64
	stripes   []stripe
	mask      uint64
	adds      atomic.Int64
}

// stripe is one lock of a bloomDedup, padded to a cache line.
type stripe struct {
	mu sync.Mutex
	_  [64 - 8]byte
}

var _ redstream.Deduplicator = (*bloomDedup)(nil)

// newBloomDedup returns an empty Bloom filter deduplicator sized by spec's
// Insertions, FPRate and Shards (zero fields take redstream's defaults: 1,000,000 at 0.03,
// one shard), as every engine's newBloomDedup. spec.Strategy must be
// redstream.DedupBloom or empty. Of opts only Shards is used, as the number of locks. It
// returns an error wrapping redstream.ErrInvalidConfig for bad parameters or a filter above
// MaxBloomBits.
func newBloomDedup(spec redstream.DedupSpec, opts Options) (*bloomDedup, error) {
	if spec.Strategy != "" && spec.Strategy != redstream.DedupBloom {
		return nil, fmt.Errorf("memory: %w: strategy %q is not %q", redstream.ErrInvalidConfig, spec.Strategy, redstream.DedupBloom)
	}
	b, err := spec.BloomParams()
	if err != nil {
		return nil, failure.Prefixed("memory", err)
	}
	return newBloom(b, opts)
}

func newBloom(b core.Bloom, opts Options) (*bloomDedup, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	wps := (b.ShardBits + 63) / 64
	if wps*uint64(b.Shards) > MaxBloomBits/64 {
		return nil, fmt.Errorf("memory: %w: a Bloom filter of %d bits exceeds MaxBloomBits", redstream.ErrInvalidConfig, b.Bits)
	}
	return &bloomDedup{
		b:         b,
		words:     make([]uint64, wps*uint64(b.Shards)),
		shardWrds: wps,
		stripes:   make([]stripe, r.Shards),
		mask:      uint64(r.Shards - 1),
	}, nil
}

// params returns the filter's core parameters (sizing, hash functions, shards).
func (d *bloomDedup) params() core.Bloom { return d.b }

// locate returns the element's word base and bit positions, using buf when it is large
// enough.
func (d *bloomDedup) locate(element string, buf []uint64) (uint64, []uint64) {
	shard, pos := d.b.Locate(unsafe.Slice(unsafe.StringData(element), len(element)), buf[:0])
	return uint64(shard) * d.shardWrds, pos
}

// contains reports whether every bit of the element is set.
func (d *bloomDedup) contains(base uint64, pos []uint64) bool {
	for _, p := range pos {
		if atomic.LoadUint64(&d.words[base+p/64])&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// add sets the element's bits, under the element's stripe lock, and reports whether any bit
// changed (the element was new); it counts the add if so.
func (d *bloomDedup) add(element string) bool {
	var buf [32]uint64
	base, pos := d.locate(element, buf[:])
	st := &d.stripes[pos[0]&d.mask]
	st.mu.Lock()
	changed := false
	for _, p := range pos {
		bit := uint64(1) << (p % 64)
		if atomic.OrUint64(&d.words[base+p/64], bit)&bit == 0 {
			changed = true
		}
	}
	if changed {
		d.adds.Add(1)
	}
	st.mu.Unlock()
	return changed
}

// IsDuplicate reports whether every bit of element is set: true for every recorded element
// and, with about the false-positive rate, for some others. It never returns an error.
func (d *bloomDedup) IsDuplicate(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	var buf [32]uint64
	base, pos := d.locate(element, buf[:])
	return d.contains(base, pos), nil
}

// MarkSeen sets element's bits. It never returns an error.
func (d *bloomDedup) MarkSeen(ctx context.Context, element string) error {
	if element != "" {
		d.add(element)
	}
	return nil
}

// CheckAndMark sets element's bits and reports whether they were all set already (a
// duplicate, or a false positive). It never returns an error.
func (d *bloomDedup) CheckAndMark(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	return !d.add(element), nil
}

// Clear resets every bit and the count of adds. It never returns an error.
func (d *bloomDedup) Clear(ctx context.Context) error {
	for i := range d.stripes {
		d.stripes[i].mu.Lock()
	}
	for i := range d.words {
		atomic.StoreUint64(&d.words[i], 0)
	}
	d.adds.Store(0)
	for i := range d.stripes {
		d.stripes[i].mu.Unlock()
	}
	return nil
}

// UniqueCount returns the number of adds (MarkSeen or CheckAndMark) on this instance that
// set at least one bit since the last Clear: the elements it took as new. It is at most the
// true number of distinct elements (a false positive is not counted). It never returns an
// error. For the filter's own estimate see estimate.
func (d *bloomDedup) UniqueCount(ctx context.Context) (int64, error) {
	return d.adds.Load(), nil
}

// estimate estimates the number of distinct elements in the filter from its set bits
// (core.Bloom.EstimateCount, summed over the blocks). It reads every word of the filter.
func (d *bloomDedup) estimate() int64 {
	var total int64
	for s := 0; s < d.b.Shards; s++ {
		var ones uint64
		base := uint64(s) * d.shardWrds
		for i := base; i < base+d.shardWrds; i++ {
			ones += uint64(bits.OnesCount64(atomic.LoadUint64(&d.words[i])))
		}
		c := d.b.EstimateCount(ones)
		if c == core.MaxCount || total > core.MaxCount-c {
			return core.MaxCount
		}
		total += c
	}
	return total
}
