package stream

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The pending-entry life cycle (see README "Retries, min-idle and the scan"):
//
//   - An entry this consumer holds (read or claimed, queued, being handled or being
//     dead-lettered) is leased: leaseKeeper resets its idle time every MinIdle/3, so no
//     consumer's scan takes it over, and the scan of this consumer never claims an entry it
//     holds.
//   - When its handler fails, the entry's idle time is reset (touch) and its retry is
//     scheduled here, in retries, for the end of its backoff; the scanner wakes up then and
//     redelivers it to itself (redeliver.lua), whatever the scan interval.
//   - Any other pending entry (its consumer crashed or lost its lease) is taken over by the
//     first scan (reclaim.lua, every Autoclaim.Interval) that finds it idle for
//     max(MinIdle, its backoff).

// scanner runs the pending-entry scan at start and then every Autoclaim.Interval, and the
// own retries when their backoff ends; it refreshes the gauges and removes idle consumers
// along the way.
func (h *handlerRT) scanner() {
	defer h.producers.Done()
	c := h.c
	interval := c.cfg.Autoclaim.Interval
	nextScan := time.Now()
	for {
		now := time.Now()
		paused := c.pausedChan()
		retryTimer := paused == nil // paused: no retry is due before Resume
		if paused == nil {
			if at, ok := h.nextRetry(); ok && !at.After(now.Add(time.Millisecond)) && !h.redeliverDue(now) {
				retryTimer = false // no free slot: wait for one (wakeScan), not for the timer
			}
			if !now.Before(nextScan) {
				h.scanAll()
				nextScan = time.Now().Add(interval)
			}
		}
		h.housekeeping()
		wait := time.Until(nextScan)
		if paused != nil {
			wait = interval // only the gauges, until Resume
		}
		if at, ok := h.nextRetry(); ok && retryTimer {
			wait = min(wait, time.Until(at))
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-h.runCtx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-h.scanNow:
			t.Stop()
		case <-h.wakeScan:
			t.Stop() // a slot was freed: a retry that found no room may proceed
		case <-paused:
			t.Stop() // resumed
		}
	}
}

// nextRetry returns when the earliest own retry is due.
func (h *handlerRT) nextRetry() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.retries.next()
}

// retryBatch is the most own retries one redeliver.lua call claims.
const retryBatch = 256

// redeliverDue claims due own retries for this consumer (counting a delivery) and queues
// them, as far as free slots allow; the others wait for the next wake-up. It reports false
// when there was no free slot at all.
func (h *handlerRT) redeliverDue(now time.Time) bool {
	c := h.c
	n := h.reserveRetry(retryBatch)
	if n == 0 {
		return false
	}
	h.mu.Lock()
	ids := h.retries.popDue(now, n)
	args := []string{h.group, c.name, strconv.Itoa(h.maxd)}
	for _, id := range ids {
		r, _ := h.retries.get(id)
		args = append(args, id, strconv.FormatInt(max(r.backoff.Milliseconds(), 1), 10))
	}
	h.mu.Unlock()
	h.unreserve(n - len(ids))
	n = len(ids)
	if n == 0 {
		return true
	}
	ctx, cancel := c.ioContext(h.runCtx)
	res, err := redeliverScript.Exec(ctx, c.client, []string{h.stream}, args).ToArray()
	cancel()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		h.unreserve(n)
		// Try again a little later (also after a Close that cut the call short: the
		// entries stay pending either way); an outage must not spin.
		h.postponeRetries(ids, time.Now().Add(connBackoff(4)))
		if h.runCtx.Err() != nil {
			return true
		}
		if isNoGroup(err) {
			h.recoverGroup()
		}
		h.m.backgroundError(opRetry)
		err = fmt.Errorf("stream: redeliver %d entries of %q for %s: %w", len(ids), h.stream, h.group, err)
		h.retryState.fail(h.log, "stream: retries fail", err)
		c.report(err)
		return true
	}
	h.retryState.ok(h.log, "stream: retries work again")
	settled := map[string]bool{}
	used, _ := h.dispatchClaimed(res[0], settled)
	waiting, _ := res[1].ToArray()
	for _, x := range waiting {
		f, _ := x.ToArray()
		if len(f) != 2 {
			continue
		}
		id, _ := f[0].ToString()
		left, _ := f[1].AsInt64()
		settled[id] = true
		h.postponeRetries([]string{id}, time.Now().Add(time.Duration(left)*time.Millisecond))
	}
	gone, _ := res[2].AsStrSlice()
	deleted, _ := res[3].AsStrSlice()
	h.mu.Lock()
	for _, id := range append(gone, deleted...) {
		settled[id] = true
		h.settleRetry(id)
	}
	for _, id := range ids {
		if !settled[id] {
			h.settleRetry(id) // not in the reply (cannot happen): leave it to the scan
		}
	}
	h.mu.Unlock()
	h.trimmedWhilePending(deleted)
	h.unreserve(n - used)
	return true
}

func (h *handlerRT) postponeRetries(ids []string, at time.Time) {
	h.mu.Lock()
	for _, id := range ids {
		h.retries.postpone(id, at)
	}
	h.mu.Unlock()
}

// scanPage is the most pending entries one reclaim.lua call examines.
const scanPage = 256

// takeoverTable returns reclaim.lua's takeover times (ms): max(MinIdle, backoff) after
// deliveries 1..min(maxd, 64). Another consumer's entry is taken over only after MinIdle (its
// lease would have refreshed it), and never before its retry backoff (its owner may be
// waiting for it to redeliver it itself).
func (h *handlerRT) takeoverTable() []string {
	minIdle := h.c.cfg.Autoclaim.MinIdle
	n := min(h.maxd, 64)
	out := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, strconv.FormatInt(max(minIdle, h.backoff(int64(i))).Milliseconds(), 10))
	}
	return out
}

// scanAll runs reclaim.lua over the group's whole pending list.
func (h *handlerRT) scanAll() {
	c := h.c
	err := h.scanOnce()
	if h.runCtx.Err() != nil {
		return
	}
	if err != nil {
		h.m.backgroundError(opScan)
		h.scanState.fail(h.log, "stream: pending-entry scans fail", err)
		c.report(err)
		return
	}
	h.scanState.ok(h.log, "stream: pending-entry scans work again")
}

// scanOnce runs reclaim.lua page by page, dispatching claimed entries to the workers (as
// many as there are free slots) and dead-lettering expired ones.
func (h *handlerRT) scanOnce() error {
	c := h.c
	table := h.takeoverTable()
	start := "-"
	for page := 0; page < 1<<20; page++ {
		if h.runCtx.Err() != nil || c.isPaused() {
			return nil
		}
		room := h.reserve(scanPage)
		args := append([]string{h.group, c.name, start, strconv.Itoa(scanPage), strconv.Itoa(h.maxd), strconv.Itoa(room)}, table...)
		ctx, cancel := c.ioContext(h.runCtx)
		res, err := reclaimScript.Exec(ctx, c.client, []string{h.stream}, args).ToArray()
		cancel()
		if err == nil && len(res) != 4 {
			err = fmt.Errorf("unexpected reply of %d elements", len(res))
		}
		if err != nil {
			h.unreserve(room)
			if isNoGroup(err) {
				h.recoverGroup()
				return nil
			}
			return fmt.Errorf("stream: scan pending entries of %q for %s: %w", h.stream, h.group, err)
		}
		next, _ := res[0].ToString()
		if deleted, err := res[3].AsStrSlice(); err == nil {
			h.trimmedWhilePending(deleted)
		}
		used, claimed := h.dispatchClaimed(res[1], nil)
		h.unreserve(room - used)
		expired, _ := res[2].ToArray()
		for _, x := range expired {
			f, _ := x.ToArray()
			if len(f) != 5 {
				continue
			}
			e, ok := parseEntry(f[0], f[1])
			if !ok {
				continue
			}
			n, _ := f[2].AsInt64()
			// The move re-checks that the entry is still idle for its takeover time, so that
			// a redelivery by another consumer in between wins.
			need, _ := strconv.ParseInt(table[min(max(int(n), 1), len(table))-1], 10, 64)
			h.expired(h.hardCtx, e, n, need)
		}
		if next == "" {
			return nil
		}
		if room == 0 && claimed == 0 && next != "" && next[0] != '(' {
			return nil // no free slot for the next claimable entry: the next scan goes on
		}
		start = next
	}
	return nil
}

// leasePeriod is how often held entries are refreshed: MinIdle/3, within 5 ms..10 s.
func (h *handlerRT) leasePeriod() time.Duration {
	return min(max(h.c.cfg.Autoclaim.MinIdle/3, minLeasePeriod), maxLeasePeriod)
}

// leaseKeeper refreshes the held entries every leasePeriod until the handler's workers and
// acknowledger have exited (in-flight handlers keep their lease while Close drains them).
func (h *handlerRT) leaseKeeper() {
	t := time.NewTicker(h.leasePeriod())
	defer t.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-t.C:
		}
		if ids := h.heldIDs(); len(ids) > 0 {
			h.lease(ids)
		}
	}
}

// leaseChunk is the most ids one lease.lua call refreshes.
const leaseChunk = 512

// lease refreshes ids (lease.lua), counting and logging the leases found lost.
func (h *handlerRT) lease(ids []string) {
	c := h.c
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), leaseChunk)]
		ids = ids[len(chunk):]
		ctx, cancel := c.ioContext(context.Background())
		ctx, cancel2 := context.WithTimeout(ctx, max(h.leasePeriod(), time.Second))
		res, err := leaseScript.Exec(ctx, c.client, []string{h.stream}, append([]string{h.group, c.name}, chunk...)).ToArray()
		cancel2()
		cancel()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("unexpected reply of %d elements", len(res))
		}
		if err != nil {
			if isNoGroup(err) {
				return // the scanner or reader recreates it
			}
			h.m.backgroundError(opLease)
			err = fmt.Errorf("stream: refresh %d held entries of %q for %s: %w", len(chunk), h.stream, h.group, err)
			h.leaseState.fail(h.log, "stream: lease refreshes fail; held entries may be taken over after min-idle", err)
			c.report(err)
			return
		}
		h.leaseState.ok(h.log, "stream: lease refreshes work again")
		if taken, _ := res[0].AsStrSlice(); len(taken) > 0 {
			h.m.leaseLost.Add(len(taken))
			h.log.Warn("stream: entries in hand were taken over by another consumer (lease lost; a stall longer than min-idle?)", "ids", taken)
		}
	}
}

// touch resets the idle time of one held entry, so that its retry backoff counts from now.
func (h *handlerRT) touch(id string) {
	c := h.c
	ctx, cancel := c.ioContext(context.Background())
	defer cancel()
	err := leaseScript.Exec(ctx, c.client, []string{h.stream}, []string{h.group, c.name, id}).Error()
	if err != nil && !isNoGroup(err) {
		h.m.backgroundError(opLease)
	}
}

// dispatchClaimed hands the entries a script claimed for this consumer ({id, fields,
// deliveries} triples) to the handler slots, counting each as redelivered, and returns how
// many it dispatched and how many the reply held. The ids go into settled when it is not nil.
func (h *handlerRT) dispatchClaimed(reply rueidis.RedisMessage, settled map[string]bool) (used, claimed int) {
	entries, _ := reply.ToArray()
	for _, x := range entries {
		f, _ := x.ToArray()
		if len(f) != 3 {
			continue
		}
		e, ok := parseEntry(f[0], f[1])
		if !ok {
			continue
		}
		d, _ := f[2].AsInt64()
		h.m.redelivered.Inc()
		used++
		if settled != nil {
			settled[e.id] = true
		}
		h.dispatch(job{e: e, deliveries: d})
	}
	return used, len(entries)
}
