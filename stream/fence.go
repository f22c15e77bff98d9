package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	_ "embed"

	"github.com/redis/rueidis"
)

// ErrStaleDelivery matches (errors.Is) the error of a write refused because the delivery it
// belongs to is no longer current: the entry was taken over by another consumer, delivered
// again, or completed by the delivery that superseded this one (a handler that stalled past
// its lease, Autoclaim.MinIdle). It is returned by Message.Ack, Message.DeadLetter and
// Message.Guard; the consumer's own acknowledgements and dead-letter moves of such a
// delivery are refused the same way and counted in redis_streaming_mq_stale_refused_total.
var ErrStaleDelivery = errors.New("stream: stale delivery")

// opGuard is the op label of Message.Guard's refusals in
// redis_streaming_mq_stale_refused_total (with opAck and opDeadLetter).
const opGuard = "guard"

// refusedStale counts and logs the writes of op refused for the stale deliveries of ids.
func (h *scope) refusedStale(op string, ids ...string) {
	if len(ids) == 0 {
		return
	}
	h.m.staleRefused(op).Add(len(ids))
	h.log.Warn("stream: writes of stale deliveries refused (the entries were taken over or delivered again: a stall longer than min-idle?)",
		"op", op, "ids", ids)
}

//go:embed scripts/guard.lua
var guardLua string

// guardScripts caches the guarded scripts of Message.Guard by source, up to maxGuardScripts.
var guardScripts struct {
	sync.Map // source -> *rueidis.Lua
	n        atomic.Int64
}

// maxGuardScripts bounds guardScripts; beyond it a script is wrapped again on each call.
const maxGuardScripts = 1024

// guardScript returns script wrapped in guard.lua.
func guardScript(script string) *rueidis.Lua {
	if l, ok := guardScripts.Load(script); ok {
		return l.(*rueidis.Lua)
	}
	l := rueidis.NewLuaScript(strings.Replace(guardLua, "--[[script]]", script, 1))
	if guardScripts.n.Load() < maxGuardScripts {
		if _, loaded := guardScripts.LoadOrStore(script, l); !loaded {
			guardScripts.n.Add(1)
		}
	}
	return l
}

// Guard runs script, the body of a Lua script, on the consumer's Redis client only while m's
// delivery is current, checked in the same atomic step: the entry is pending in the group,
// owned by this consumer, with this delivery's count (m.DeliveryCount, the fence). So a
// handler that stalled past its lease while another consumer took the message over and
// completed it cannot apply its Redis writes late. In the script, KEYS and ARGV are keys and
// args; its reply is returned. A stale delivery runs nothing and returns an error wrapping
// ErrStaleDelivery (counted in redis_streaming_mq_stale_refused_total, op="guard"); so does
// a Guard after the message was acknowledged or dead-lettered. Guard before acknowledging.
//
// The script runs in the slot of the message's stream: in a Redis Cluster every key must
// have the stream's hash tag (the topic's name in braces for an unpartitioned topic,
// "{orders}:balance"; see WIRE.md, Keys), else the call fails without running. script is a
// plain body (no "#!lua" line); it is wrapped and cached by its text, so pass the same text
// each time and vary args. It returns an error for a message that was not delivered by a
// Consumer. A ctx without deadline gets one of 5 s. For writes outside Redis, use
// m.DeliveryCount as the fence in the write's condition (see docs/streams.md).
func (m *Message[T]) Guard(ctx context.Context, script string, keys []string, args ...string) (rueidis.RedisMessage, error) {
	if m.d == nil {
		return rueidis.RedisMessage{}, errors.New("stream: Guard: the message was not delivered by a Consumer")
	}
	return m.d.guard(ctx, script, keys, args)
}

func (d *delivery) guard(ctx context.Context, script string, keys, args []string) (msg rueidis.RedisMessage, err error) {
	h := d.h
	if strings.HasPrefix(strings.TrimSpace(script), "#!") {
		return msg, errInvalid("Guard: script: a body without a #! line")
	}
	fence := d.fence.Load()
	if d.acked.Load() {
		return msg, fmt.Errorf("stream: Guard %s (delivery %d): already acknowledged or dead-lettered: %w", d.id, fence, ErrStaleDelivery)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ioTimeout)
		defer cancel()
	}
	k := append(append(make([]string, 0, 1+len(keys)), h.stream), keys...)
	a := append(append(make([]string, 0, 4+len(args)), h.group, h.c.name, d.id, strconv.FormatInt(fence, 10)), args...)
	defer func() {
		if r := recover(); r != nil { // rueidis refuses keys of several slots on a cluster
			err = fmt.Errorf("stream: Guard %s: %v (every key needs the stream's hash tag)", d.id, r)
		}
	}()
	msg, err = guardScript(script).Exec(ctx, h.c.client, k, a).ToMessage()
	var re *rueidis.RedisError
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "STALEDELIVERY") {
		h.refusedStale(opGuard, d.id)
		return msg, fmt.Errorf("stream: Guard %s (delivery %d): taken over, delivered again or completed: %w", d.id, fence, ErrStaleDelivery)
	}
	if err != nil && !rueidis.IsRedisNil(err) { // a script that returns nothing replies nil
		return msg, fmt.Errorf("stream: Guard %s: %w", d.id, err)
	}
	return msg, nil
}
