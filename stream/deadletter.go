package stream

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
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
	// Time is when it was dead-lettered, by the Redis server's clock (dl_ts). A dl_ts that
	// is missing or not a whole number of milliseconds (a dead letter written by other
	// software) reads as the time it was read, as the seed does.
	Time time.Time
}

// Body returns the dead letter's JSON body, decoded by its enc field (plain or gzip:
// stream/WIRE.md).
func (d DeadLetter) Body() ([]byte, error) {
	return decodeBody(d.Fields[fieldEnc], d.Fields[fieldBody])
}

// DeadLetters administers the dead-letter streams: list, get, replay, delete, purge. It is
// safe for concurrent use and does not own its client. Each Redis call it makes is bounded
// by 10 s, or by the caller's context when that ends sooner. Dead letters of any size (any
// number of fields, any body size Redis accepts) are replayed like small ones.
//
// The dead letters of a partitioned topic (Config.Partitions) live in one dead-letter stream
// per partition. Len, Purge and ReplayAll act on every partition; List, Get, Replay, Move
// and Delete name entries by id, which are unique within one stream only, so they need the
// partition: call them on Partition(i), or they return an error wrapping
// redstream.ErrInvalidConfig.
type DeadLetters struct {
	client  rueidis.Client
	cfg     Config
	timeout time.Duration // bound of each Redis call
	part    int           // Partition; -1: not chosen
}

// Partition returns a view of d whose calls address partition i of a partitioned topic
// (Config.Partitions); i must be 0 for an unpartitioned topic. A partition out of range is
// reported by the calls, as an error wrapping redstream.ErrInvalidConfig. The view shares
// d's client and settings.
func (d *DeadLetters) Partition(i int) *DeadLetters {
	v := *d
	v.part = i
	return &v
}

// partitions returns the views of d on each partition of topic: d itself for an
// unpartitioned topic or a chosen partition.
func (d *DeadLetters) partitions(topic string) ([]*DeadLetters, error) {
	n := partitionCount(d.cfg, topic)
	if d.part >= 0 || n == 1 {
		return []*DeadLetters{d}, nil
	}
	if err := checkPartitions(topic, d.cfg.Partitions[topic]); err != nil {
		return nil, err
	}
	out := make([]*DeadLetters, n)
	for i := range out {
		out[i] = d.Partition(i)
	}
	return out, nil
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
	return &DeadLetters{client: client, cfg: cfg.WithDefaults(), timeout: adminTimeout, part: -1}, nil
}

// Metric names of the dead-letter operations, besides metricReplaySuccess and
// metricReplayFailure. Each carries a topic="..." label and lives in Config.Metrics
// (metrics.Stream by default).
const (
	// metricReplayLatency is a Prometheus histogram of the duration of each replay, in
	// seconds, successful or not (the Java system's redis_streaming_dlq_replay_latency_ms, in
	// Prometheus base units).
	metricReplayLatency = "redis_streaming_dlq_replay_latency_seconds"
	// metricDeadLettersDeleted counts dead letters removed by DeadLetters.Delete.
	metricDeadLettersDeleted = "redis_streaming_dlq_deleted_total"
	// metricDeadLettersCleared counts dead letters removed by DeadLetters.Purge.
	metricDeadLettersCleared = "redis_streaming_dlq_cleared_total"
)

// adminTimeout bounds each Redis call of DeadLetters, and a dead-letter move whose context
// has no deadline.
const adminTimeout = 10 * time.Second

// inlineLimit is the most field names and values a script passes to XADD itself. Lua's
// unpack, through which a script hands a table to redis.call, stops at about 8,000 values
// (LUAI_MAXCSTACK); larger entries are written by the client inside a MULTI/EXEC.
const inlineLimit = 7000

// call returns ctx bounded by d.timeout.
func (d *DeadLetters) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

func (d *DeadLetters) counter(name, topic string) *metrics.Counter {
	return d.cfg.Metrics.GetOrCreateCounter(metrics.Name(name, "topic", topic))
}

// observeReplay records one replay's outcome and duration.
func (d *DeadLetters) observeReplay(topic string, start time.Time, ok bool) {
	name := metricReplayFailure
	if ok {
		name = metricReplaySuccess
	}
	d.counter(name, topic).Inc()
	d.cfg.Metrics.GetOrCreatePrometheusHistogram(metrics.Name(metricReplayLatency, "topic", topic)).UpdateDuration(start)
}

// keys returns the stream and dead-letter stream of topic's partition d.part (its one
// stream when unpartitioned).
func (d *DeadLetters) keys(topic string) (stream, dlq string, err error) {
	streams, err := PartitionStreams(d.cfg, topic)
	if err != nil {
		return "", "", err
	}
	switch {
	case d.part >= len(streams) || d.part < -1:
		return "", "", errInvalid("topic %q has %d partitions: no partition %d", topic, len(streams), d.part)
	case d.part >= 0:
		stream = streams[d.part]
	case len(streams) > 1:
		return "", "", errInvalid("topic %q has %d partitions: choose one with DeadLetters.Partition", topic, len(streams))
	default:
		stream = streams[0]
	}
	return stream, streamwire.DeadLetterStreamName(stream), nil
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
	ctx, cancel := d.call(ctx)
	defer cancel()
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
	if dl.Time.IsZero() {
		dl.Time = time.Now()
	}
	return dl
}

// ReplayOption changes a replay.
type ReplayOption func(*replayOptions)

type replayOptions struct {
	allGroups bool
	handler   replayHandler
}

// replayHandler is the function of WithReplayHandler.
type replayHandler func(ctx context.Context, dl *DeadLetter) (replay bool, err error)

// WithReplayHandler runs h on each dead letter a Replay or ReplayAll is about to replay: h
// sees it before it is replayed, and may change it or drop it. It may modify dl.Fields (the
// entry's fields as they go back: key, tag, enc, body, ts,
// h:<name> headers; dl_* fields are never written back); returning replay = false drops
// the dead letter instead (deleted, counted in redis_streaming_dlq_deleted_total); an error
// leaves it in place and ends the replay with that error. A panic is such an error. The
// replay stays atomic: the entry written to the topic is exactly what the handler left in
// dl.Fields, and it is written only if the dead letter still exists, in the same
// transaction that deletes it.
func WithReplayHandler(h func(ctx context.Context, dl *DeadLetter) (replay bool, err error)) ReplayOption {
	return func(o *replayOptions) { o.handler = h }
}

// ToAllGroups replays to every group of the topic. By default a replayed entry carries a
// replay_group field naming the dead letter's group, and the other groups' consumers
// acknowledge it without handling it, since they handled the original already.
func ToAllGroups() ReplayOption { return func(o *replayOptions) { o.allGroups = true } }

func replayTarget(opts []ReplayOption) string {
	target, _ := replaySettings(opts)
	return target
}

// replaySettings returns replay.lua's target argument and the replay handler, if any.
func replaySettings(opts []ReplayOption) (string, replayHandler) {
	var o replayOptions
	for _, f := range opts {
		f(&o)
	}
	if o.allGroups {
		return "0", o.handler
	}
	return "1", o.handler
}

// Replay moves dead letter id of topic back onto the topic, atomically (XADD to the topic and
// XDEL from the dead-letter stream happen together or not at all), and returns the new
// entry's id. A missing dead letter, also one that a concurrent Replay or Delete took first,
// is an error wrapping redstream.ErrNotFound. Each replay is counted in
// redis_streaming_dlq_replay_success_total or ..._failure_total and timed in
// redis_streaming_dlq_replay_latency_seconds. With WithReplayHandler, a dead letter the
// handler drops is deleted and Replay returns "" and a nil error.
func (d *DeadLetters) Replay(ctx context.Context, topic, id string, opts ...ReplayOption) (string, error) {
	stream, dlq, err := d.keys(topic)
	if err != nil {
		return "", err
	}
	target, h := replaySettings(opts)
	start := time.Now()
	var newID string
	if h != nil {
		var dlID string
		var dropped bool
		dlID, newID, dropped, err = d.replayFirstWith(ctx, topic, stream, dlq, id, id, target, h)
		if err == nil && dropped {
			return "", nil
		}
		if err == nil && dlID == "" {
			err = redstream.ErrNotFound
		}
	} else {
		_, newID, err = d.replayFirst(ctx, stream, dlq, id, id, target)
	}
	if err == nil && newID == "" {
		err = redstream.ErrNotFound
	}
	d.observeReplay(topic, start, err == nil)
	if err != nil {
		return "", fmt.Errorf("stream: replay dead letter %s of %q: %w", id, topic, err)
	}
	return newID, nil
}

// ReplayAll replays the dead letters of topic that exist when it starts, oldest first, each
// atomically as by Replay, and returns how many it replayed. It never replays its own output:
// a replay that fails again and comes back as a new dead letter during the call is left for
// a later call. At most limit are replayed; limit <= 0 means all of them. A dead letter that a
// concurrent Replay or Delete takes first is skipped. It stops at the first error (or when
// ctx ends), returning the number replayed so far.
func (d *DeadLetters) ReplayAll(ctx context.Context, topic string, limit int, opts ...ReplayOption) (int, error) {
	parts, err := d.partitions(topic)
	if err != nil {
		return 0, err
	}
	if len(parts) > 1 {
		total := 0
		for _, p := range parts {
			if limit > 0 && total >= limit {
				break
			}
			n, err := p.replayAll(ctx, topic, limit-total, opts...)
			total += n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	return d.replayAll(ctx, topic, limit, opts...)
}

// replayAll is ReplayAll on one stream.
func (d *DeadLetters) replayAll(ctx context.Context, topic string, limit int, opts ...ReplayOption) (int, error) {
	stream, dlq, err := d.keys(topic)
	if err != nil {
		return 0, err
	}
	target, h := replaySettings(opts)
	bound, err := d.newestID(ctx, dlq)
	if err != nil || bound == "" {
		if err != nil {
			err = fmt.Errorf("stream: replay dead letters of %q: %w", topic, err)
		}
		return 0, err
	}
	done, from := 0, "-"
	for limit <= 0 || done < limit {
		if err := ctx.Err(); err != nil {
			return done, fmt.Errorf("stream: replay dead letters of %q: %w", topic, err)
		}
		start := time.Now()
		var dlID, newID string
		var dropped bool
		if h != nil {
			dlID, newID, dropped, err = d.replayFirstWith(ctx, topic, stream, dlq, from, bound, target, h)
		} else {
			dlID, newID, err = d.replayFirst(ctx, stream, dlq, from, bound, target)
		}
		if err != nil {
			d.observeReplay(topic, start, false)
			return done, fmt.Errorf("stream: replay dead letters of %q: %w", topic, err)
		}
		if dlID == "" {
			break // every dead letter up to bound is replayed
		}
		from = "(" + dlID
		if newID == "" || dropped {
			continue // taken by a concurrent Replay or Delete, or dropped by the handler
		}
		d.observeReplay(topic, start, true)
		done++
	}
	return done, nil
}

// replayFirstWith replays the first dead letter with an id in [from, to] through handler h:
// it reads the dead letter, lets h change or drop it, and writes what h left in one
// MULTI/EXEC that also deletes the dead letter (replayLarge), or deletes it when h drops it.
// It returns the dead letter's id ("" when the range is empty), the new entry's id ("" when
// the dead letter was gone by then or dropped) and whether h dropped it.
func (d *DeadLetters) replayFirstWith(ctx context.Context, topic, stream, dlq, from, to, target string, h replayHandler) (dlID, newID string, dropped bool, err error) {
	cctx, cancel := d.call(ctx)
	msg, err := d.client.Do(cctx, d.client.B().Xrange().Key(dlq).Start(from).End(to).Count(1).Build()).ToMessage()
	cancel()
	if err != nil {
		return "", "", false, err
	}
	entries, err := parseEntries(msg)
	if err != nil || len(entries) == 0 {
		return "", "", false, err
	}
	dl := toDeadLetter(entries[0])
	replay, err := callReplayHandler(ctx, h, &dl)
	if err != nil {
		return "", "", false, fmt.Errorf("replay handler on %s: %w", dl.ID, err)
	}
	cctx, cancel = d.call(ctx)
	defer cancel()
	if !replay {
		n, err := d.client.Do(cctx, d.client.B().Xdel().Key(dlq).Id(dl.ID).Build()).AsInt64()
		if err != nil {
			return "", "", false, fmt.Errorf("drop %s: %w", dl.ID, err)
		}
		d.counter(metricDeadLettersDeleted, topic).Add(int(n))
		return dl.ID, "", true, nil
	}
	fields := replayFields(dl, target == "1")
	newID, err = replayLarge(cctx, d.client, stream, dlq, dl.ID, fields)
	return dl.ID, newID, false, err
}

// callReplayHandler runs h, turning a panic into an error.
func callReplayHandler(ctx context.Context, h replayHandler, dl *DeadLetter) (replay bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			replay, err = false, fmt.Errorf("panic: %v", r)
		}
	}()
	return h(ctx, dl)
}

// replayFields returns the fields of dl's new entry: the five contract fields first, in
// the wire order, then the others (headers) sorted by name, without dl_* and replay_group
// fields; with toGroup, a replay_group field naming dl.Group.
func replayFields(dl DeadLetter, toGroup bool) []string {
	fields := make([]string, 0, 2*len(dl.Fields)+2)
	for _, k := range []string{fieldKey, fieldTag, fieldEnc, fieldBody, fieldTS} {
		if v, ok := dl.Fields[k]; ok {
			fields = append(fields, k, v)
		}
	}
	var rest []string
	for k := range dl.Fields {
		switch k {
		case fieldKey, fieldTag, fieldEnc, fieldBody, fieldTS, fieldReplayGroup:
			continue
		}
		if !strings.HasPrefix(k, "dl_") {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		fields = append(fields, k, dl.Fields[k])
	}
	if toGroup && dl.Group != "" {
		fields = append(fields, fieldReplayGroup, dl.Group)
	}
	if len(fields) == 0 {
		fields = []string{fieldBody, ""}
	}
	return fields
}

// newestID returns the id of the newest entry of dlq, or "" when it has none.
func (d *DeadLetters) newestID(ctx context.Context, dlq string) (string, error) {
	ctx, cancel := d.call(ctx)
	defer cancel()
	return dlqLastScript.Exec(ctx, d.client, []string{dlq}, nil).ToString()
}

// replayFirst replays the first dead letter with an id in [from, to] (from may be "(id",
// exclusive). It returns the dead letter's id ("" when the range is empty) and the new
// entry's id ("" when the dead letter was deleted between the two steps of a large replay).
func (d *DeadLetters) replayFirst(ctx context.Context, stream, dlq, from, to, target string) (dlID, newID string, err error) {
	ctx, cancel := d.call(ctx)
	defer cancel()
	res, err := replayScript.Exec(ctx, d.client, []string{dlq, stream},
		[]string{from, to, target, strconv.Itoa(inlineLimit)}).ToArray()
	if err != nil {
		return "", "", err
	}
	status, err := res[0].AsInt64()
	if err != nil {
		return "", "", fmt.Errorf("unexpected reply: %w", err)
	}
	switch {
	case status == 0:
		return "", "", nil
	case status == 1 && len(res) == 3:
		dlID, _ = res[1].ToString()
		newID, err = res[2].ToString()
		return dlID, newID, err
	case status == 2 && len(res) == 3:
	default:
		return "", "", fmt.Errorf("unexpected reply: status %d with %d elements", status, len(res))
	}
	// Too many fields for one script: the client writes the entry, in a transaction that
	// deletes the dead letter, or undoes the write when the dead letter is gone.
	dlID, _ = res[1].ToString()
	fields, err := res[2].AsStrSlice()
	if err != nil {
		return "", "", fmt.Errorf("unexpected reply: %w", err)
	}
	newID, err = replayLarge(ctx, d.client, stream, dlq, dlID, fields)
	if err != nil {
		return "", "", err
	}
	return dlID, newID, nil
}

// replayLarge writes fields to stream and deletes dead letter dlID in one MULTI/EXEC with
// dlq_mark.lua and dlq_replay.lua. It returns the new entry's id, or "" when the dead letter
// was gone (and nothing changed).
func replayLarge(ctx context.Context, cl rueidis.Client, stream, dlq, dlID string, fields []string) (string, error) {
	mark := streamwire.DeadLetterMarkKey(dlq)
	xadd := cl.B().Arbitrary("XADD").Keys(stream).Args("*").Args(fields...).Build()
	closing := cl.B().Eval().Script(dlqReplayLua).Numkeys(3).Key(dlq, stream, mark).Arg(dlID).Build()
	added, closed, err := xaddInTransaction(ctx, cl, stream, mark, xadd, closing)
	if err != nil {
		return "", err
	}
	st, err := closed.AsInt64()
	if err != nil {
		return "", fmt.Errorf("unexpected reply of dlq_replay.lua: %w", err)
	}
	switch st {
	case 1:
		return added.ToString()
	case 0:
		return "", nil
	}
	return "", fmt.Errorf("write to %q: %w", stream, added.Error())
}

// xaddInTransaction runs, in one MULTI/EXEC, dlq_mark.lua on target and mark, xadd (which
// writes to target) and closing (dlq_move.lua or dlq_replay.lua, which reads the mark to
// learn whether xadd ran, then completes or undoes the operation). It returns the replies of
// xadd and closing. The scripts run as EVAL, not EVALSHA: a NOSCRIPT error inside the
// transaction would leave the XADD without its closing step.
func xaddInTransaction(ctx context.Context, cl rueidis.Client, target, mark string, xadd, closing rueidis.Completed) (added, closed rueidis.RedisMessage, err error) {
	resps := cl.DoMulti(ctx,
		cl.B().Multi().Build(),
		cl.B().Eval().Script(dlqMarkLua).Numkeys(2).Key(target, mark).Build(),
		xadd,
		closing,
		cl.B().Exec().Build())
	exec, err := resps[len(resps)-1].ToArray()
	if err != nil {
		for _, r := range resps[:len(resps)-1] {
			if e := r.Error(); e != nil {
				return added, closed, fmt.Errorf("transaction: %w (%w)", err, e)
			}
		}
		return added, closed, fmt.Errorf("transaction: %w", err)
	}
	if len(exec) != 3 {
		return added, closed, fmt.Errorf("transaction: %d replies, want 3", len(exec))
	}
	if err := exec[2].Error(); err != nil {
		if e := exec[0].Error(); e != nil {
			err = fmt.Errorf("%w (%w)", err, e)
		}
		return added, closed, fmt.Errorf("transaction: %w", err)
	}
	return exec[1], exec[2], nil
}

// Move dead-letters entry id of topic, pending in group, now: XADD to the dead-letter stream
// (with reason as its Error) and XACK in the topic, in one atomic step, whichever consumer
// owns it. It is the operator's way to take a message out of its retries (the handler's is
// Message.DeadLetter). It returns the dead letter's id, or an error wrapping
// redstream.ErrNotFound when the entry is not pending in group (acknowledged, moved already,
// or deleted from the stream). The dead letter is bounded by Config.DeadLetter like the
// consumer's.
func (d *DeadLetters) Move(ctx context.Context, topic, group, id, reason string) (string, error) {
	stream, dlq, err := d.keys(topic)
	if err != nil {
		return "", err
	}
	ctx, cancel := d.call(ctx)
	defer cancel()
	res, err := moveToDeadLetter(ctx, d.client, deadLetterMove{Stream: stream, DLQ: dlq, Group: group, ID: id, Reason: reason,
		MaxLen: d.cfg.DeadLetter.MaxLen, MaxAgeMs: d.cfg.DeadLetter.MaxAge.Milliseconds()})
	if err != nil {
		return "", err
	}
	if res.Trimmed > 0 {
		d.cfg.Metrics.GetOrCreateCounter(metrics.Name(metricDeadLetterTrimmed, topicLabels(topic, d.part)...)).Add(int(res.Trimmed))
	}
	if res.Status != 1 {
		return "", fmt.Errorf("stream: dead-letter %s of %q: not pending in group %q: %w", id, topic, group, redstream.ErrNotFound)
	}
	return res.ID, nil
}

// Delete removes dead letters of topic by id and returns how many existed. They are counted
// in redis_streaming_dlq_deleted_total.
func (d *DeadLetters) Delete(ctx context.Context, topic string, ids ...string) (int64, error) {
	_, dlq, err := d.keys(topic)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	ctx, cancel := d.call(ctx)
	defer cancel()
	cl := d.client
	n, err := cl.Do(ctx, cl.B().Xdel().Key(dlq).Id(ids...).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stream: delete dead letters of %q: %w", topic, err)
	}
	d.counter(metricDeadLettersDeleted, topic).Add(int(n))
	return n, nil
}

// Purge removes every dead letter of topic and returns how many there were. They are counted
// in redis_streaming_dlq_cleared_total.
func (d *DeadLetters) Purge(ctx context.Context, topic string) (int64, error) {
	return d.sum(topic, func(p *DeadLetters) (int64, error) { return p.purge(ctx, topic) })
}

// sum adds f's results over the partitions of topic (see partitions), stopping at the first
// error.
func (d *DeadLetters) sum(topic string, f func(p *DeadLetters) (int64, error)) (int64, error) {
	parts, err := d.partitions(topic)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range parts {
		n, err := f(p)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (d *DeadLetters) purge(ctx context.Context, topic string) (int64, error) {
	_, dlq, err := d.keys(topic)
	if err != nil {
		return 0, err
	}
	ctx, cancel := d.call(ctx)
	defer cancel()
	cl := d.client
	n, err := cl.Do(ctx, cl.B().Xtrim().Key(dlq).Maxlen().Exact().Threshold("0").Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stream: purge dead letters of %q: %w", topic, err)
	}
	d.counter(metricDeadLettersCleared, topic).Add(int(n))
	return n, nil
}

// Len returns the number of dead letters of topic.
func (d *DeadLetters) Len(ctx context.Context, topic string) (int64, error) {
	return d.sum(topic, func(p *DeadLetters) (int64, error) { return p.len(ctx, topic) })
}

func (d *DeadLetters) len(ctx context.Context, topic string) (int64, error) {
	_, dlq, err := d.keys(topic)
	if err != nil {
		return 0, err
	}
	ctx, cancel := d.call(ctx)
	defer cancel()
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
	Deliveries             int64  // expected delivery count of the pending entry (its fence); 0: any
}

// deadLetterResult is the outcome of a deadLetterMove.
type deadLetterResult struct {
	// Status is 1 when moved; 0 when not pending in the group or not idle long enough
	// (nothing changed); 3 when pending but owned by another consumer than Owner or delivered
	// again since delivery Deliveries (nothing changed); -1 when pending but deleted from the
	// stream (it was acknowledged).
	Status  int64
	ID      string // the dead letter's id when moved
	Trimmed int64  // dead letters dropped by the bounds
}

// moveToDeadLetter moves one pending entry to the dead-letter stream and acknowledges it in
// the topic, in one atomic step, whatever the entry's size. Errors name the entry; after an
// error the entry is either moved or still pending, never both and never neither.
//
// An entry of up to inlineLimit field names and values moves in one script
// (deadletter.lua). A larger one cannot: that script replies with the entry instead, and the
// client writes the dead letter itself in one MULTI/EXEC of dlq_mark.lua, XADD and
// dlq_move.lua, where dlq_move.lua checks again that the entry is pending as it was read
// and acknowledges it, or deletes the dead letter just written.
func moveToDeadLetter(ctx context.Context, client rueidis.Client, m deadLetterMove) (deadLetterResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, adminTimeout)
		defer cancel()
	}
	maxlen := strconv.FormatInt(max(m.MaxLen, 0), 10)
	maxAge := strconv.FormatInt(m.MaxAgeMs, 10)
	minIdle := strconv.FormatInt(m.MinIdleMs, 10)
	fail := func(err error) (deadLetterResult, error) {
		return deadLetterResult{}, fmt.Errorf("stream: dead-letter %s of %q for %s: %w", m.ID, m.Stream, m.Group, err)
	}
	res, err := deadLetterScript.Exec(ctx, client, []string{m.Stream, m.DLQ}, []string{
		m.Group, m.ID, m.Reason, maxlen, maxAge, minIdle, m.Owner, strconv.Itoa(inlineLimit),
		strconv.FormatInt(max(m.Deliveries, 0), 10),
	}).ToArray()
	if err != nil {
		return fail(err)
	}
	if len(res) != 4 && len(res) != 7 {
		return fail(fmt.Errorf("unexpected reply of %d elements", len(res)))
	}
	var r deadLetterResult
	r.Status, _ = res[0].AsInt64()
	r.ID, _ = res[1].ToString()
	r.Trimmed, _ = res[2].AsInt64()
	if r.Status != 2 {
		return r, nil
	}
	if len(res) != 7 {
		return fail(fmt.Errorf("unexpected reply of %d elements", len(res)))
	}
	var p largeMove
	p.deliveries, _ = res[3].AsInt64()
	p.owner, _ = res[4].ToString()
	p.now, _ = res[5].ToString()
	if p.fields, err = res[6].AsStrSlice(); err != nil {
		return fail(fmt.Errorf("unexpected reply: %w", err))
	}
	r, err = moveLarge(ctx, client, m, p)
	if err != nil {
		return fail(err)
	}
	return r, nil
}

// largeMove is what deadletter.lua replies for an entry too large for it (status 2).
type largeMove struct {
	deliveries int64
	owner, now string   // the pending entry's owner; the server's time in ms
	fields     []string // the entry's fields
}

// moveLarge writes the dead letter of p in one MULTI/EXEC with dlq_mark.lua and dlq_move.lua.
func moveLarge(ctx context.Context, client rueidis.Client, m deadLetterMove, p largeMove) (deadLetterResult, error) {
	count := strconv.FormatInt(p.deliveries, 10)
	fields := append(p.fields[:len(p.fields):len(p.fields)], "dl_id", m.ID, "dl_group", m.Group, "dl_consumer", p.owner,
		"dl_deliveries", count, "dl_error", m.Reason, "dl_ts", p.now)
	mark := streamwire.DeadLetterMarkKey(m.DLQ)
	xadd := client.B().Arbitrary("XADD").Keys(m.DLQ).Args("*").Args(fields...).Build()
	closing := client.B().Eval().Script(dlqMoveLua).Numkeys(3).Key(m.Stream, m.DLQ, mark).
		Arg(m.Group, m.ID, strconv.FormatInt(m.MinIdleMs, 10), p.owner, count,
			strconv.FormatInt(max(m.MaxLen, 0), 10), strconv.FormatInt(m.MaxAgeMs, 10)).Build()
	added, closed, err := xaddInTransaction(ctx, client, m.DLQ, mark, xadd, closing)
	if err != nil {
		return deadLetterResult{}, err
	}
	out, err := closed.ToArray()
	if err != nil || len(out) != 2 {
		return deadLetterResult{}, fmt.Errorf("unexpected reply of dlq_move.lua: %v", closed)
	}
	var r deadLetterResult
	r.Status, _ = out[0].AsInt64()
	r.Trimmed, _ = out[1].AsInt64()
	switch r.Status {
	case 1:
		r.ID, _ = added.ToString()
	case -2:
		return deadLetterResult{}, fmt.Errorf("write the dead letter: %w", added.Error())
	}
	return r, nil
}
