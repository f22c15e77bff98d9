package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/failure"
)

// bloomDedup is a Bloom filter on plain Redis strings (no module): sized by core.Bloom
// from the expected insertions n and false-positive rate p, with bit positions computed in
// the client (MurmurHash3 x64 128 double hashing, so any runtime can compute the same bits)
// and set by a script that checks and adds atomically: of two clients racing on the same
// new element exactly one is told it is new. It has no false negatives; a new element is
// reported as a duplicate with probability about p once n elements are in.
//
// A filter is split into Shards keys (core.Bloom: raised automatically when one shard would
// exceed a Redis string's 2^32 bits); each shard key has its own hash tag, so the shards of
// a large filter spread over a cluster. An element lives in one shard, so checking or adding
// it touches one key. Keys carry the sizing, so a filter re-created with other parameters
// starts empty instead of misreading old bits. It is safe for concurrent use.
type bloomDedup struct {
	dedupBase
	bloom  core.Bloom
	keys   []string // one per shard
	kArg   string
	unique atomic.Int64
	gather *dedupGather // nil: every CheckAndMark is its own call
}

var _ redstream.Deduplicator = (*bloomDedup)(nil)

// newBloomDeduplicator returns the Bloom deduplicator named name sized by spec's
// Insertions, FPRate and Shards (zero fields take redstream's defaults: 1,000,000 at 0.03,
// one shard). spec.Strategy must be redstream.DedupBloom or empty. Insertions must be
// positive and FPRate in (0, 1), else an error wrapping redstream.ErrInvalidConfig. The
// client stays the caller's.
func newBloomDeduplicator(client rueidis.Client, name string, spec redstream.DedupSpec, opts DedupOptions) (*bloomDedup, error) {
	if spec.Strategy != "" && spec.Strategy != redstream.DedupBloom {
		return nil, fmt.Errorf("redisbackend: %w: strategy %q is not %q", errInvalidConfig, spec.Strategy, redstream.DedupBloom)
	}
	b, err := newDedupBase(client, name, "bloom", opts)
	if err != nil {
		return nil, err
	}
	if opts.JavaCompatible {
		_, err := javaDedupKey(name, redstream.DedupBloom, opts)
		return nil, err
	}
	return newBloomDedup(b, spec)
}

func newBloomDedup(b dedupBase, spec redstream.DedupSpec) (*bloomDedup, error) {
	name := b.name
	p, err := spec.BloomParams()
	if err != nil {
		return nil, failure.Prefixed("redisbackend", err)
	}
	d := &bloomDedup{dedupBase: b, bloom: p, kArg: strconv.Itoa(p.K)}
	role := bloomRole(p.K, p.ShardBits, p.Shards)
	for i := 0; i < p.Shards; i++ {
		d.keys = append(d.keys, bloomShardKey(b.prefix, name, role, p.Shards, i))
	}
	d.route = d.keys[0] // calls span the shards: they are judged by the first shard's master
	d.gather = newDedupGather(b, d.gathered, scriptBloomAdd.wrap)
	return d, nil
}

// Params returns the filter's sizing: K hash functions, Bits in total, Shards of ShardBits.
func (d *bloomDedup) Params() core.Bloom { return d.bloom }

// BitsPerElement returns the filter's bits per expected insertion, m/n.
func (d *bloomDedup) BitsPerElement() float64 {
	return float64(d.bloom.Bits) / float64(d.bloom.Insertions)
}

// Keys returns the Redis keys of the shards, in shard order.
func (d *bloomDedup) Keys() []string { return append([]string(nil), d.keys...) }

// IsDuplicate reports whether every bit of element is set (read-only, EVALSHA_RO): false
// means certainly never added. The empty element never is.
func (d *bloomDedup) IsDuplicate(ctx context.Context, element string) (bool, error) {
	r, err := d.IsDuplicateBatch(ctx, []string{element})
	if err != nil {
		return false, err
	}
	return r[0], nil
}

// MarkSeen adds element. The empty element is never added.
func (d *bloomDedup) MarkSeen(ctx context.Context, element string) error {
	_, err := d.CheckAndMark(ctx, element)
	return err
}

// CheckAndMark adds element and reports whether it was already present (every bit set),
// atomically. The empty element is never a duplicate and never added.
func (d *bloomDedup) CheckAndMark(ctx context.Context, element string) (bool, error) {
	if g := d.gather; g != nil && element != "" { // coalesced checks (dedupcoalesce.go)
		if w := g.check(element, ""); w != nil {
			return g.answer(ctx, w)
		}
		defer g.done()
	}
	r, err := d.checkAndMark(ctx, []string{element}, 1)
	if err != nil {
		return false, err
	}
	return r[0], nil
}

// gathered checks and marks the elements of a gathering (dedupcoalesce.go).
func (d *bloomDedup) gathered(ws []*dedupWaiter, k int) {
	elems := make([]string, len(ws))
	for i, w := range ws {
		elems[i] = w.q.elem
	}
	dups, err := d.checkAndMark(context.Background(), elems, k)
	fill(ws, dups, err)
}

// CheckAndMarkBatch is CheckAndMark of every element, in order, in one round trip: one
// script call per shard touched, pipelined. Result i is for elements[i].
func (d *bloomDedup) CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error) {
	return d.checkAndMark(ctx, elements, 1)
}

// checkAndMark is CheckAndMarkBatch in a call bounded by k timeouts.
func (d *bloomDedup) checkAndMark(ctx context.Context, elements []string, k int) ([]bool, error) {
	out, err := d.run(ctx, scriptBloomAdd, elements, k)
	if err != nil {
		return nil, err
	}
	added := int64(0)
	for i, dup := range out {
		if !dup && elements[i] != "" {
			added++
		}
	}
	d.unique.Add(added)
	return out, nil
}

// IsDuplicateBatch is IsDuplicate of every element in one round trip.
func (d *bloomDedup) IsDuplicateBatch(ctx context.Context, elements []string) ([]bool, error) {
	return d.run(ctx, scriptBloomExists, elements, 1)
}

// run sends the positions of elements, grouped by shard, to s and maps the replies back, in
// a call bounded by k timeouts.
func (d *bloomDedup) run(ctx context.Context, s *script, elements []string, k int) ([]bool, error) {
	out := make([]bool, len(elements))
	type group struct {
		idx  []int
		args []string
	}
	groups := make(map[int]*group)
	order := make([]int, 0, 1)
	pos := make([]uint64, 0, d.bloom.K)
	for i, e := range elements {
		if e == "" {
			continue
		}
		var shard int
		shard, pos = d.bloom.Locate([]byte(e), pos[:0])
		g := groups[shard]
		if g == nil {
			g = &group{args: []string{d.kArg}}
			groups[shard] = g
			order = append(order, shard)
		}
		g.idx = append(g.idx, i)
		for _, p := range pos {
			g.args = append(g.args, strconv.FormatUint(p, 10))
		}
	}
	if len(order) == 0 {
		return out, nil
	}
	calls := make([]rueidis.LuaExec, len(order))
	for j, shard := range order {
		calls[j] = rueidis.LuaExec{Keys: []string{d.keys[shard]}, Args: groups[shard].args}
	}
	err := d.doN(ctx, k, func(ctx context.Context, c rueidis.Client, cp *caps) error {
		var res []rueidis.RedisResult
		if len(calls) == 1 {
			res = []rueidis.RedisResult{s.exec(ctx, c, cp, calls[0].Keys, calls[0].Args)}
		} else {
			res = s.execMulti(ctx, c, cp, calls)
		}
		for j, shard := range order {
			g := groups[shard]
			vs, err := res[j].AsIntSlice()
			if err == nil && len(vs) != len(g.idx) {
				err = fmt.Errorf("%w %v", errUnexpectedReply, res[j])
			}
			if err != nil {
				return err
			}
			for k, i := range g.idx {
				out[i] = vs[k] == 1
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap(err)
	}
	return out, nil
}

// Clear deletes every shard and resets UniqueCount to 0.
func (d *bloomDedup) Clear(ctx context.Context) error {
	if err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) error {
		cmds := make(rueidis.Commands, len(d.keys))
		for i, k := range d.keys {
			cmds[i] = c.B().Del().Key(k).Build()
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("redisbackend: bloom dedup: clear: %w", err)
	}
	d.unique.Store(0)
	return nil
}

// UniqueCount returns the number of adds by this deduplicator (this process) that set at
// least one bit, since it was created or last cleared; it never touches Redis. Count is
// the filter's own estimate.
func (d *bloomDedup) UniqueCount(context.Context) (int64, error) {
	return d.unique.Load(), nil
}

// Count estimates the number of distinct elements in the filter from its set bits
// (BITCOUNT per shard, core.Bloom.EstimateCount), whoever added them.
func (d *bloomDedup) Count(ctx context.Context) (int64, error) {
	calls := make([]rueidis.LuaExec, len(d.keys))
	for i, k := range d.keys {
		calls[i] = rueidis.LuaExec{Keys: []string{k}}
	}
	var total int64
	err := d.do(ctx, func(ctx context.Context, c rueidis.Client, cp *caps) error {
		for _, r := range scriptBloomCount.execMulti(ctx, c, cp, calls) {
			vs, err := r.AsIntSlice()
			if err == nil && len(vs) != 2 {
				err = fmt.Errorf("%w %v", errUnexpectedReply, r)
			}
			if err != nil {
				return err
			}
			total = min(total+d.bloom.EstimateCount(uint64(vs[0])), core.MaxCount)
		}
		return nil
	})
	if err != nil {
		return 0, scriptBloomCount.wrap(err)
	}
	return total, nil
}
