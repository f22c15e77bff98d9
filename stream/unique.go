package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redstream-go/redstream/internal/streamwire"
)

// Unique sends.
//
// A send with WithUnique writes its message at most once per unique id and topic, decided
// in one script (xadd_unique.lua) in the topic's hash slot, so it holds on Redis Cluster and
// across any number of producers. The records of a topic's ids are one hash with their
// expiry times in a sorted set beside it (streamwire.UniqueKeys), pruned a few at a time by
// each unique send; a record never outlives Unique.TTL after its message was sent (or, for a
// scheduled one, after its due time).

// ErrDuplicate is returned, wrapped, by a Send with WithUnique whose id is taken: nothing is
// written, and Send returns the id of the message that holds it (an entry id, or a schedule
// id for a scheduled message) beside the error.
var ErrDuplicate = errors.New("stream: duplicate send")

// Unique says how WithUnique deduplicates sends of one id.
type Unique struct {
	// TTL is how long the id is remembered at most (default 24 h). With Throttle, it is the
	// window: a send within TTL of the first is a duplicate, acknowledged or not.
	TTL time.Duration
	// Throttle makes the id taken for TTL after the first send. Without it, the id is taken
	// until the first message is acknowledged by every group of the topic (or deleted or
	// trimmed from the stream, or its scheduled send cancelled), and at most for TTL; a
	// topic without groups has acknowledged nothing.
	Throttle bool
	// Debounce, for a scheduled send (WithDelay or WithDeliverAt): while the message holding
	// the id is still scheduled, a later send replaces its body, key and headers and moves
	// its due time to the later send's, and Send returns the same schedule id and no
	// error. Once the message is in the stream the id is taken until it is acknowledged, as
	// without Throttle.
	Debounce bool
}

// defaultUniqueTTL is Unique.TTL's default.
const defaultUniqueTTL = 24 * time.Hour

// maxUniqueTTL bounds Unique.TTL.
const maxUniqueTTL = 366 * 24 * time.Hour

// WithUnique makes the send write its message at most once per id and topic, as u says;
// a duplicate writes nothing, returns the id of the message holding the unique id and an
// error wrapping ErrDuplicate, and is counted in redis_streaming_mq_duplicate_sends_total.
// An empty id stands for a hash of the topic and the message's body (SHA-256 of its JSON, as
// encoding/json writes it: a struct's fields in order, a map's keys sorted), so that the
// same payload is sent once.
//
// An id follows the rules of WithIdempotencyKey's keys (1 to 128 bytes of ASCII letters,
// digits and - _ . : / + = @). In a partitioned topic a message without a Key goes to the
// partition of its unique id; one with a Key to the partition of its Key, so give the
// messages of one id one Key. WithUnique cannot be combined with WithIdempotencyKey nor used
// with SendBatch, and Debounce needs WithDelay or WithDeliverAt; Send fails with an error
// wrapping redstream.ErrInvalidConfig otherwise, or for a TTL below a millisecond or above
// a year.
func WithUnique(id string, u Unique) SendOption {
	return func(o *sendOptions) {
		o.unique = &uniqueSend{id: id, u: u}
		if id != "" {
			o.uniqueErr = checkIdempotencyKey("WithUnique", id)
		}
		switch {
		case u.TTL < 0 || (u.TTL > 0 && u.TTL < time.Millisecond) || u.TTL > maxUniqueTTL:
			o.uniqueErr = errInvalid("WithUnique: TTL = %v, want 0 (24 h) or 1ms..%v", u.TTL, maxUniqueTTL)
		case u.Throttle && u.Debounce:
			o.uniqueErr = errInvalid("WithUnique: Throttle and Debounce are exclusive")
		}
	}
}

// uniqueSend is a send's WithUnique.
type uniqueSend struct {
	id string
	u  Unique
}

// mode returns xadd_unique.lua's mode argument.
func (s *uniqueSend) mode() string {
	switch {
	case s.u.Throttle:
		return "ttl"
	case s.u.Debounce:
		return "debounce"
	}
	return "acked"
}

// checkUnique validates a send's WithUnique against its other options.
func (o *sendOptions) checkUnique(batch bool) error {
	if o.unique == nil {
		return nil
	}
	switch {
	case o.uniqueErr != nil:
		return o.uniqueErr
	case batch:
		return errInvalid("SendBatch: WithUnique is for Send")
	case o.idem != "":
		return errInvalid("Send: WithUnique cannot be combined with WithIdempotencyKey")
	case o.unique.u.Debounce && !o.delayed:
		return errInvalid("Send: WithUnique: Debounce needs WithDelay or WithDeliverAt")
	}
	return nil
}

// payloadID returns the unique id standing for an empty one: a hash of the topic and the
// JSON of the body.
func payloadID(topic string, body any) (string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("stream: WithUnique: encode the body to hash it: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(b)
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// writeUnique runs xadd_unique.lua for out: the message is sent, debounced or refused.
func (p *Producer) writeUnique(ctx context.Context, out *Outgoing) (string, error) {
	out.uniq = out.opts.unique.id
	fields, err := p.fields(out)
	if err != nil {
		return "", err
	}
	if out.uniq == "" {
		if out.uniq, err = payloadID(out.Topic, out.Body); err != nil {
			return "", err
		}
		out.stream = out.t.routeOut(out)
	}
	o := out.opts
	ttl := o.unique.u.TTL
	if ttl == 0 {
		ttl = defaultUniqueTTL
	}
	sched, msgs := streamwire.DelayedKeys(out.stream)
	recs, exps, links := streamwire.UniqueKeys(out.stream)
	args := []string{out.uniq, o.unique.mode(), strconv.FormatInt(ttl.Milliseconds(), 10), strconv.FormatInt(max(o.maxLen, 0), 10)}
	if o.delayed {
		mode, ms := o.delayArgs()
		out.scheduleID = scheduleID()
		args = append(args, mode, ms, out.scheduleID, streamwire.EncodeFields(fields))
	} else {
		args = append(append(args, "", "0", ""), fields...)
	}
	keys := []string{out.stream, recs, exps, sched, msgs, links}
	res, err := p.exec(ctx, xaddUniqueScript, keys, args).ToArray()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return "", fmt.Errorf("stream: send to %q: %w", out.stream, sendErr(err))
	}
	status, _ := res[0].AsInt64()
	id, _ := res[1].ToString()
	switch status {
	case 0:
		out.t.duplicates.Inc()
		return id, fmt.Errorf("%w: unique id %q of topic %q is held by message %s", ErrDuplicate, out.uniq, out.Topic, id)
	case 2:
		out.t.duplicates.Inc()
		return id, nil
	}
	if o.delayed {
		out.t.scheduled.Inc()
	} else {
		out.t.produced.Inc()
	}
	return id, nil
}
