package stream

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// Defaults of ResultOptions.
const (
	defaultResultTTL        = 24 * time.Hour // how long a record is kept after its last write
	defaultResultMaxBytes   = 1 << 20        // the JSON of one progress report or result
	defaultResultMaxRecords = 100_000        // the records kept per topic and group
)

// ResultOptions turns on result records for a handler (Handler.Results): the consumer
// records, for every entry it handles, the handler's progress reports (Message.Progress),
// its result (Message.SetResult) when Handle returns nil, or the reason it was
// dead-lettered, so that a producer anywhere can read them (Producer.Result) or wait for
// them (Producer.WaitResult). A record lives in the topic's hash slot beside its stream
// (WIRE.md, Keys), for TTL after its last write; MaxRecords bounds how many a topic and
// group keep, the oldest deleted first. Every write is fenced by the delivery count (see
// ErrStaleDelivery): a delivery taken over by another consumer cannot overwrite the outcome
// of the delivery that superseded it. The zero value means the defaults.
type ResultOptions struct {
	// TTL is how long a record is kept after its last write, 1 ms to 30 days. Default 24 h.
	TTL time.Duration
	// MaxBytes bounds the JSON of one progress report or result, 1 byte to 64 MiB: a
	// larger one is an error of Progress or SetResult. Default 1 MiB.
	MaxBytes int
	// MaxRecords bounds the records one topic and group keep, 1 to 10,000,000: each write
	// beyond it deletes up to 16 of the oldest. Default 100,000.
	MaxRecords int64
}

// check validates o and returns it with its defaults.
func (o ResultOptions) check(topic, group string) (ResultOptions, error) {
	switch {
	case o.TTL < 0 || o.TTL > maxDuration || (o.TTL > 0 && o.TTL < time.Millisecond):
		return o, errInvalid("handler %s/%s: Results.TTL %v: want 1ms to %v (0 for %v)", topic, group, o.TTL, maxDuration, defaultResultTTL)
	case o.MaxBytes < 0 || o.MaxBytes > 64<<20:
		return o, errInvalid("handler %s/%s: Results.MaxBytes %d: want 1 to %d (0 for %d)", topic, group, o.MaxBytes, 64<<20, defaultResultMaxBytes)
	case o.MaxRecords < 0 || o.MaxRecords > 10_000_000:
		return o, errInvalid("handler %s/%s: Results.MaxRecords %d: want 1 to 10000000 (0 for %d)", topic, group, o.MaxRecords, defaultResultMaxRecords)
	}
	if o.TTL == 0 {
		o.TTL = defaultResultTTL
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = defaultResultMaxBytes
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = defaultResultMaxRecords
	}
	return o, nil
}

// ResultState is the state of a result record.
type ResultState string

// The states of a result record.
const (
	// ResultActive: a delivery reported progress; the handler has not finished.
	ResultActive ResultState = "active"
	// ResultCompleted: Handle returned nil; Value holds the result it set, if any.
	ResultCompleted ResultState = "completed"
	// ResultFailed: the entry was dead-lettered; Error holds the reason.
	ResultFailed ResultState = "failed"
)

// Result is an entry's result record, as Producer.Result reads it.
type Result struct {
	// ID is the entry id (the id Send returned).
	ID string
	// Key is the message's Key.
	Key string
	// State is where the entry's handling stands.
	State ResultState
	// Progress is the JSON of the latest progress report (Message.Progress); nil for none.
	Progress json.RawMessage
	// Value is the JSON of the result (Message.SetResult) once State is ResultCompleted;
	// nil when the handler set none.
	Value json.RawMessage
	// Error is the dead-letter reason once State is ResultFailed.
	Error string
	// DeliveryCount is the delivery that wrote the record last (its fence).
	DeliveryCount int64
	// Updated is the time of the record's last write (the server's clock, to the ms).
	Updated time.Time
}

// Done reports whether the entry's handling is over: completed or failed.
func (r Result) Done() bool { return r.State == ResultCompleted || r.State == ResultFailed }

//go:embed scripts/result.lua
var resultLua string

var resultScript = rueidis.NewLuaScript(resultLua)

// opResult is the op label of refused result writes in redis_streaming_mq_stale_refused_total.
const opResult = "result"

// resulter is the role that writes a handler runtime's result records.
type resulter struct {
	s      *scope
	o      ResultOptions
	prefix string // the record prefix (streamwire.ResultKeys)
	index  string
}

// newResulter returns the resulter of s under o (already checked), or nil for a handler
// without results.
func newResulter(s *scope, o *ResultOptions) *resulter {
	if o == nil {
		return nil
	}
	prefix, index := streamwire.ResultKeys(s.stream, s.group)
	return &resulter{s: s, o: *o, prefix: prefix, index: index}
}

// write runs result.lua for entry id in mode with value, as the delivery fence; a ctx
// without deadline gets one of ioTimeout.
func (r *resulter) write(ctx context.Context, mode, id, key string, fence int64, value string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ioTimeout)
		defer cancel()
	}
	s := r.s
	err := resultScript.Exec(ctx, s.c.client, []string{s.stream, r.prefix + id, r.index},
		[]string{mode, s.group, s.c.name, id, strconv.FormatInt(fence, 10), strconv.FormatInt(r.o.TTL.Milliseconds(), 10),
			strconv.FormatInt(r.o.MaxRecords, 10), r.prefix, value, key}).Error()
	var re *rueidis.RedisError
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "STALEDELIVERY") {
		s.refusedStale(opResult, id)
		return fmt.Errorf("stream: result of %s (delivery %d): taken over, delivered again or completed: %w", id, fence, ErrStaleDelivery)
	}
	if err != nil {
		s.m.resultErrors.Inc()
		return fmt.Errorf("stream: result of %s: %w", id, err)
	}
	s.m.results(mode).Inc()
	return nil
}

// encode returns the JSON of v, checked against MaxBytes.
func (r *resulter) encode(what string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("stream: %s: %w", what, err)
	}
	if len(b) > r.o.MaxBytes {
		return "", fmt.Errorf("stream: %s: %d bytes of JSON, more than Results.MaxBytes (%d)", what, len(b), r.o.MaxBytes)
	}
	return string(b), nil
}

// failed records the dead-lettered entry id (delivery fence) with reason, logging a
// failure (the dead letter itself is written).
func (r *resulter) failed(id, key string, fence int64, reason string) {
	if err := r.write(context.Background(), "failed", id, key, fence, reason); err != nil && !errors.Is(err, ErrStaleDelivery) {
		r.s.log.Warn("stream: the failure of a dead-lettered entry was not recorded in its result", "id", id, "error", err)
	}
}

// Progress records v, encoded as JSON, as the message's progress in its result record
// (Handler.Results), for Producer.Result and Producer.WaitResult to read; a later report
// replaces it. It returns an error for a message not delivered by a Consumer, a handler
// without Results, a value JSON cannot encode or larger than Results.MaxBytes, a delivery
// that is no longer current (wrapping ErrStaleDelivery: the entry was taken over, delivered
// again or completed; counted in redis_streaming_mq_stale_refused_total, op="result"), or a
// Redis failure. A ctx without deadline gets one of 5 s.
func (m *Message[T]) Progress(ctx context.Context, v any) error {
	d, r, err := m.resulter("Progress")
	if err != nil {
		return err
	}
	b, err := r.encode("Progress", v)
	if err != nil {
		return err
	}
	if d.acked.Load() {
		return fmt.Errorf("stream: Progress of %s: already acknowledged or dead-lettered: %w", d.id, ErrStaleDelivery)
	}
	return r.write(ctx, "progress", d.id, m.Key, d.fence.Load(), b)
}

// SetResult sets v, encoded as JSON, as the message's result: when Handle returns nil the
// consumer records it, completed, in the message's result record (Handler.Results) before
// acknowledging the entry, in one fenced write. A later SetResult replaces it; without one
// the record completes with no Value. It returns an error for a message not delivered by a
// Consumer, a handler without Results, or a value JSON cannot encode or larger than
// Results.MaxBytes. If the record cannot be written (Redis fails, or the delivery is no
// longer current), the delivery fails as if Handle had returned the error: it is retried
// per the handler's policy, so a result is recorded at least once.
func (m *Message[T]) SetResult(v any) error {
	d, r, err := m.resulter("SetResult")
	if err != nil {
		return err
	}
	b, err := r.encode("SetResult", v)
	if err != nil {
		return err
	}
	d.result.Store(&b)
	return nil
}

// resulter returns m's delivery and its handler's resulter, or why there is none.
func (m *Message[T]) resulter(what string) (*delivery, *resulter, error) {
	if m.d == nil {
		return nil, nil, fmt.Errorf("stream: %s: the message was not delivered by a Consumer", what)
	}
	if m.d.h.results() == nil {
		return nil, nil, fmt.Errorf("stream: %s: the handler of %s/%s records no results (Handler.Results)", what, m.d.h.topic, m.d.h.group)
	}
	return m.d, m.d.h.results(), nil
}

// complete records the completed delivery d (Handle returned nil), with the result it set.
func (r *resulter) complete(ctx context.Context, d *delivery, key string) error {
	v := ""
	if p := d.result.Load(); p != nil {
		v = *p
	}
	return r.write(ctx, "completed", d.id, key, d.fence.Load(), v)
}

// resultStream returns the stream of topic whose results Result reads: an unpartitioned
// topic's one stream.
func (p *Producer) resultStream(topic string) (string, error) {
	t, err := p.topic(topic)
	if err != nil {
		return "", err
	}
	if len(t.streams) > 1 {
		return "", errInvalid("topic %q is partitioned or has priority levels: results are recorded for topics of one stream only (the id Send returns does not name the stream)", topic)
	}
	return t.streams[0], nil
}

// Result reads the result record of the entry id of topic handled by group
// (Handler.Results). It returns an error wrapping redstream.ErrNotFound when there is none
// (not handled yet, no progress reported, expired, or the handler records no results), an
// error wrapping redstream.ErrInvalidConfig for a bad topic or a partitioned one (results
// are recorded for unpartitioned topics only), an error naming the field for a record that is
// not one the result script writes, and a Redis failure. The call has
// Config.SendTimeout (or ctx's earlier deadline).
func (p *Producer) Result(ctx context.Context, topic, group, id string) (Result, error) {
	stream, err := p.resultStream(topic)
	if err != nil {
		return Result{}, err
	}
	if group == "" || id == "" {
		return Result{}, errInvalid("Result: empty group or id")
	}
	ctx, cancel := p.sendContext(ctx)
	defer cancel()
	prefix, _ := streamwire.ResultKeys(stream, group)
	m, err := p.do(ctx, p.client.B().Hgetall().Key(prefix+id).Build()).AsStrMap()
	if err != nil {
		return Result{}, fmt.Errorf("stream: Result of %s in %s/%s: %w", id, topic, group, err)
	}
	if len(m) == 0 {
		return Result{}, fmt.Errorf("stream: Result of %s in %s/%s: no record: %w", id, topic, group, redstream.ErrNotFound)
	}
	r, err := parseResult(id, m)
	if err != nil {
		return Result{}, fmt.Errorf("stream: Result of %s in %s/%s: %w", id, topic, group, err)
	}
	return r, nil
}

// parseResult reads a record's fields. A record whose fields are not what the result script
// writes (a state it does not write, a value that is not JSON, a number that is not one) is
// an error naming the field, never a Result that would fail later, in json.Marshal.
func parseResult(id string, m map[string]string) (Result, error) {
	bad := func(field, v string) (Result, error) {
		return Result{}, fmt.Errorf("stream: the result record of %s is malformed: field %q holds %.64q", id, field, v)
	}
	r := Result{ID: id, Key: m["key"], State: ResultState(m["state"]), Error: m["error"]}
	switch r.State {
	case ResultActive, ResultCompleted, ResultFailed:
	default:
		return bad("state", m["state"])
	}
	for _, f := range []struct {
		name string
		to   *json.RawMessage
	}{{"progress", &r.Progress}, {"result", &r.Value}} {
		if v, ok := m[f.name]; ok {
			if !json.Valid([]byte(v)) {
				return bad(f.name, v)
			}
			*f.to = json.RawMessage(v)
		}
	}
	for _, f := range []struct {
		name string
		max  int64
		to   func(int64)
	}{
		{"fence", math.MaxInt64, func(n int64) { r.DeliveryCount = n }},
		{"updated", maxResultMillis, func(ms int64) { r.Updated = time.UnixMilli(ms) }},
	} {
		if v, ok := m[f.name]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > f.max {
				return bad(f.name, v)
			}
			f.to(n)
		}
	}
	return r, nil
}

// maxResultMillis is the latest update time a result record may hold: the last ms of year
// 9999 (a later time does not marshal as JSON, and no server clock is there).
const maxResultMillis = 253402300799999

// defaultResultWait bounds Producer.WaitResult for a ctx without deadline.
const defaultResultWait = time.Minute

// WaitResult waits until the entry id of topic handled by group has completed or failed
// (Result.Done) and returns its record, polling Result from every 10 ms up to every 500 ms
// (doubling). It returns ctx's error, or context.DeadlineExceeded after a minute for a ctx
// without deadline, when the entry is not done by then, with the last record
// read (progress included) if there was one. A record not written yet (the entry not
// handled yet) is waited for; other errors are Result's.
func (p *Producer) WaitResult(ctx context.Context, topic, group, id string) (Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultResultWait)
		defer cancel()
	}
	var last Result
	wait := 10 * time.Millisecond
	for {
		r, err := p.Result(ctx, topic, group, id)
		switch {
		case err == nil:
			last = r
			if r.Done() {
				return r, nil
			}
		case !errors.Is(err, redstream.ErrNotFound):
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}
