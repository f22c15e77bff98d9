package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/failure"
)

// windowDedup forgets an element a window after it was last seen (core.WindowDedup):
// a sighting is a duplicate iff the element was seen less than Window ago (exactly Window
// later is new again), and check-and-mark refreshes the last-seen time of a duplicate too.
// State is a sorted set (element -> last-seen µs, ZADD) pruned on every write, plus the
// deduplicator's high-water mark; both keys expire Window + 60 s (corekit.KeyTTLMargin) after
// the last write. Time going backwards is defined by core: every operation runs at
// max(high-water mark, now). A zero time means the Redis server's TIME. It is safe for
// concurrent use.
type windowDedup struct {
	dedupBase
	window time.Duration
	keys   []string     // the sorted set and the mark, one hash tag
	warg   string       // the window in µs
	gather *dedupGather // nil: every CheckAndMark is its own call
}

var _ redstream.TimedDeduplicator = (*windowDedup)(nil)

// newWindowDeduplicator returns the windowed deduplicator named name. window is truncated to
// whole microseconds and must be in (0, core.MaxDuration]. The client stays the caller's.
func newWindowDeduplicator(client rueidis.Client, name string, window time.Duration, opts DedupOptions) (*windowDedup, error) {
	b, err := newDedupBase(client, name, "window", opts)
	if err != nil {
		return nil, err
	}
	if opts.JavaCompatible {
		_, err := javaDedupKey(name, redstream.DedupWindowed, opts)
		return nil, err
	}
	return newWindowDedup(b, window)
}

func newWindowDedup(b dedupBase, window time.Duration) (*windowDedup, error) {
	name := b.name
	w, err := core.NewWindowDedup(window.Microseconds())
	if err != nil {
		return nil, failure.Prefixed("redisbackend", err)
	}
	keys := []string{redisKey(b.prefix, name, roleWindow), redisKey(b.prefix, name, roleWindowMark)}
	b.route = keys[0]
	d := &windowDedup{
		dedupBase: b,
		window:    time.Duration(w.Window) * time.Microsecond,
		keys:      keys,
		warg:      strconv.FormatInt(w.Window, 10),
	}
	d.gather = newDedupGather(b, d.gathered, scriptDedupWindow.wrap)
	return d, nil
}

// Window returns the window.
func (d *windowDedup) Window() time.Duration { return d.window }

// Keys returns the Redis keys of the deduplicator: the sorted set and the high-water mark.
func (d *windowDedup) Keys() []string { return append([]string(nil), d.keys...) }

func nowArg(now time.Time) (string, error) {
	if now.IsZero() {
		return "", nil
	}
	t := now.UnixMicro()
	if err := coreops.CheckTime(t); err != nil {
		return "", failure.Prefixed("redisbackend", err)
	}
	return strconv.FormatInt(t, 10), nil
}

// IsDuplicate is IsDuplicateAt at the Redis server's TIME.
func (d *windowDedup) IsDuplicate(ctx context.Context, element string) (bool, error) {
	return d.IsDuplicateAt(ctx, element, time.Time{})
}

// MarkSeen is shorthand for CheckAndMarkAt(ctx, element, time.Time{}) without its answer: a
// sighting at the Redis server's TIME.
func (d *windowDedup) MarkSeen(ctx context.Context, element string) error {
	_, err := d.CheckAndMarkAt(ctx, element, time.Time{})
	return err
}

// CheckAndMark is CheckAndMarkAt at the Redis server's TIME.
func (d *windowDedup) CheckAndMark(ctx context.Context, element string) (bool, error) {
	return d.CheckAndMarkAt(ctx, element, time.Time{})
}

// IsDuplicateAt reports whether element is a duplicate at now, without recording it; it
// runs read-only (EVALSHA_RO). The empty element never is. A time before the Unix epoch is
// redstream.ErrInvalidTime.
func (d *windowDedup) IsDuplicateAt(ctx context.Context, element string, now time.Time) (bool, error) {
	a, err := nowArg(now)
	if err != nil || element == "" {
		return false, err
	}
	if err := checkElement(element); err != nil {
		return false, err
	}
	v, err := d.run(ctx, scriptDedupWindowCheck, []string{a, d.warg, element})
	return v == 1, err
}

// CheckAndMarkAt records a sighting of element at now and reports whether it was a
// duplicate, atomically: across processes exactly one caller sees a new element as new.
// The empty element is never a duplicate and never recorded.
func (d *windowDedup) CheckAndMarkAt(ctx context.Context, element string, now time.Time) (bool, error) {
	a, err := nowArg(now)
	if err != nil || element == "" {
		return false, err
	}
	if err := checkElement(element); err != nil {
		return false, err
	}
	if g := d.gather; g != nil { // coalesced checks (dedupcoalesce.go)
		if w := g.check(element, a); w != nil {
			return g.answer(ctx, w)
		}
		defer g.done()
	}
	v, err := d.run(ctx, scriptDedupWindow, []string{a, d.warg, element})
	return v == 1, err
}

// gathered checks and marks the elements of a gathering, each at its own time, in one
// pipeline bounded by k timeouts (dedupcoalesce.go). A failed call fails every element of
// the gathering, as one failed batch call would.
func (d *windowDedup) gathered(ws []*dedupWaiter, k int) {
	calls := make([]rueidis.LuaExec, len(ws))
	for i, w := range ws {
		calls[i] = rueidis.LuaExec{Keys: d.keys, Args: []string{w.q.at, d.warg, w.q.elem}}
	}
	vs := make([]int64, len(ws))
	err := d.doN(context.Background(), k, func(ctx context.Context, c rueidis.Client, cp *caps) error {
		for i, r := range scriptDedupWindow.execMulti(ctx, c, cp, calls) {
			v, err := r.AsInt64()
			if err != nil {
				return err
			}
			vs[i] = v
		}
		return nil
	})
	if err != nil { // vs is read only when doN returns nil: the call has returned then
		fill(ws, nil, scriptDedupWindow.wrap(err))
		return
	}
	for i, w := range ws {
		w.a = vs[i] == 1
	}
}

// run calls s on the deduplicator's keys with args and returns its integer reply.
func (d *windowDedup) run(ctx context.Context, s *script, args []string) (int64, error) {
	var v int64
	err := d.do(ctx, func(ctx context.Context, c rueidis.Client, cp *caps) (err error) {
		v, err = s.exec(ctx, c, cp, d.keys, args).AsInt64()
		return err
	})
	if err != nil {
		return 0, s.wrap(err)
	}
	return v, nil
}

// Clear forgets every element and the high-water mark.
func (d *windowDedup) Clear(ctx context.Context) error {
	if err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) error {
		return c.Do(ctx, c.B().Del().Key(d.keys...).Build()).Error()
	}); err != nil {
		return fmt.Errorf("redisbackend: window dedup: %w", err)
	}
	return nil
}

// UniqueCount is UniqueCountAt at the Redis server's TIME.
func (d *windowDedup) UniqueCount(ctx context.Context) (int64, error) {
	return d.UniqueCountAt(ctx, time.Time{})
}

// UniqueCountAt returns the number of elements still within the window at now (read-only).
func (d *windowDedup) UniqueCountAt(ctx context.Context, now time.Time) (int64, error) {
	a, err := nowArg(now)
	if err != nil {
		return 0, err
	}
	return d.run(ctx, scriptDedupWindowCheck, []string{a, d.warg, ""})
}

// RemainingTTL returns how long the deduplicator's keys live without another write; it is
// 0 when nothing is stored.
func (d *windowDedup) RemainingTTL(ctx context.Context) (time.Duration, error) {
	var ms int64
	err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) (err error) {
		ms, err = c.Do(ctx, c.B().Pttl().Key(d.keys[0]).Build()).AsInt64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("redisbackend: window dedup: %w", err)
	}
	if ms < 0 {
		return 0, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}
