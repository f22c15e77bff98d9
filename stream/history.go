package stream

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// The history of a topic: per minute and group, the entries handled, the failures, the
// failures left for a retry and the entries dead-lettered, recorded by the consumers
// themselves for the console's charts (asynq keeps daily counts the same way). Each
// handler counts in memory and its housekeeper adds the counts to the minute's hash
// (streamwire.HistoryKey, in the stream's slot, expiring a day and an hour after its last
// write) at most once a second, at its scans (every Autoclaim.Interval), and when the
// handler stops: one pipelined call, nothing per message. Counts a failed write could not
// add are kept for the next one; those of a process killed between two writes are lost.

// historyCounts are one handler's counts since its last history write, in the order of
// streamwire.HistoryKinds.
type historyCounts [len(streamwire.HistoryKinds)]atomic.Int64

const (
	histProcessed = iota
	histFailed
	histRetried
	histDead
)

// historyEvery is the shortest time between two history writes of one handler.
const historyEvery = time.Second

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
