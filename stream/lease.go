package stream

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// leaseKeeper keeps the entries in hand leased: it resets their idle time every
// leasePeriod (lease.lua), so that no consumer's scan takes them over, and counts the
// leases found lost.
type leaseKeeper struct {
	*scope
	heldIDs    func() []string // the entries in hand and those waiting for their dead-letter write
	leaseState opState
}

func newLeaseKeeper(s *scope, heldIDs func() []string) *leaseKeeper {
	return &leaseKeeper{scope: s, heldIDs: heldIDs}
}

// start starts the lease keeper, counted in all until it exits, once quit is closed.
func (h *leaseKeeper) start(all *sync.WaitGroup, quit <-chan struct{}) {
	all.Add(1)
	go func() {
		defer all.Done()
		h.run(quit)
	}()
}

// leasePeriod is how often held entries are refreshed: MinIdle/3, within 5 ms..10 s.
func (h *leaseKeeper) leasePeriod() time.Duration {
	return min(max(h.c.cfg.Autoclaim.MinIdle/3, minLeasePeriod), maxLeasePeriod)
}

// run refreshes the held entries every leasePeriod until quit is closed, once the handler's
// workers and acknowledger have exited (in-flight handlers keep their lease while Close
// drains them).
func (h *leaseKeeper) run(quit <-chan struct{}) {
	t := time.NewTicker(h.leasePeriod())
	defer t.Stop()
	for {
		select {
		case <-quit:
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
func (h *leaseKeeper) lease(ids []string) {
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
func (h *leaseKeeper) touch(id string) {
	c := h.c
	ctx, cancel := c.ioContext(context.Background())
	defer cancel()
	err := leaseScript.Exec(ctx, c.client, []string{h.stream}, []string{h.group, c.name, id}).Error()
	if err != nil && !isNoGroup(err) {
		h.m.backgroundError(opLease)
	}
}
