package core

// WindowDedup is the windowed deduplicator: each element remembers the time it was last
// seen. A sighting at time t is a duplicate iff the element was seen and t - last < Window
// (exactly Window later is not a duplicate). CheckAndMark refreshes the last-seen time on a
// duplicate too, so a steadily repeated element stays a duplicate. An entry with
// last <= t - Window is expired and may be pruned at any later write.
//
// Time going backwards is defined per deduplicator: it keeps a high-water mark, the latest
// time any write (MarkSeen, CheckAndMark of a non-empty element) has used, and every
// operation runs at t = Effective(high, now) = max(high, now). So an expired entry never
// comes back, whether or not an engine has pruned it yet, and last never exceeds t. Reads
// do not move the mark.
type WindowDedup struct {
	Window int64 // µs
}

// NewWindowDedup validates window (µs, in (0, MaxDuration]).
func NewWindowDedup(window int64) (WindowDedup, error) {
	if err := checkDuration("window", window); err != nil {
		return WindowDedup{}, err
	}
	return WindowDedup{Window: window}, nil
}

// Effective returns the time an operation at now runs at, given the deduplicator's
// high-water mark (0 when nothing was written yet). A write stores the result as the new mark.
func (w WindowDedup) Effective(high, now int64) int64 { return max64(high, now) }

// IsDuplicate reports whether an element last seen at last (seen false for a never-seen
// element) is a duplicate at the effective time t.
func (w WindowDedup) IsDuplicate(last int64, seen bool, t int64) bool {
	return seen && t-last < w.Window
}

// Expired reports whether an entry last seen at last may be pruned at effective time t.
func (w WindowDedup) Expired(last, t int64) bool { return last <= t-w.Window }
