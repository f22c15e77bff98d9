package core

// WindowDedup is the windowed deduplicator: each element remembers the time it was last
// seen. A sighting at now is a duplicate iff the element was seen and now - last < Window
// (exactly Window later is not a duplicate). CheckAndMark refreshes the last-seen time on a
// duplicate too, so a steadily repeated element stays a duplicate. An entry with
// last <= now - Window is expired and may be pruned. Time going backwards is defined: a
// sighting earlier than last is a duplicate and never moves last back.
type WindowDedup struct {
	Window int64 // µs
}

// KeyTTLMargin is added to Window for the expiry of a whole dedup key (60 s), so a key is
// reclaimed once traffic stops.
const KeyTTLMargin = 60 * Second

// NewWindowDedup validates window (µs, in (0, MaxDuration]).
func NewWindowDedup(window int64) (WindowDedup, error) {
	if err := checkDuration("window", window); err != nil {
		return WindowDedup{}, err
	}
	return WindowDedup{Window: window}, nil
}

// IsDuplicate reports whether an element last seen at last (seen false for a never-seen
// element) is a duplicate at now.
func (w WindowDedup) IsDuplicate(last int64, seen bool, now int64) bool {
	return seen && now-last < w.Window
}

// Mark returns the last-seen time to store after a sighting at now.
func (w WindowDedup) Mark(last int64, seen bool, now int64) int64 {
	if seen && last > now {
		return last
	}
	return now
}

// Expired reports whether an entry last seen at last may be pruned at now.
func (w WindowDedup) Expired(last, now int64) bool { return last <= now-w.Window }
