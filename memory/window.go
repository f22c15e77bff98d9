package memory

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
	"github.com/redstream-go/redstream/internal/failure"
)

// windowDedup forgets an element Window after it was last seen (core.WindowDedup):
// a sighting is a duplicate iff the element was seen less than Window ago, exactly Window
// later it is new again, and CheckAndMark refreshes the last-seen time of a duplicate too.
//
// Elements live in a sharded map of last-seen times. Expired elements are never reported;
// they are pruned on write by the amortized sweep of Options.SweepThreshold and by
// UniqueCount. Like every engine it keeps a high-water mark, the latest time a write used,
// and runs every operation at max(mark, now) (core.WindowDedup.Effective), so a clock going
// backwards never brings an expired element back.
//
// A windowDedup is safe for concurrent use; CheckAndMark is atomic. The empty
// element is never a duplicate and is never recorded. NewDeduplicator builds it.
type windowDedup struct {
	w    core.WindowDedup
	opts engine.Config
	t    engine.Table[int64] // element -> last seen (µs)
	high atomic.Int64        // the high-water mark (µs); 0 before the first write
}

var _ redstream.TimedDeduplicator = (*windowDedup)(nil)

// newWindowDedup returns an empty windowed deduplicator. window is truncated to
// whole microseconds and must be in (0, core.MaxDuration]; otherwise, or when opts is
// invalid, the error wraps redstream.ErrInvalidConfig.
func newWindowDedup(window time.Duration, opts Options) (*windowDedup, error) {
	w, err := core.NewWindowDedup(window.Microseconds())
	if err != nil {
		return nil, failure.Prefixed("memory", err)
	}
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &windowDedup{w: w, opts: r, t: engine.NewTable[int64](r)}, nil
}

// window returns the deduplication window.
func (d *windowDedup) window() time.Duration {
	return time.Duration(d.w.Window) * time.Microsecond
}

// at validates an explicit time and returns it, or the clock's, in µs.
func (d *windowDedup) at(now time.Time) (int64, error) {
	t := d.opts.Micros(now)
	if err := coreops.CheckTime(t); err != nil {
		return 0, failure.Prefixed("memory", err)
	}
	return t, nil
}

// raise moves the high-water mark up to t.
func (d *windowDedup) raise(t int64) {
	for {
		h := d.high.Load()
		if h >= t || d.high.CompareAndSwap(h, t) {
			return
		}
	}
}

// IsDuplicate is shorthand for IsDuplicateAt(ctx, element, time.Time{}).
func (d *windowDedup) IsDuplicate(ctx context.Context, element string) (bool, error) {
	return d.IsDuplicateAt(ctx, element, time.Time{})
}

// MarkSeen is shorthand for CheckAndMarkAt(ctx, element, time.Time{}) without its answer.
func (d *windowDedup) MarkSeen(ctx context.Context, element string) error {
	_, err := d.CheckAndMarkAt(ctx, element, time.Time{})
	return err
}

// CheckAndMark is shorthand for CheckAndMarkAt(ctx, element, time.Time{}).
func (d *windowDedup) CheckAndMark(ctx context.Context, element string) (bool, error) {
	return d.CheckAndMarkAt(ctx, element, time.Time{})
}

// IsDuplicateAt reports whether element was seen less than Window before now (the zero time
// means Options.Clock), without recording it. It returns an error wrapping
// redstream.ErrInvalidTime for a time before the Unix epoch or after core.MaxTime.
func (d *windowDedup) IsDuplicateAt(ctx context.Context, element string, now time.Time) (bool, error) {
	if element == "" {
		return false, nil
	}
	t, err := d.at(now)
	if err != nil {
		return false, err
	}
	s, tag := d.t.Locate(element)
	s.Lock()
	eff := d.w.Effective(d.high.Load(), t)
	i, seen := s.Find(element, tag)
	dup := seen && d.w.IsDuplicate(*s.Val(i), seen, eff)
	s.Unlock()
	return dup, nil
}

// CheckAndMarkAt atomically reports whether element is a duplicate at now (the zero time
// means Options.Clock) and records the sighting, refreshing the last-seen time of a
// duplicate. Its errors are those of IsDuplicateAt.
func (d *windowDedup) CheckAndMarkAt(ctx context.Context, element string, now time.Time) (bool, error) {
	if element == "" {
		return false, nil
	}
	t, err := d.at(now)
	if err != nil {
		return false, err
	}
	s, tag := d.t.Locate(element)
	s.Lock()
	eff := d.w.Effective(d.high.Load(), t)
	i, seen := s.Find(element, tag)
	dup := seen && d.w.IsDuplicate(*s.Val(i), seen, eff)
	if seen {
		*s.Val(i) = eff
	} else {
		d.t.Insert(s, i, element, tag, eff, func(v int64) bool { return d.w.Expired(v, eff) })
	}
	d.raise(eff)
	s.Unlock()
	return dup, nil
}

// Clear forgets every element. The high-water mark stays. It never returns an error.
func (d *windowDedup) Clear(ctx context.Context) error {
	d.t.Clear()
	return nil
}

// UniqueCount returns the number of elements that would be duplicates at the clock's time
// (Options.Clock, or the high-water mark if later). It first prunes every element expired
// at the high-water mark, so it reads the whole map.
func (d *windowDedup) UniqueCount(ctx context.Context) (int64, error) {
	t, err := d.at(time.Time{})
	if err != nil {
		return 0, err
	}
	var n int64
	for i := range d.t.Shards() {
		s := d.t.Shard(i)
		s.Lock()
		high := d.high.Load()
		eff := d.w.Effective(high, t)
		s.Filter(func(last int64) bool { return !d.w.Expired(last, high) })
		s.Each(func(last *int64) {
			if !d.w.Expired(*last, eff) {
				n++
			}
		})
		s.Unlock()
	}
	return n, nil
}
