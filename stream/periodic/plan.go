package periodic

import "time"

// call is one fire.lua call a plan makes: decide tick, sending it or not, and record
// skipped ticks as dropped (the tick itself among them when it is not sent).
type call struct {
	tick    time.Time
	send    bool // send the tick
	late    bool // a missed tick the policy sends
	skipped int64
}

// maxPlanSends bounds the sends of one plan; the ticker plans again after them.
const maxPlanSends = 1000

// maxCronScan bounds the cron ticks one plan walks through; older ones are counted as one
// more skipped tick each up to this bound, and the walk starts over from a recent time.
const maxCronScan = 1 << 20

// plan returns the calls that decide the ticks of c in (cursor, now], in tick order: the
// ticks later than now - Late are sent; of the older (missed) ones, the policy keeps none
// (MissedSkip), the latest (MissedOne) or the MaxCatchUp latest (MissedAll), and the
// others are recorded as skipped by the first call. No tick is due: no calls.
func plan(c compiled, cursor, now time.Time) []call {
	keep := 0
	switch c.Missed {
	case MissedOne:
		keep = 1
	case MissedAll:
		keep = c.MaxCatchUp
	}
	d := dueTicks(c.series, cursor, now, now.Add(-c.Late), keep)
	dropped := d.missedN - int64(len(d.kept))
	var calls []call
	if len(d.kept) == 0 && dropped > 0 {
		// Nothing missed is sent: one call decides through the latest missed tick.
		calls = append(calls, call{tick: d.lastMissed, skipped: dropped})
		dropped = 0
	}
	for i, t := range append(d.kept, d.onTime...) {
		calls = append(calls, call{tick: t, send: true, late: i < len(d.kept), skipped: dropped})
		dropped = 0
		if len(calls) >= maxPlanSends {
			break
		}
	}
	return calls
}

// due is what dueTicks finds.
type due struct {
	missedN    int64       // missed ticks (at least, after a very long cron walk)
	lastMissed time.Time   // the latest of them
	kept       []time.Time // the keep latest of them, in order
	onTime     []time.Time // the ticks on time, in order (at most maxPlanSends)
}

// dueTicks walks the ticks of s in (cursor, now]: those at or before lateBound are missed,
// the others on time.
func dueTicks(s series, cursor, now, lateBound time.Time, keep int) due {
	if e, ok := s.(every); ok {
		return e.dueTicks(cursor, now, lateBound, keep)
	}
	var d due
	ring := make([]time.Time, 0, min(keep, 1024))
	start, scanned := 0, 0
	for t := s.next(cursor); !t.IsZero() && !t.After(now); t = s.next(t) {
		if t.After(lateBound) {
			if d.onTime = append(d.onTime, t); len(d.onTime) >= maxPlanSends {
				break
			}
			continue
		}
		d.missedN++
		d.lastMissed = t
		if scanned++; scanned > maxCronScan {
			// A walk this long: jump half way to lateBound (the jumped ticks count as one).
			t = t.Add(lateBound.Sub(t) / 2)
			scanned = 0
		}
		if keep == 0 {
			continue
		}
		if len(ring) < keep {
			ring = append(ring, t)
		} else {
			ring[start] = t
			start = (start + 1) % keep
		}
	}
	d.kept = append(ring[start:len(ring):len(ring)], ring[:start]...)
	return d
}

// dueTicks is the package dueTicks for a fixed interval, without walking the dropped ticks.
func (e every) dueTicks(cursor, now, lateBound time.Time, keep int) due {
	d := due{missedN: e.count(cursor, lateBound)}
	if d.missedN > 0 {
		d.lastMissed = e.lastAtOrBefore(lateBound)
	}
	from := cursor
	if d.missedN > int64(keep) {
		// The kept ticks are the keep ticks up to lateBound.
		from = d.lastMissed.Add(-time.Duration(int64(keep) * e.ms * int64(time.Millisecond)))
	}
	for t := e.next(from); !t.After(now) && len(d.onTime) < maxPlanSends; t = e.next(t) {
		if t.After(lateBound) {
			d.onTime = append(d.onTime, t)
		} else {
			d.kept = append(d.kept, t)
		}
	}
	return d
}

// lastAtOrBefore returns the last tick of e at or before t.
func (e every) lastAtOrBefore(t time.Time) time.Time {
	return time.UnixMilli(floorDiv(t.UnixMilli(), e.ms) * e.ms)
}
