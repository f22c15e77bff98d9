package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
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

// retrier runs the scanner goroutine: own retries when their backoff ends, the pending-entry
// scan (taking over the entries of consumers that vanished), the catch-up of a partition
// taken over, the dead-letter moves that wait (deadLetterer) and the housekeeping.
type retrier struct {
	*scope
	d        *dispatcher
	retries  *retrySet
	dl       *deadLetterer
	house    *housekeeper
	claims   *sync.Mutex // held from a claim into this consumer's name until dispatch (see newHandlerRT)
	policy   DeliveryRetryPolicy
	maxd     int
	expired  func(ctx context.Context, e entry, deliveries, minIdle int64)
	caughtUp chan struct{}   // a takeover's: closed once its catch-up is done; nil without one
	wakeScan <-chan struct{} // a slot was freed
	scanNow  chan struct{}   // a retry or a dead-letter attempt was scheduled earlier than the next scan
	// interrupt cancels the read in progress, which gives back its slots when the handler
	// becomes stranded.
	interrupt  func()
	scanState  opState
	retryState opState
}

// retrierParams are newRetrier's parameters.
type retrierParams struct {
	d         *dispatcher
	retries   *retrySet
	dl        *deadLetterer
	house     *housekeeper
	claims    *sync.Mutex
	policy    DeliveryRetryPolicy
	maxd      int
	expired   func(ctx context.Context, e entry, deliveries, minIdle int64)
	caughtUp  chan struct{}
	wakeScan  <-chan struct{}
	scanNow   chan struct{}
	interrupt func()
}

func newRetrier(s *scope, p retrierParams) *retrier {
	return &retrier{scope: s, d: p.d, retries: p.retries, dl: p.dl, house: p.house, claims: p.claims,
		policy: p.policy, maxd: p.maxd, expired: p.expired, caughtUp: p.caughtUp, wakeScan: p.wakeScan,
		scanNow: p.scanNow, interrupt: p.interrupt}
}

// start starts the scanner, counted in producers until it exits. It stops when runCtx ends.
func (h *retrier) start(producers *sync.WaitGroup) {
	producers.Add(1)
	go func() {
		defer producers.Done()
		h.scanner()
	}()
}

// scheduled returns the number of own failed entries waiting for their backoff.
func (h *retrier) scheduled() int { return h.retries.len() }

// limited returns the entries parked by the consumption limit, part of scheduled.
func (h *retrier) limited() int { return h.retries.limitedLen() }

// backoff returns the policy's backoff after delivery n, within 1 ms..MaxDuration.
func (h *retrier) backoff(n int64) time.Duration {
	return clampBackoff(h.policy.NextBackoff(max(n, 1)))
}

// schedule records an own failed entry: the scanner delivers it again after backoff.
func (h *retrier) schedule(id string, deliveries int64, backoff time.Duration) {
	h.scheduleEntry(id, retryEntry{at: time.Now().Add(backoff), deliveries: deliveries, backoff: backoff})
}

// park records an own entry the consumption limit did not admit (its delivery taken back):
// the scanner delivers it again after wait.
func (h *retrier) park(id string, deliveries int64, wait time.Duration) {
	h.scheduleEntry(id, retryEntry{at: time.Now().Add(wait), deliveries: deliveries, backoff: wait, limited: true})
}

// wake makes id, parked by the consumption limit, due now (wake), and reports whether it
// was still parked.
func (h *retrier) wake(id string) bool {
	if !h.retries.wake(id, time.Now()) {
		return false
	}
	select {
	case h.scanNow <- struct{}{}:
	default:
	}
	return true
}

func (h *retrier) scheduleEntry(id string, e retryEntry) {
	deliveries, backoff := e.deliveries, e.backoff
	h.d.toRetry(id, e)
	select {
	case h.scanNow <- struct{}{}:
	default:
	}
	h.log.Debug("stream: retry scheduled", "id", id, "deliveries", deliveries, "backoff", backoff)
}

// scanner runs the pending-entry scan at start and then every Autoclaim.Interval, and the
// own retries when their backoff ends; it refreshes the gauges and removes idle consumers
// along the way.
func (h *retrier) scanner() {
	c := h.c
	interval := c.cfg.Autoclaim.Interval
	nextScan := time.Now()
	from := "-" // where the next scan starts: "-", or where a stranded backlog goes on
	if h.caughtUp != nil {
		// A partition just claimed: the catch-up claims every pending entry in stream
		// order before the reader reads new ones; a scan meanwhile would claim the same
		// entries a second time.
		if !h.catchUp() {
			return
		}
		close(h.caughtUp)
	}
	for {
		now := time.Now()
		paused := c.pausedChan()
		retryTimer := paused == nil // paused: no retry is due before Resume
		if paused == nil {
			if at, ok := h.retries.next(); ok && !at.After(now.Add(time.Millisecond)) && !h.redeliverDue(now) {
				retryTimer = false // no free slot: wait for one (wakeScan), not for the timer
			}
			h.dl.due(now)
			if !now.Before(nextScan) {
				from = h.scanAll(from)
				if from == "-" {
					nextScan = time.Now().Add(interval)
				}
			}
		}
		h.house.tick()
		wait := time.Until(nextScan)
		if paused != nil {
			wait = interval // only the gauges, until Resume
		}
		if at, ok := h.retries.next(); ok && retryTimer {
			wait = min(wait, time.Until(at))
		}
		if at, ok := h.dl.next(); ok && paused == nil {
			wait = min(wait, time.Until(at))
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-h.runCtx.Done():
			t.Stop()
			h.house.stopHistory()
			return
		case <-t.C:
		case <-h.scanNow:
			t.Stop()
		case <-h.wakeScan:
			t.Stop() // a slot was freed: a retry that found no room may proceed
			if from != "-" {
				nextScan = time.Now() // and the stranded backlog goes on at once
			}
		case <-paused:
			t.Stop() // resumed
		}
		if from != "-" && !h.d.isStranded() {
			from = "-"
		}
	}
}

// retryBatch is the most own retries one redeliver.lua call claims.
const retryBatch = 256

// redeliverDue claims due own retries for this consumer (counting a delivery) and queues
// them, as far as free slots allow; the others wait for the next wake-up. It reports false
// when there was no free slot at all.
func (h *retrier) redeliverDue(now time.Time) bool {
	c := h.c
	n := h.d.reserveRetry(retryBatch)
	if n == 0 {
		return false
	}
	ids, backoffs := h.retries.takeDue(now, n)
	args := []string{h.group, c.name, strconv.Itoa(h.maxd)}
	for k, id := range ids {
		args = append(args, id, strconv.FormatInt(max(backoffs[k].Milliseconds(), 1), 10))
	}
	h.d.unreserve(n - len(ids))
	n = len(ids)
	if n == 0 {
		return true
	}
	ctx, cancel := c.ioContext(h.runCtx)
	h.claims.Lock() // until the claimed entries are in hand (see claims)
	res, err := redeliverScript.Exec(ctx, c.client, []string{h.stream}, args).ToArray()
	cancel()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		h.claims.Unlock()
		h.d.unreserve(n)
		// Try again a little later (also after a Close that cut the call short: the
		// entries stay pending either way); an outage must not spin.
		h.retries.postpone(ids, time.Now().Add(connBackoff(4)))
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
	h.claims.Unlock()
	waiting, _ := res[1].ToArray()
	for _, x := range waiting {
		f, _ := x.ToArray()
		if len(f) != 2 {
			continue
		}
		id, _ := f[0].ToString()
		left, _ := f[1].AsInt64()
		settled[id] = true
		h.retries.postpone([]string{id}, time.Now().Add(time.Duration(left)*time.Millisecond))
	}
	gone, _ := res[2].AsStrSlice()
	deleted, _ := res[3].AsStrSlice()
	settle := append(gone, deleted...)
	for _, id := range settle {
		settled[id] = true
	}
	for _, id := range ids {
		if !settled[id] {
			settle = append(settle, id) // not in the reply (cannot happen): leave it to the scan
		}
	}
	h.d.settleRetries(settle)
	h.trimmedWhilePending(deleted)
	h.d.unreserve(n - used)
	return true
}

// scanPage is the most pending entries one reclaim.lua call examines.
const scanPage = 256

// takeoverTable returns reclaim.lua's takeover times (ms): max(MinIdle, backoff) after
// deliveries 1..min(maxd, 64). Another consumer's entry is taken over only after MinIdle (its
// lease would have refreshed it), and never before its retry backoff (its owner may be
// waiting for it to redeliver it itself).
func (h *retrier) takeoverTable() []string {
	minIdle := h.c.cfg.Autoclaim.MinIdle
	n := min(h.maxd, 64)
	out := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, strconv.FormatInt(max(minIdle, h.backoff(int64(i))).Milliseconds(), 10))
	}
	return out
}

// scanAll runs reclaim.lua over the group's pending list from from ("-" for the whole
// list) and returns where the next scan starts: "-" once the list was scanned to its end,
// else the first claimable entry that found no free slot (the handler is stranded: every
// freed slot triggers the next claim, and reads take at most half the free slots).
func (h *retrier) scanAll(from string) string {
	c := h.c
	next, err := h.scanOnce(from)
	if h.runCtx.Err() != nil {
		return "-"
	}
	if err != nil {
		h.setStranded(false)
		h.m.backgroundError(opScan)
		h.scanState.fail(h.log, "stream: pending-entry scans fail", err)
		c.report(err)
		return "-"
	}
	h.scanState.ok(h.log, "stream: pending-entry scans work again")
	h.setStranded(next != "-")
	return next
}

// setStranded records whether claimable entries wait for free slots. When they start to,
// the read in progress is interrupted so that it gives back the slots it holds and asks
// again for its share.
func (h *retrier) setStranded(on bool) {
	if h.d.setStranded(on) && on {
		h.interrupt()
	}
}

// scanOnce runs reclaim.lua page by page from start, dispatching claimed entries to the
// workers (as many as there are free slots) and dead-lettering expired ones. It returns "-"
// when it reached the end of the pending list, or the id of the first claimable entry that
// found no free slot.
func (h *retrier) scanOnce(start string) (string, error) {
	c := h.c
	table := h.takeoverTable()
	for page := 0; page < 1<<20; page++ {
		if h.runCtx.Err() != nil || c.isPaused() {
			return "-", nil
		}
		room := h.d.reserve(scanPage)
		args := append([]string{h.group, c.name, start, strconv.Itoa(scanPage), strconv.Itoa(h.maxd), strconv.Itoa(room)}, table...)
		ctx, cancel := c.ioContext(h.runCtx)
		h.claims.Lock() // until the claimed entries are in hand (see claims)
		res, err := reclaimScript.Exec(ctx, c.client, []string{h.stream}, args).ToArray()
		cancel()
		if err == nil && len(res) != 4 {
			err = fmt.Errorf("unexpected reply of %d elements", len(res))
		}
		if err != nil {
			h.claims.Unlock()
			h.d.unreserve(room)
			if isNoGroup(err) {
				h.recoverGroup()
				return "-", nil
			}
			return "-", fmt.Errorf("stream: scan pending entries of %q for %s: %w", h.stream, h.group, err)
		}
		next, _ := res[0].ToString()
		if deleted, err := res[3].AsStrSlice(); err == nil {
			h.trimmedWhilePending(deleted)
		}
		used, _ := h.dispatchClaimed(res[1], nil)
		h.claims.Unlock()
		h.d.unreserve(room - used)
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
			return "-", nil
		}
		if next[0] != '(' {
			return next, nil // no free slot for the next claimable entry: freed slots go on
		}
		start = next
	}
	return "-", nil
}

// dispatchClaimed hands the entries a script claimed for this consumer ({id, fields,
// deliveries} triples) to the handler slots, counting each as redelivered, and returns how
// many it dispatched and how many the reply held. The ids go into settled when it is not nil.
func (h *retrier) dispatchClaimed(reply rueidis.RedisMessage, settled map[string]bool) (used, claimed int) {
	entries, _ := reply.ToArray()
	return dispatchClaims(h.d, h.m, reply, settled), len(entries)
}

// dispatchClaims dispatches the entries of a claim script's reply ({id, fields, deliveries}
// triples, the count being the delivery's fence), counting each as redelivered in m unless m
// is nil, and returns how many it dispatched. The ids go into settled when it is not nil.
func dispatchClaims(d *dispatcher, m *handlerMetrics, reply rueidis.RedisMessage, settled map[string]bool) int {
	entries, _ := reply.ToArray()
	used := 0
	for _, x := range entries {
		f, _ := x.ToArray()
		if len(f) != 3 {
			continue
		}
		e, ok := parseEntry(f[0], f[1])
		if !ok {
			continue
		}
		n, _ := f[2].AsInt64()
		if m != nil {
			m.redelivered.Inc()
		}
		used++
		if settled != nil {
			settled[e.id] = true
		}
		d.dispatch(job{e: e, deliveries: n})
	}
	return used
}

// catchUp takes over the group's pending entries of h's partition, whoever holds them, and
// dispatches them in stream order (a partition just claimed: they come before any new
// entry, so that per-key order survives the handover). It reports false when h stops.
func (h *retrier) catchUp() bool {
	c := h.c
	from := "-"
	failures := 0
	for {
		n := h.d.reserve(c.cfg.ReadCount)
		if n == 0 {
			select {
			case <-h.wakeScan:
				continue
			case <-h.runCtx.Done():
				return false
			}
		}
		ctx, cancel := c.ioContext(h.runCtx)
		used, next, err := h.claimPending(ctx, from, n)
		cancel()
		if err != nil {
			h.d.unreserve(n)
			if h.runCtx.Err() != nil {
				return false
			}
			failures++
			h.m.backgroundError(opScan)
			h.scanState.fail(h.log, "stream: taking over a partition's pending entries fails", err)
			c.report(err)
			if !h.sleep(connBackoff(failures)) {
				return false
			}
			continue
		}
		failures = 0
		h.d.unreserve(n - used)
		if next == "" {
			return true
		}
		from = next
	}
}

// claimPending claims up to n pending entries of h's partition from id from on (XPENDING,
// then claim.lua in mode any, which claims them with no idle minimum and replies each with
// its new delivery count: the fence of the delivery), dispatches them, and returns how many
// and the exclusive start of the next page ("" after the last).
func (h *retrier) claimPending(ctx context.Context, from string, n int) (int, string, error) {
	cl := h.c.client
	pend, err := cl.Do(ctx, cl.B().Xpending().Key(h.stream).Group(h.group).Start(from).End("+").Count(int64(n)).Build()).ToArray()
	if err != nil || len(pend) == 0 {
		if isNoGroup(err) {
			err = nil
		}
		return 0, "", err
	}
	ids := make([]string, 0, len(pend))
	for _, p := range pend {
		f, _ := p.ToArray()
		if len(f) < 4 {
			continue
		}
		id, _ := f[0].ToString()
		ids = append(ids, id)
	}
	next := ""
	if len(pend) == n && len(ids) > 0 {
		next = "(" + ids[len(ids)-1]
	}
	if len(ids) == 0 {
		return 0, next, nil
	}
	res, err := claimScript.Exec(ctx, h.c.client, []string{h.stream}, append([]string{h.group, h.c.name, "any"}, ids...)).ToMessage()
	if err != nil {
		return 0, "", err
	}
	// dispatched in stream order: claim.lua replies in the order of ids
	return dispatchClaims(h.d, nil, res, nil), next, nil
}
