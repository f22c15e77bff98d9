package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// WindowDeduplicator forgets an element a window after it was last seen (core.WindowDedup):
// a sighting is a duplicate iff the element was seen less than Window ago (exactly Window
// later is new again), and check-and-mark refreshes the last-seen time of a duplicate too.
// State is a sorted set (element -> last-seen µs, ZADD) pruned on every write, plus the
// deduplicator's high-water mark; both keys expire Window + 60 s (core.KeyTTLMargin) after
// the last write. Time going backwards is defined by core: every operation runs at
// max(high-water mark, now). A zero time means the Redis server's TIME. It is safe for
// concurrent use.
type WindowDeduplicator struct {
	dedupBase
	window time.Duration
	keys   []string // the sorted set and the mark, one hash tag
	warg   string   // the window in µs
}

var _ redstream.TimedDeduplicator = (*WindowDeduplicator)(nil)

// NewWindowDeduplicator returns the windowed deduplicator named name. window is truncated to
// whole microseconds and must be in (0, core.MaxDuration]. The client stays the caller's.
func NewWindowDeduplicator(client rueidis.Client, name string, window time.Duration, opts DedupOptions) (*WindowDeduplicator, error) {
	b, err := newDedupBase(client, name, opts)
	if err != nil {
		return nil, err
	}
	if opts.JavaCompatible {
		_, err := javaDedupKey(name, redstream.DedupWindowed, opts)
		return nil, err
	}
	w, err := core.NewWindowDedup(window.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("redisbackend: %w", err)
	}
	return &WindowDeduplicator{
		dedupBase: b,
		window:    time.Duration(w.Window) * time.Microsecond,
		keys:      []string{redisKey(b.prefix, name, roleWindow), redisKey(b.prefix, name, roleWindowMark)},
		warg:      strconv.FormatInt(w.Window, 10),
	}, nil
}

// Window returns the window.
func (d *WindowDeduplicator) Window() time.Duration { return d.window }

// Keys returns the Redis keys of the deduplicator: the sorted set and the high-water mark.
func (d *WindowDeduplicator) Keys() []string { return append([]string(nil), d.keys...) }

func nowArg(now time.Time) (string, error) {
	if now.IsZero() {
		return "", nil
	}
	t := now.UnixMicro()
	if err := core.CheckTime(t); err != nil {
		return "", fmt.Errorf("redisbackend: %w", err)
	}
	return strconv.FormatInt(t, 10), nil
}

// IsDuplicate is IsDuplicateAt at the Redis server's TIME.
func (d *WindowDeduplicator) IsDuplicate(ctx context.Context, element string) (bool, error) {
	return d.IsDuplicateAt(ctx, element, time.Time{})
}

// MarkSeen is MarkSeenAt at the Redis server's TIME.
func (d *WindowDeduplicator) MarkSeen(ctx context.Context, element string) error {
	return d.MarkSeenAt(ctx, element, time.Time{})
}

// CheckAndMark is CheckAndMarkAt at the Redis server's TIME.
func (d *WindowDeduplicator) CheckAndMark(ctx context.Context, element string) (bool, error) {
	return d.CheckAndMarkAt(ctx, element, time.Time{})
}

// IsDuplicateAt reports whether element is a duplicate at now, without recording it; it
// runs read-only (EVALSHA_RO). The empty element never is. A time before the Unix epoch is
// redstream.ErrInvalidTime.
func (d *WindowDeduplicator) IsDuplicateAt(ctx context.Context, element string, now time.Time) (bool, error) {
	a, err := nowArg(now)
	if err != nil || element == "" {
		return false, err
	}
	if err := checkElement(element); err != nil {
		return false, err
	}
	v, err := scriptDedupWindowCheck.exec(ctx, d.client, d.keys, []string{a, d.warg, element}).AsInt64()
	if err != nil {
		return false, scriptDedupWindowCheck.wrap(err)
	}
	return v == 1, nil
}

// MarkSeenAt records a sighting of element at now. The empty element is never recorded.
func (d *WindowDeduplicator) MarkSeenAt(ctx context.Context, element string, now time.Time) error {
	_, err := d.CheckAndMarkAt(ctx, element, now)
	return err
}

// CheckAndMarkAt records a sighting of element at now and reports whether it was a
// duplicate, atomically: across processes exactly one caller sees a new element as new.
// The empty element is never a duplicate and never recorded.
func (d *WindowDeduplicator) CheckAndMarkAt(ctx context.Context, element string, now time.Time) (bool, error) {
	a, err := nowArg(now)
	if err != nil || element == "" {
		return false, err
	}
	if err := checkElement(element); err != nil {
		return false, err
	}
	v, err := scriptDedupWindow.exec(ctx, d.client, d.keys, []string{a, d.warg, element}).AsInt64()
	if err != nil {
		return false, scriptDedupWindow.wrap(err)
	}
	return v == 1, nil
}

// Clear forgets every element and the high-water mark.
func (d *WindowDeduplicator) Clear(ctx context.Context) error {
	if err := d.client.Do(ctx, d.client.B().Del().Key(d.keys...).Build()).Error(); err != nil {
		return fmt.Errorf("redisbackend: window dedup: %w", err)
	}
	return nil
}

// UniqueCount is UniqueCountAt at the Redis server's TIME.
func (d *WindowDeduplicator) UniqueCount(ctx context.Context) (int64, error) {
	return d.UniqueCountAt(ctx, time.Time{})
}

// UniqueCountAt returns the number of elements still within the window at now (read-only).
func (d *WindowDeduplicator) UniqueCountAt(ctx context.Context, now time.Time) (int64, error) {
	a, err := nowArg(now)
	if err != nil {
		return 0, err
	}
	v, err := scriptDedupWindowCheck.exec(ctx, d.client, d.keys, []string{a, d.warg, ""}).AsInt64()
	if err != nil {
		return 0, scriptDedupWindowCheck.wrap(err)
	}
	return v, nil
}

// RemainingTTL returns how long the deduplicator's keys live without another write; it is
// 0 when nothing is stored.
func (d *WindowDeduplicator) RemainingTTL(ctx context.Context) (time.Duration, error) {
	ms, err := d.client.Do(ctx, d.client.B().Pttl().Key(d.keys[0]).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("redisbackend: window dedup: %w", err)
	}
	if ms < 0 {
		return 0, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}
