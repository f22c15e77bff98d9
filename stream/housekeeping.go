package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// housekeeper refreshes a handler's gauges (and Stats) and removes idle consumers from its
// group. It has no goroutine of its own: tick runs on the scanner's.
type housekeeper struct {
	*scope
	pendingN   atomic.Int64 // the group's pending entries, as last seen
	lagN       atomic.Int64 // the group's lag, as last seen (-1 unknown)
	lagExact   atomic.Bool  // lagN is XINFO's lag (not the capped count)
	dlqN       atomic.Int64 // dead letters, as last seen
	gaugesAt   atomic.Int64 // unix ns of the last gauge refresh
	reapAt     time.Time    // last removal of idle consumers (scanner goroutine only)
	gaugeState opState
	houseState opState
	histAt     time.Time // last history write (scanner goroutine only)
	histState  opState
}

func newHousekeeper(s *scope) *housekeeper { return &housekeeper{scope: s} }

// start marks the lag unknown until the first refresh.
func (h *housekeeper) start() { h.lagN.Store(-1) }

// fill sets the housekeeper's part of s.
func (h *housekeeper) fill(s *HandlerStats) {
	s.Pending = h.pendingN.Load()
	s.Lag = h.lagN.Load()
	s.LagExact = h.lagExact.Load()
	s.DeadLetters = h.dlqN.Load()
	if ns := h.gaugesAt.Load(); ns != 0 {
		s.RefreshedAt = time.Unix(0, ns)
	}
}

// tick runs on the scanner's goroutine: it refreshes the gauges every
// Autoclaim.Interval and removes idle, empty consumers from the group every
// ConsumerTimeout/4 (within 1 s..1 min).
func (h *housekeeper) tick() {
	c := h.c
	now := time.Now()
	if last := h.gaugesAt.Load(); last == 0 || now.Sub(time.Unix(0, last)) >= c.cfg.Autoclaim.Interval {
		h.updateGauges()
	}
	hctx, cancel := c.ioContext(h.runCtx)
	h.writeHistory(hctx, now, false)
	cancel()
	if c.cfg.ConsumerTimeout > 0 {
		period := min(max(c.cfg.ConsumerTimeout/4, time.Second), time.Minute)
		if h.reapAt.IsZero() || now.Sub(h.reapAt) >= period {
			h.reapAt = now
			h.reap()
		}
	}
}

// updateGauges refreshes the pending, lag and dead-letter size gauges (and Stats).
func (h *housekeeper) updateGauges() {
	c := h.c
	cl := c.client
	ctx, cancel := c.ioContext(h.runCtx)
	defer cancel()
	res := cl.DoMulti(ctx, cl.B().XinfoGroups().Key(h.stream).Build(), cl.B().Xlen().Key(h.dlq).Build())
	h.gaugesAt.Store(time.Now().UnixNano())
	if n, err := res[1].AsInt64(); err == nil {
		h.dlqN.Store(n)
		h.m.dlqSize.Set(float64(n))
	}
	groups, err := res[0].ToArray()
	if err != nil {
		if h.runCtx.Err() == nil && !isNoGroup(err) {
			h.m.backgroundError(opGauges)
			h.gaugeState.fail(h.log, "stream: reading the group's state fails", err)
		}
		return
	}
	h.gaugeState.ok(h.log, "stream: reading the group's state works again")
	for _, g := range groups {
		info, err := g.AsMap()
		if err != nil {
			continue
		}
		nm, pd, ld := info["name"], info["pending"], info["last-delivered-id"]
		if name, _ := nm.ToString(); name != h.group {
			continue
		}
		if p, err := pd.AsInt64(); err == nil {
			h.pendingN.Store(p)
			h.m.pending.Set(float64(p))
		}
		lag, exact := groupLag(info)
		if !exact {
			last, _ := ld.ToString()
			lag = h.countLag(ctx, last)
		}
		h.lagN.Store(lag)
		h.lagExact.Store(exact)
		if lag >= 0 {
			h.m.lag.Set(float64(lag))
		}
	}
}

// groupLag returns the lag field of one XINFO GROUPS entry, and false when there is none
// (Redis 6.2) or it is nil (Redis cannot compute it).
func groupLag(info map[string]rueidis.RedisMessage) (int64, bool) {
	l, ok := info["lag"]
	if !ok {
		return -1, false
	}
	v, err := l.AsInt64()
	if err != nil {
		return -1, false
	}
	return v, true
}

// countLag counts the entries after last, up to lagCountCap (lag.lua); -1 on failure.
func (h *housekeeper) countLag(ctx context.Context, last string) int64 {
	if last == "" {
		return -1
	}
	n, err := lagScript.Exec(ctx, h.c.client, []string{h.stream}, []string{last, strconv.Itoa(lagCountCap)}).AsInt64()
	if err != nil {
		return -1
	}
	return n
}

// reap deletes the group's consumers that are idle for ConsumerTimeout and own no entry.
func (h *housekeeper) reap() {
	c := h.c
	ctx, cancel := c.ioContext(h.runCtx)
	defer cancel()
	removed, err := reapScript.Exec(ctx, c.client, []string{h.stream},
		[]string{h.group, c.name, strconv.FormatInt(c.cfg.ConsumerTimeout.Milliseconds(), 10)}).AsStrSlice()
	if err != nil {
		if h.runCtx.Err() == nil && !isNoGroup(err) {
			h.m.backgroundError(opHousekeeping)
			err = fmt.Errorf("stream: remove idle consumers of %s/%s: %w", h.stream, h.group, err)
			h.houseState.fail(h.log, "stream: removing idle consumers fails", err)
			c.report(err)
		}
		return
	}
	h.houseState.ok(h.log, "stream: removing idle consumers works again")
	if len(removed) > 0 {
		h.m.consumersRemoved.Add(len(removed))
		h.log.Info("stream: removed idle consumers without pending entries from the group", "consumers", removed,
			"consumer_timeout", c.cfg.ConsumerTimeout)
	}
}

// leaveGroups deletes this consumer from each group where it owns no pending entry, once
// every goroutine has exited (Close). It is bounded by Close's deadline, and by one second.
func (c *Consumer) leaveGroups() {
	c.mu.Lock()
	hs := c.handlers
	c.mu.Unlock()
	for _, h := range hs {
		c.leaveGroup(h)
	}
}

// leaveGroup deletes this consumer from h's group if it owns no pending entry there (a
// consumer that never read is not in the group: nothing to do or say).
func (c *Consumer) leaveGroup(h *handlerRT) {
	{
		ctx, cancel := c.ioContext(context.Background())
		ctx, cancel2 := context.WithTimeout(ctx, closeGrace)
		n, err := leaveScript.Exec(ctx, c.client, []string{h.stream}, []string{h.group, c.name}).AsInt64()
		cancel2()
		cancel()
		switch {
		case err != nil && !isNoGroup(err):
			h.m.backgroundError(opHousekeeping)
			h.log.Warn("stream: could not leave the group; the name stays until another consumer removes it", "error", err)
		case err == nil && n == 0:
			h.log.Info("stream: consumer keeps its name in the group: it owns pending entries")
		}
	}
}

// writeHistory adds the counts since the last write to the minute of now, unless the last
// write is less than historyEvery ago (force: write anyway, as the handler stops).
func (h *housekeeper) writeHistory(ctx context.Context, now time.Time, force bool) {
	if h.c.cfg.DisableHistory || (!force && now.Sub(h.histAt) < historyEvery) {
		return
	}
	h.histAt = now
	var took [len(streamwire.HistoryKinds)]int64
	counted := false
	for i := range took {
		took[i] = h.m.hist[i].Swap(0)
		counted = counted || took[i] != 0
	}
	if !counted {
		return
	}
	cl := h.c.client
	key := streamwire.HistoryKey(h.stream, now.Unix()/60)
	cmds := make(rueidis.Commands, 0, len(took)+1)
	for i, n := range took {
		if n != 0 {
			cmds = append(cmds, cl.B().Hincrby().Key(key).Field(streamwire.HistoryKinds[i]+"|"+h.group).Increment(n).Build())
		}
	}
	cmds = append(cmds, cl.B().Pexpire().Key(key).Milliseconds(streamwire.HistoryTTL.Milliseconds()).Build())
	for _, r := range cl.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			for i, n := range took { // kept for the next write
				h.m.hist[i].Add(n)
			}
			if ctx.Err() == nil || force {
				h.m.backgroundError(opHistory)
				h.histState.fail(h.log, "stream: writing the topic's history fails", err)
			}
			return
		}
	}
	h.histState.ok(h.log, "stream: writing the topic's history works again")
}

// stopHistory writes the last counts as the handler stops, within a second.
func (h *housekeeper) stopHistory() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	h.writeHistory(ctx, time.Now(), true)
}
