package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/metrics"
)

// DeadLetter is one entry of a topic's dead-letter stream.
type DeadLetter struct {
	// ID is the entry id in the dead-letter stream.
	ID string
	// Fields are the original entry's fields (key, tag, enc, body, ts, and any other field
	// its producer wrote), without the dl_* fields below.
	Fields map[string]string
	// OriginalID is the entry's id in the topic stream (dl_id).
	OriginalID string
	// Group and Consumer are the group that gave up on it and the consumer that last held
	// it (dl_group, dl_consumer).
	Group, Consumer string
	// Deliveries is how many times it was delivered to Group (dl_deliveries).
	Deliveries int64
	// Error is the reason (dl_error): the handler's error, "stream: max retry exceeded...",
	// or "poison: ..." for an undecodable entry.
	Error string
	// Time is when it was dead-lettered, by the Redis server's clock (dl_ts).
	Time time.Time
}

// Body returns the dead letter's JSON body, decoded by its enc field (see DecodeBody).
func (d DeadLetter) Body() ([]byte, error) {
	return DecodeBody(d.Fields[FieldEnc], d.Fields[FieldBody])
}

// DeadLetters administers the dead-letter streams: list, get, replay, delete, purge. It is
// safe for concurrent use and does not own its client.
type DeadLetters struct {
	client rueidis.Client
	cfg    Config
}

// NewDeadLetters returns the dead-letter administration for cfg (whose EnvIsolation and Env
// select the streams). An invalid cfg is an error wrapping redstream.ErrInvalidConfig.
func NewDeadLetters(client rueidis.Client, cfg Config) (*DeadLetters, error) {
	if client == nil {
		return nil, errInvalid("nil rueidis client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DeadLetters{client: client, cfg: cfg.WithDefaults()}, nil
}

func (d *DeadLetters) keys(topic string) (stream, dlq string, err error) {
	stream, err = StreamName(d.cfg, topic)
	if err != nil {
		return "", "", err
	}
	return stream, DeadLetterStreamName(stream), nil
}

// ListOptions selects dead letters by id range.
type ListOptions struct {
	Start string // first id, inclusive; "" means "-" (the oldest)
	End   string // last id, inclusive; "" means "+" (the newest)
	Count int64  // most entries returned; <= 0 means 100
}

// List returns the dead letters of topic in id order (oldest first).
func (d *DeadLetters) List(ctx context.Context, topic string, o ListOptions) ([]DeadLetter, error) {
	_, dlq, err := d.keys(topic)
	if err != nil {
		return nil, err
	}
	if o.Start == "" {
		o.Start = "-"
	}
	if o.End == "" {
		o.End = "+"
	}
	if o.Count <= 0 {
		o.Count = 100
	}
	cl := d.client
	msg, err := cl.Do(ctx, cl.B().Xrange().Key(dlq).Start(o.Start).End(o.End).Count(o.Count).Build()).ToMessage()
	if err != nil {
		return nil, fmt.Errorf("stream: list dead letters of %q: %w", topic, err)
	}
	entries, err := parseEntries(msg)
	if err != nil {
		return nil, fmt.Errorf("stream: list dead letters of %q: %w", topic, err)
	}
	out := make([]DeadLetter, 0, len(entries))
	for _, e := range entries {
		out = append(out, toDeadLetter(e))
	}
	return out, nil
}

// Get returns the dead letter id of topic, or an error wrapping redstream.ErrNotFound.
func (d *DeadLetters) Get(ctx context.Context, topic, id string) (DeadLetter, error) {
	l, err := d.List(ctx, topic, ListOptions{Start: id, End: id, Count: 1})
	if err != nil {
		return DeadLetter{}, err
	}
	if len(l) == 0 {
		return DeadLetter{}, fmt.Errorf("stream: dead letter %s of %q: %w", id, topic, redstream.ErrNotFound)
	}
	return l[0], nil
}

func toDeadLetter(e entry) DeadLetter {
	dl := DeadLetter{ID: e.id, Fields: make(map[string]string, len(e.fields)/2)}
	for i := 0; i+1 < len(e.fields); i += 2 {
		k, v := e.fields[i], e.fields[i+1]
		switch k {
		case "dl_id":
			dl.OriginalID = v
		case "dl_group":
			dl.Group = v
		case "dl_consumer":
			dl.Consumer = v
		case "dl_deliveries":
			dl.Deliveries, _ = strconv.ParseInt(v, 10, 64)
		case "dl_error":
			dl.Error = v
		case "dl_ts":
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				dl.Time = time.UnixMilli(ms)
			}
		default:
			if !strings.HasPrefix(k, "dl_") {
				dl.Fields[k] = v
			}
		}
	}
	return dl
}

// ReplayOption changes a replay.
type ReplayOption func(*replayOptions)

type replayOptions struct{ allGroups bool }

// ToAllGroups replays to every group of the topic. By default a replayed entry carries a
// replay_group field naming the dead letter's group, and the other groups' consumers
// acknowledge it without handling it, since they handled the original already.
func ToAllGroups() ReplayOption { return func(o *replayOptions) { o.allGroups = true } }

// Replay moves dead letter id of topic back onto the topic, atomically (one script: XADD to
// the topic, XDEL from the dead-letter stream), and returns the new entry's id. A missing
// dead letter is an error wrapping redstream.ErrNotFound. Replays are counted in
// redis_streaming_dlq_replay_success_total / ..._failure_total.
func (d *DeadLetters) Replay(ctx context.Context, topic, id string, opts ...ReplayOption) (string, error) {
	stream, dlq, err := d.keys(topic)
	if err != nil {
		return "", err
	}
	var o replayOptions
	for _, f := range opts {
		f(&o)
	}
	target := "1"
	if o.allGroups {
		target = "0"
	}
	res := replayScript.Exec(ctx, d.client, []string{dlq, stream}, []string{id, target})
	newID, err := res.ToString()
	if err != nil {
		d.cfg.Metrics.GetOrCreateCounter(metrics.Name(MetricReplayFailure, "topic", topic)).Inc()
		if rueidis.IsRedisNil(err) {
			return "", fmt.Errorf("stream: replay dead letter %s of %q: %w", id, topic, redstream.ErrNotFound)
		}
		return "", fmt.Errorf("stream: replay dead letter %s of %q: %w", id, topic, err)
	}
	d.cfg.Metrics.GetOrCreateCounter(metrics.Name(MetricReplaySuccess, "topic", topic)).Inc()
	return newID, nil
}

// ReplayAll replays up to limit dead letters of topic, oldest first, each atomically as by
// Replay, and returns how many were replayed. limit <= 0 means all of them. It stops at the
// first error.
func (d *DeadLetters) ReplayAll(ctx context.Context, topic string, limit int, opts ...ReplayOption) (int, error) {
	done := 0
	for limit <= 0 || done < limit {
		batch := int64(100)
		if limit > 0 {
			batch = int64(min(limit-done, 100))
		}
		l, err := d.List(ctx, topic, ListOptions{Count: batch})
		if err != nil {
			return done, err
		}
		if len(l) == 0 {
			return done, nil
		}
		for _, dl := range l {
			if _, err := d.Replay(ctx, topic, dl.ID, opts...); err != nil {
				return done, err
			}
			done++
		}
	}
	return done, nil
}

// Delete removes dead letters of topic by id and returns how many existed.
func (d *DeadLetters) Delete(ctx context.Context, topic string, ids ...string) (int64, error) {
	_, dlq, err := d.keys(topic)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	cl := d.client
	n, err := cl.Do(ctx, cl.B().Xdel().Key(dlq).Id(ids...).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stream: delete dead letters of %q: %w", topic, err)
	}
	return n, nil
}

// Purge removes every dead letter of topic and returns how many there were.
func (d *DeadLetters) Purge(ctx context.Context, topic string) (int64, error) {
	_, dlq, err := d.keys(topic)
	if err != nil {
		return 0, err
	}
	cl := d.client
	n, err := cl.Do(ctx, cl.B().Xtrim().Key(dlq).Maxlen().Exact().Threshold("0").Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stream: purge dead letters of %q: %w", topic, err)
	}
	return n, nil
}

// Len returns the number of dead letters of topic.
func (d *DeadLetters) Len(ctx context.Context, topic string) (int64, error) {
	_, dlq, err := d.keys(topic)
	if err != nil {
		return 0, err
	}
	cl := d.client
	n, err := cl.Do(ctx, cl.B().Xlen().Key(dlq).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stream: count dead letters of %q: %w", topic, err)
	}
	return n, nil
}

// deadLetterMove is one move of a pending entry to its dead-letter stream.
type deadLetterMove struct {
	Stream, DLQ, Group, ID string
	Reason                 string // the failure recorded as dl_error
	MaxLen                 int64  // most dead letters kept; <= 0: unbounded
	MaxAgeMs               int64  // most age of dead letters in ms; 0: unbounded
	MinIdleMs              int64  // move only if idle at least this long; 0: any
	Owner                  string // expected owner of the pending entry; "": any
}

// deadLetterResult is the outcome of a deadLetterMove.
type deadLetterResult struct {
	// Status is 1 when moved; 0 when not pending in the group, not idle long enough or owned
	// by another consumer (nothing changed); -1 when pending but deleted from the stream (it
	// was acknowledged).
	Status  int64
	ID      string // the dead letter's id when moved
	Trimmed int64  // dead letters dropped by the bounds
}

// moveToDeadLetter moves one pending entry to the dead-letter stream and acknowledges it in
// the topic, in one atomic step (deadletter.lua). Errors name the entry.
func moveToDeadLetter(ctx context.Context, client rueidis.Client, m deadLetterMove) (deadLetterResult, error) {
	maxlen := m.MaxLen
	if maxlen < 0 {
		maxlen = 0
	}
	res, err := deadLetterScript.Exec(ctx, client, []string{m.Stream, m.DLQ}, []string{
		m.Group, m.ID, m.Reason, strconv.FormatInt(maxlen, 10), strconv.FormatInt(m.MaxAgeMs, 10),
		strconv.FormatInt(m.MinIdleMs, 10), m.Owner,
	}).ToArray()
	if err != nil {
		return deadLetterResult{}, fmt.Errorf("stream: dead-letter %s of %q for %s: %w", m.ID, m.Stream, m.Group, err)
	}
	if len(res) != 4 {
		return deadLetterResult{}, fmt.Errorf("stream: dead-letter %s: unexpected reply of %d elements", m.ID, len(res))
	}
	var r deadLetterResult
	r.Status, _ = res[0].AsInt64()
	r.ID, _ = res[1].ToString()
	r.Trimmed, _ = res[2].AsInt64()
	return r, nil
}
