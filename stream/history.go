package stream

import (
	"sync/atomic"
	"time"

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
