package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/metrics"
)

// Delayed and scheduled delivery.
//
// A message sent with WithDelay or WithDeliverAt is not written to the topic's stream at
// once: delay_add.lua puts its id in the topic's schedule, a sorted set scored by due time
// (ms), and its encoded entry in a companion hash, both in the stream's hash slot (see
// streamwire.DelayedKeys). Every running handler of the topic runs a mover: delay_move.lua, called at
// each due time and at least every Delay.PollInterval, XADDs the due entries to the stream
// and deletes them from the schedule in the same script, so a message is scheduled or in the
// stream, never both and never neither, on a single server and on Redis Cluster. Both
// structures are ordinary keys: they persist like the stream (AOF, RDB) and need no process
// to stay alive; a message whose due time passes while no consumer runs is moved by the
// first mover that starts.

// maxDelay is the longest delay WithDelay accepts, and how far ahead of now WithDeliverAt
// may schedule a message.
const maxDelay = 10 * 365 * 24 * time.Hour

// defaultDelayPollInterval is the default Config.Delay.PollInterval: the longest time a
// newly scheduled message may wait, past its due time, before a mover notices it.
const defaultDelayPollInterval = 100 * time.Millisecond

// delayBatch is the most due messages one delay_move.lua call moves.
const delayBatch = 256

// WithDelay delays the message: it is written to the topic's stream d after the Send (by the
// Redis server's clock), to within Config.Delay.PollInterval of that time (100 ms by
// default, typically a few ms for delays longer than the poll interval). d <= 0 means no
// delay; d above 10 years makes Send fail. A delayed message reaches the stream only while
// some Consumer of the topic runs (its handlers move due messages); until then it waits,
// and it survives restarts of the producer, the consumers and (with persistence) Redis.
// WithMaxLen does not apply to delayed messages. The last of WithDelay and WithDeliverAt
// given wins.
func WithDelay(d time.Duration) SendOption {
	return func(o *sendOptions) {
		o.at = time.Time{}
		o.delay = d
		o.delayed = d > 0
		o.delayErr = nil
		if d > maxDelay {
			o.delayErr = errInvalid("WithDelay(%v): at most %v", d, maxDelay)
		}
	}
}

// WithDeliverAt schedules the message for time at (compared with the Redis server's clock,
// to the millisecond): it is written to the topic's stream then, as with WithDelay. A zero
// at means no schedule; a time in the past means as soon as a mover runs; a time more than
// 10 years ahead makes Send fail.
func WithDeliverAt(at time.Time) SendOption {
	return func(o *sendOptions) {
		o.delay = 0
		o.at = at
		o.delayed = !at.IsZero()
		o.delayErr = nil
		if time.Until(at) > maxDelay {
			o.delayErr = errInvalid("WithDeliverAt(%v): more than %v ahead", at, maxDelay)
		}
	}
}

// delayArgs returns the mode and time arguments of delay_add.lua.
func (o sendOptions) delayArgs() (mode, ms string) {
	if !o.at.IsZero() {
		return "abs", strconv.FormatInt(max(o.at.UnixMilli(), 0), 10)
	}
	return "rel", strconv.FormatInt(max(o.delay.Milliseconds(), 1), 10)
}

// scheduleID returns a new scheduled-message id: 16 hex digits of a time-ordered key, then 8
// random ones, so ids sort in scheduling order within one process and never collide across
// processes.
func scheduleID() string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	b := make([]byte, 0, 24)
	b = fmt.Appendf(b, "%016x", uint64(nextKey()))
	return string(hex.AppendEncode(b, r[:]))
}

// delayAddCompact is delay_add.lua without its comment lines: the text SendBatch sends with
// each EVAL (a third of the file).
var delayAddCompact = compactLua(delayAddLua)

// compactLua drops the comment-only and blank lines of a script.
func compactLua(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// buildDelayed encodes out into its delay_add.lua call (EVAL with the script text, without
// comments: the command can go into a DoMulti, where EVALSHA's fallback cannot).
func (p *Producer) buildDelayed(out *Outgoing, fields []string) rueidis.Completed {
	sched, msgs := streamwire.DelayedKeys(out.stream)
	mode, ms := out.opts.delayArgs()
	out.scheduleID = scheduleID()
	return p.client.B().Eval().Script(delayAddCompact).Numkeys(2).Key(sched, msgs).
		Arg(out.scheduleID, mode, ms, streamwire.EncodeFields(fields)).Build()
}

// writeDelayed schedules out (delay_add.lua through EVALSHA) and returns its schedule id.
func (p *Producer) writeDelayed(ctx context.Context, out *Outgoing, fields []string) (string, error) {
	sched, msgs := streamwire.DelayedKeys(out.stream)
	mode, ms := out.opts.delayArgs()
	out.scheduleID = scheduleID()
	r := delayAddScript.Exec(ctx, p.client, []string{sched, msgs}, []string{out.scheduleID, mode, ms, streamwire.EncodeFields(fields)})
	return p.delayedResult(out, r)
}

// delayedResult reads a delay_add.lua reply.
func (p *Producer) delayedResult(out *Outgoing, r rueidis.RedisResult) (string, error) {
	if err := r.Error(); err != nil {
		return "", fmt.Errorf("stream: schedule a message for %q: %w", out.stream, sendErr(err))
	}
	out.t.scheduled.Inc()
	return out.scheduleID, nil
}

// CancelScheduled cancels a message sent to topic with WithDelay or WithDeliverAt, given
// the id Send returned for it. It reports true when the message was still scheduled and is
// now cancelled, false when it was not (already moved into the stream, cancelled before, or
// an unknown id). For a partitioned topic it tries every partition (one pipelined call per
// node). A ctx without deadline gets one of 10 s.
func (p *Producer) CancelScheduled(ctx context.Context, topic, id string) (bool, error) {
	ctx, cancel := withDefaultDeadline(ctx, defaultCallTimeout)
	defer cancel()
	t, err := p.topic(topic)
	if err != nil {
		return false, err
	}
	execs := make([]rueidis.LuaExec, len(t.streams))
	for i, s := range t.streams {
		sched, msgs := streamwire.DelayedKeys(s)
		_, _, links := streamwire.UniqueKeys(s)
		execs[i] = rueidis.LuaExec{Keys: []string{sched, msgs, links}, Args: []string{id}}
	}
	cancelled := false
	for i, r := range delayCancelScript.ExecMulti(ctx, p.client, execs...) {
		n, err := r.AsInt64()
		if err != nil {
			return false, fmt.Errorf("stream: cancel scheduled message %s of %q: %w", id, t.streams[i], err)
		}
		cancelled = cancelled || n == 1
	}
	return cancelled, nil
}

// Scheduled returns the number of messages of topic waiting for their due time (over all
// its partitions). A ctx without deadline gets one of 10 s.
func (p *Producer) Scheduled(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := withDefaultDeadline(ctx, defaultCallTimeout)
	defer cancel()
	t, err := p.topic(topic)
	if err != nil {
		return 0, err
	}
	cmds := make(rueidis.Commands, len(t.streams))
	for i, s := range t.streams {
		sched, _ := streamwire.DelayedKeys(s)
		cmds[i] = p.client.B().Zcard().Key(sched).Build()
	}
	var total int64
	for i, r := range p.client.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return 0, fmt.Errorf("stream: count scheduled messages of %q: %w", t.streams[i], err)
		}
		total += n
	}
	return total, nil
}

// MoveDue moves topic's due scheduled messages into its stream now, as a consumer's mover
// does, and returns how many it moved: for processes that schedule messages but run no
// consumer of the topic (a cron job, say), or to catch up at once after an outage. It
// repeats the move script (256 messages per call) while more are due. A ctx without
// deadline gets one of 10 s; a ctx that ends returns the count so far with
// the error.
func (p *Producer) MoveDue(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := withDefaultDeadline(ctx, defaultCallTimeout)
	defer cancel()
	t, err := p.topic(topic)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, s := range t.streams {
		for {
			r, err := moveDue(ctx, p.client, s)
			if err != nil {
				return total, err
			}
			total += r.moved
			if r.wait != 0 || r.moved == 0 {
				break
			}
		}
	}
	return total, nil
}

// moveResult is one delay_move.lua reply.
type moveResult struct {
	moved, left, invalid, missing int64
	wait                          time.Duration // until the next due message; < 0: none
}

// moveDue runs delay_move.lua once for stream.
func moveDue(ctx context.Context, client rueidis.Client, stream string) (moveResult, error) {
	sched, msgs := streamwire.DelayedKeys(stream)
	recs, _, links := streamwire.UniqueKeys(stream)
	res, err := delayMoveScript.Exec(ctx, client, []string{sched, msgs, stream, streamwire.DeadLetterStreamName(stream), recs, links},
		[]string{strconv.Itoa(delayBatch), strconv.Itoa(inlineLimit)}).ToArray()
	if err == nil && len(res) != 5 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return moveResult{}, fmt.Errorf("stream: move due scheduled messages into %q: %w", stream, err)
	}
	var r moveResult
	var wait int64
	r.moved, _ = res[0].AsInt64()
	wait, _ = res[1].AsInt64()
	r.left, _ = res[2].AsInt64()
	r.invalid, _ = res[3].AsInt64()
	r.missing, _ = res[4].AsInt64()
	r.wait = time.Duration(wait) * time.Millisecond
	return r, nil
}

// delayMetrics are the mover's metrics of one topic.
type delayMetrics struct {
	moved, invalid *metrics.Counter
	waiting        gauge
}

func newDelayMetrics(set *metrics.Set, topic string, part int) delayMetrics {
	tl := topicLabels(topic, part)
	return delayMetrics{
		moved:   set.GetOrCreateCounter(metrics.Name(metricDelayedMoved, tl...)),
		invalid: set.GetOrCreateCounter(metrics.Name(metricDelayedInvalid, tl...)),
		waiting: set.GetOrCreateGauge(metrics.Name(metricDelayed, tl...), nil),
	}
}
