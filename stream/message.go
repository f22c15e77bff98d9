package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// The wire contract (WIRE.md): every entry a producer writes has these fields, in this order
// (then its headers, see headerPrefix); consumers decode by fieldEnc alone, so producers
// written in other languages interoperate (testdata/wire_vectors.json holds exact entries).
const (
	fieldKey  = streamwire.FieldKey
	fieldTag  = streamwire.FieldTag
	fieldEnc  = streamwire.FieldEnc
	fieldBody = streamwire.FieldBody
	fieldTS   = streamwire.FieldTS
	encPlain  = streamwire.EncPlain
	encGzip   = streamwire.EncGzip
)

// maxBodyBytes bounds the decoded (decompressed) size of one body, 64 MiB: a larger body is
// undecodable, so that a small compressed entry cannot exhaust a consumer's memory. Tests
// lower it.
var maxBodyBytes = 64 << 20

// ErrUndecodable is returned (wrapped) for an entry whose body cannot be decoded: an unknown
// enc, bad base64 or gzip, or JSON that does not fit the handler's body type. Such an entry
// is poison: it is reported to OnFailure with a nil message, dead-lettered and acknowledged.
var ErrUndecodable = streamwire.ErrUndecodable

// Message is one message: an envelope (Key, Tag, Source, SendTime) and a typed Body. A
// producer sends a Message; a handler receives a *Message whose delivery fields (ID onwards)
// are set too.
//
// On the wire, Key, Tag and SendTime travel as the entry fields key, tag and ts. The body is
// the JSON encoding of Body; when that is a JSON object, the producer adds the members "key",
// and "tag" and "source" when non-empty, in front of Body's own members (as the Java system's
// message base class does), unless Body's type declares a member of that name itself. A
// consumer takes Source from the body's "source" member.
type Message[T any] struct {
	// Key is the business key. Empty on send means a new unique, time-ordered 64-bit id
	// (Snowflake layout: 41 bits of milliseconds since 2010-11-04, 10 bits of per-process
	// node, 12 bits of sequence), in decimal.
	Key string
	// Tag is a routing or filtering tag. Optional.
	Tag string
	// Source names the sender. Optional.
	Source string
	// SendTime is the send time, kept to the millisecond on the wire. Zero on send means now.
	SendTime time.Time
	// Body is the payload, encoded as JSON.
	Body T
	// Headers are metadata beside the body (trace context, correlation ids): each travels
	// as one extra entry field, "h:" + name, after the five contract fields, so
	// consumers that ignore unknown fields still read the entry. Optional. Send checks the
	// limits: at most 64 headers; each name 1 to 256 bytes of printable ASCII other than
	// space (0x21-0x7E); each value valid UTF-8; 64 KiB of names and values in all. Send
	// does not modify the map; a delivered message has a nil map when its entry has no
	// header fields.
	Headers map[string]string

	// ID is the stream entry id ("1700000000000-0"). Set on delivery.
	ID string
	// Topic is the topic the message was read from (without the env suffix). Set on delivery.
	Topic string
	// Partition is the partition of the topic the message was read from (Config.Partitions),
	// 0 for an unpartitioned topic. Set on delivery.
	Partition int
	// Group is the consumer group that received the message. Set on delivery.
	Group string
	// Consumer is the consumer name that received it. Set on delivery.
	Consumer string
	// DeliveryCount is 1 on the first delivery and grows with each redelivery. Set on
	// delivery. It is the delivery's fencing token: Redis raises the entry's count on every
	// claim by any consumer of the group, so a later delivery always has a larger one. The
	// consumer refuses the writes of a delivery whose count is no longer the entry's (see
	// ErrStaleDelivery and Guard); writes elsewhere can keep the highest token applied per
	// entry (ID) and refuse smaller ones (docs/streams.md).
	DeliveryCount int64

	d *delivery
}

// NewMessage returns a message with body and every other field zero: on send, it gets a new
// key and the current time.
func NewMessage[T any](body T) Message[T] { return Message[T]{Body: body} }

// DeferAck tells the consumer not to acknowledge the message when the handler returns nil:
// the handler (or code it hands the message to) acknowledges it later with Ack. Until then
// the entry stays pending, no longer leased, and like any pending entry it is taken over once
// it has been idle for Autoclaim.MinIdle (and its retry backoff), so ack within that time.
// DeferAck does nothing on a message that was not delivered by a Consumer.
func (m *Message[T]) DeferAck() {
	if m.d != nil {
		m.d.deferred.Store(true)
	}
}

// Ack acknowledges the message now (XACK). It may be called from any goroutine, during or
// after the handler; a second Ack does nothing. A message acknowledged by Ack is not
// acknowledged again when its handler returns. It returns an error for a message that was
// not delivered by a Consumer, or when Redis fails (the entry then stays pending). The
// acknowledgement of a stale delivery (taken over by another consumer, delivered again, or
// completed by the delivery that superseded it) is refused: the error wraps
// ErrStaleDelivery.
func (m *Message[T]) Ack(ctx context.Context) error {
	if m.d == nil {
		return errors.New("stream: Ack: the message was not delivered by a Consumer")
	}
	return m.d.ack(ctx)
}

// DeadLetter moves the message to its topic's dead-letter stream now, with reason as the
// dead letter's Error, and acknowledges it there, in one atomic step (as the consumer does
// after the last failed delivery): use it for a message the handler knows no retry will fix
// when returning Permanent(err) does not fit (a message handed to another goroutine with
// DeferAck, say). OnFailure is not called. After it the message counts as acknowledged: the
// handler's return changes nothing, and Ack does nothing. It returns an error for a message
// not delivered by a Consumer, one already acknowledged or dead-lettered (wrapping
// redstream.ErrNotFound when it is no longer pending in the group), or a Redis failure (the
// entry then stays pending). A stale delivery (taken over by another consumer, delivered
// again, or completed since) moves nothing: the error wraps ErrStaleDelivery (and
// redstream.ErrNotFound when the entry is no longer pending). A ctx without deadline gets
// one of 10 s.
func (m *Message[T]) DeadLetter(ctx context.Context, reason string) error {
	if m.d == nil {
		return errors.New("stream: DeadLetter: the message was not delivered by a Consumer")
	}
	return m.d.deadLetter(ctx, reason)
}

// delivery is the link from a delivered message back to its handler, for acknowledgement.
type delivery struct {
	h        *handlerRT
	id       string
	fence    *atomic.Int64 // the fence its writes check: the delivery count (see dispatcher.dispatch)
	fields   []string      // the entry's fields
	bodyErr  error         // the body's decoding error (lenient handlers only)
	deferred atomic.Bool
	acked    atomic.Bool
	result   atomic.Pointer[string] // the JSON of Message.SetResult's value
}

// fieldOf returns the value of field name in fields (name, value pairs), "" when absent.
func fieldOf(fields []string, name string) string {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == name {
			return fields[i+1]
		}
	}
	return ""
}

func (d *delivery) deadLetter(ctx context.Context, reason string) error {
	if d.acked.Swap(true) {
		return fmt.Errorf("stream: dead-letter %s: already acknowledged or dead-lettered", d.id)
	}
	h := d.h
	fence := d.fence.Load()
	res, err := moveToDeadLetter(ctx, h.c.client, deadLetterMove{
		Stream: h.stream, DLQ: h.dlq, Group: h.group, ID: d.id, Reason: reason,
		MaxLen: h.c.cfg.DeadLetter.MaxLen, MaxAgeMs: h.c.cfg.DeadLetter.MaxAge.Milliseconds(),
		Owner: h.c.name, Deliveries: fence,
	})
	if err != nil {
		d.acked.Store(false)
		return err
	}
	h.m.dlqTrimmed.Add(int(res.Trimmed))
	switch res.Status {
	case 1:
		h.m.deadLettered.Inc()
		h.m.hist[histDead].Add(1)
		h.m.acked.Inc()
		if h.results() != nil {
			h.results().failed(d.id, fieldOf(d.fields, fieldKey), fence, reason)
		}
		return nil
	case -1:
		h.trimmedWhilePending([]string{d.id})
		return fmt.Errorf("stream: dead-letter %s: deleted from the stream while pending (acknowledged): %w", d.id, redstream.ErrNotFound)
	case 3:
		h.refusedStale(opDeadLetter, d.id)
		return fmt.Errorf("stream: dead-letter %s (delivery %d): taken over or delivered again: %w", d.id, fence, ErrStaleDelivery)
	}
	h.refusedStale(opDeadLetter, d.id)
	return fmt.Errorf("stream: dead-letter %s (delivery %d): not pending in group %q: %w (%w)", d.id, fence, h.group, ErrStaleDelivery, redstream.ErrNotFound)
}

func (d *delivery) ack(ctx context.Context) error {
	if d.acked.Swap(true) {
		return nil
	}
	if err := d.h.ackNow(ctx, d.id, d.fence.Load()); err != nil {
		if !errors.Is(err, ErrStaleDelivery) {
			d.acked.Store(false)
		}
		return err
	}
	return nil
}

// outgoing is implemented by every Message[T]: what a producer needs to encode it.
type outgoing interface {
	envelope() envelope
}

// envelope is a message to encode, with its body type erased.
type envelope struct {
	key, tag, source string
	sendTime         time.Time
	headers          map[string]string
	body             any
	typ              reflect.Type
}

func (m Message[T]) envelope() envelope {
	return envelope{key: m.Key, tag: m.Tag, source: m.Source, sendTime: m.SendTime, headers: m.Headers, body: m.Body, typ: reflect.TypeFor[T]()}
}

// Sendable is any Message[T]: the argument of Producer.Send.
type Sendable interface{ outgoing }

// reserved records which envelope members a body type declares itself.
type reserved struct{ key, tag, source bool }

var reservedCache sync.Map // reflect.Type -> reserved

// reservedOf returns the envelope members t's JSON object declares (for struct types; other
// types declare none).
func reservedOf(t reflect.Type) reserved {
	if t == nil {
		return reserved{}
	}
	if r, ok := reservedCache.Load(t); ok {
		return r.(reserved)
	}
	var r reserved
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				walk(f.Type, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			switch strings.ToLower(name) {
			case fieldKey:
				r.key = true
			case fieldTag:
				r.tag = true
			case "source":
				r.source = true
			}
		}
	}
	walk(t, 0)
	reservedCache.Store(t, r)
	return r
}

// encodeEntry returns the entry fields (name, value, ...) of one message: the five contract
// fields, then one headerPrefix field per header, sorted by name.
func encodeEntry(key, tag, source string, sendTime time.Time, body any, t reflect.Type, compress bool, headers map[string]string) ([]string, error) {
	if err := validateHeaders(headers); err != nil {
		return nil, err
	}
	js, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("stream: encode body: %w", err)
	}
	if len(js) > 0 && js[0] == '{' {
		js = spliceEnvelope(js, key, tag, source, reservedOf(t))
	}
	enc, b, err := streamwire.EncodeBody(js, compress)
	if err != nil {
		return nil, err
	}
	fields := make([]string, 0, 10+2*len(headers))
	fields = append(fields, fieldKey, key, fieldTag, tag, fieldEnc, enc, fieldBody, b, fieldTS, strconv.FormatInt(sendTime.UnixMilli(), 10))
	return appendHeaders(fields, headers), nil
}

// appendHeaders appends one headerPrefix field per header, sorted by name.
func appendHeaders(fields []string, headers map[string]string) []string {
	if len(headers) == 0 {
		return fields
	}
	names := make([]string, 0, len(headers))
	for n := range headers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fields = append(fields, headerPrefix+n, headers[n])
	}
	return fields
}

// spliceEnvelope inserts the envelope members in front of a JSON object's own members.
func spliceEnvelope(obj []byte, key, tag, source string, r reserved) []byte {
	out := make([]byte, 0, len(obj)+len(key)+len(tag)+len(source)+32)
	out = append(out, '{')
	n := 0
	add := func(name, v string) {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, `":`...)
		out = appendJSONString(out, v)
		n++
	}
	if !r.key {
		add(fieldKey, key)
	}
	if tag != "" && !r.tag {
		add(fieldTag, tag)
	}
	if source != "" && !r.source {
		add("source", source)
	}
	rest := bytes.TrimSpace(obj[1:])
	if n == 0 {
		return obj
	}
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeBody returns the JSON text of a body field given its enc field (streamwire.DecodeBody):
// a body larger than maxBodyBytes, once decompressed, is undecodable.
func decodeBody(enc, body string) ([]byte, error) {
	return streamwire.DecodeBody(enc, body, maxBodyBytes)
}

// entry is one stream entry as read: its id and its fields as name, value pairs.
type entry struct {
	id     string
	fields []string
}

func (e entry) get(name string) (string, bool) {
	for i := 0; i+1 < len(e.fields); i += 2 {
		if e.fields[i] == name {
			return e.fields[i+1], true
		}
	}
	return "", false
}

var sourceMember = []byte(`"source"`)

// decodeInto fills m's envelope and body from e. raw is the decoded JSON body (nil when even
// that failed); the error wraps ErrUndecodable.
func decodeInto[T any](m *Message[T], e entry) (raw []byte, err error) {
	m.Key, _ = e.get(fieldKey)
	m.Tag, _ = e.get(fieldTag)
	m.Headers = decodeHeaders(e.fields)
	if ts, ok := e.get(fieldTS); ok {
		if ms, err := strconv.ParseInt(ts, 10, 64); err == nil {
			m.SendTime = time.UnixMilli(ms)
		}
	}
	enc, _ := e.get(fieldEnc)
	body, _ := e.get(fieldBody)
	raw, err = decodeBody(enc, body)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &m.Body); err != nil {
		return raw, fmt.Errorf("%w: body: %v", ErrUndecodable, err)
	}
	if bytes.Contains(raw, sourceMember) && !reservedOf(reflect.TypeFor[T]()).source {
		var s struct {
			Source json.RawMessage `json:"source"`
		}
		if json.Unmarshal(raw, &s) == nil && len(s.Source) > 0 && s.Source[0] == '"' {
			_ = json.Unmarshal(s.Source, &m.Source)
		}
	}
	return raw, nil
}

// Key generation: 41 bits of milliseconds since keyEpoch, 10 bits of node (random per
// process), 12 bits of sequence: the Snowflake layout. Keys from one process are unique and
// increasing (a clock going backwards is absorbed); two processes collide only if they drew
// the same node and hit the same millisecond and sequence.
const keyEpoch = 1288834974657 // Twitter's Snowflake epoch, 2010-11-04, ms

var keyState struct {
	mu   sync.Mutex
	last int64 // ms since keyEpoch of the last key
	seq  int64
	node int64
}

func init() {
	h := uint64(time.Now().UnixNano()) ^ uint64(pid())<<32
	keyState.node = int64((h*0x9E3779B97F4A7C15)>>54) & 1023
}

// nextKey returns a new message key: a unique, time-ordered 64-bit id (Snowflake layout: 41
// bits of milliseconds since 2010-11-04, 10 bits of per-process node, 12 bits of sequence).
// It is safe for concurrent use.
func nextKey() int64 {
	keyState.mu.Lock()
	defer keyState.mu.Unlock()
	now := time.Now().UnixMilli() - keyEpoch
	if now <= keyState.last {
		now = keyState.last
		keyState.seq++
		if keyState.seq > 4095 {
			now++
			keyState.seq = 0
		}
	} else {
		keyState.seq = 0
	}
	keyState.last = now
	return now<<22 | keyState.node<<12 | keyState.seq
}
