package stream

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/metrics"
)

// Producer writes messages to topics. It is safe for concurrent use; concurrent Sends share
// the client's pipeline (rueidis pipelines concurrent commands automatically).
//
// The Producer does not own its rueidis.Client and has nothing to close.
type Producer struct {
	client rueidis.Client
	cfg    Config
	topics sync.Map // topic -> *producerTopic

	mu   sync.Mutex
	mw   []SendMiddleware
	send atomic.Pointer[SendFunc] // the composed chain; nil without middleware
	idmp atomic.Int32             // XADD IDMP support: idmpUnknown until probed, idmpYes, idmpNo
}

// Outgoing is what producer middleware sees of one message being sent: its topic, envelope
// and headers. Middleware may change Key, Tag and Headers (the map is a copy the producer
// made for this send: changing it never touches the caller's Message); Body is read-only.
type Outgoing struct {
	// Topic is the topic (before env isolation).
	Topic string
	// Key and Tag are the message's envelope, Key already filled in (a new unique key) when
	// empty.
	Key, Tag string
	// Headers are the headers to write; never nil, so middleware can add to it.
	Headers map[string]string
	// Body is the message body (the Message's Body field).
	Body any

	env        envelope
	opts       sendOptions
	idem       string // the message's idempotency key, "" for none
	uniq       string // the message's unique id (WithUnique), "" for none
	t          *producerTopic
	next       SendFunc // set by SendBatch: where the innermost SendFunc hands the message
	scheduleID string   // the id of a delayed message, once built
	autoKey    string   // the key the producer made up for a message sent without one
	stream     string   // the stream (partition) written to, once encoded
}

// SendFunc writes one message and returns its entry id: the shape producer middleware
// wraps. The innermost SendFunc validates the headers, encodes the entry and runs XADD.
type SendFunc func(ctx context.Context, out *Outgoing) (id string, err error)

// SendMiddleware wraps a producer's send: it may add headers (trace context, correlation
// ids), time or log the send, or refuse it by returning an error without calling next. The
// middleware given to Producer.Use run in the order given, the first outermost.
type SendMiddleware func(next SendFunc) SendFunc

// Use adds middleware around every later Send. It is safe for concurrent use with Send.
func (p *Producer) Use(mw ...SendMiddleware) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mw = append(p.mw, mw...)
	f := SendFunc(p.write)
	for i := len(p.mw) - 1; i >= 0; i-- {
		if p.mw[i] != nil {
			f = p.mw[i](f)
		}
	}
	p.send.Store(&f)
}

type producerTopic struct {
	stream     string   // the topic's streamName
	streams    []string // its partitions' or priority levels' streams (topicStreams); streams[0] == stream when unpartitioned
	levels     bool     // streams are priority levels (Config.Priorities), level p at index p
	rr         atomic.Uint64
	produced   *metrics.Counter
	scheduled  *metrics.Counter
	duplicates *metrics.Counter // WithUnique sends refused or debounced
}

// NewProducer returns a producer. It validates cfg (only EnvIsolation, Env, Partitions,
// SendTimeout and Metrics matter to a producer); an error wraps redstream.ErrInvalidConfig.
func NewProducer(client rueidis.Client, cfg Config) (*Producer, error) {
	if client == nil {
		return nil, errInvalid("nil rueidis client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Producer{client: client, cfg: cfg.WithDefaults()}, nil
}

// SendOption changes one Send.
type SendOption func(*sendOptions)

type sendOptions struct {
	gzip      bool
	maxLen    int64
	delayed   bool          // WithDelay or WithDeliverAt
	delay     time.Duration // WithDelay
	at        time.Time     // WithDeliverAt
	delayErr  error         // a delay out of range
	idem      string        // WithIdempotencyKey
	idems     []string      // WithIdempotencyKeys; nil when not given
	idemErr   error         // an invalid key
	unique    *uniqueSend   // WithUnique
	uniqueErr error         // an invalid WithUnique
	priority  int           // WithPriority
}

// WithPriority sends the message at priority level p of a topic with levels
// (Config.Priorities): 0, the default, is the topic's own stream; a higher level is handled
// before (StrictPriority) or more often than (PriorityWeights) a lower one by the topic's
// handlers. A level outside the topic's levels (any p but 0 for a topic without levels) is
// an error of Send wrapping redstream.ErrInvalidConfig, as is WithPriority with WithUnique
// (a unique id would be unique per level only).
func WithPriority(p int) SendOption { return func(o *sendOptions) { o.priority = p } }

// checkPriority validates o's priority level for topic t.
func (o *sendOptions) checkPriority(topic string, t *producerTopic) error {
	if o.priority == 0 && (!t.levels || o.unique == nil) {
		return nil
	}
	if !t.levels {
		return errInvalid("WithPriority(%d): topic %q has no priority levels (Config.Priorities)", o.priority, topic)
	}
	if o.priority < 0 || o.priority >= len(t.streams) {
		return errInvalid("WithPriority(%d): topic %q has levels 0 to %d", o.priority, topic, len(t.streams)-1)
	}
	if o.unique != nil {
		return errInvalid("WithUnique on topic %q, which has priority levels: a unique id would be unique per level only", topic)
	}
	return nil
}

// WithGzip sends the body compressed: enc=gzip, body=base64(gzip(JSON)).
func WithGzip() SendOption { return func(o *sendOptions) { o.gzip = true } }

// WithMaxLen trims the stream on write to about n entries (XADD MAXLEN ~ n), which is cheap
// but, like the seed's MAXLEN trimming, does not spare entries no group has consumed yet:
// prefer the consumer's safe trimming (Config.Trim) unless the stream must stay bounded
// between trims. n <= 0 means no trimming.
func WithMaxLen(n int64) SendOption { return func(o *sendOptions) { o.maxLen = n } }

// Send writes msg to topic and returns the new entry's id. An empty msg.Key becomes a new
// unique, time-ordered 64-bit key in decimal; a zero msg.SendTime becomes now. In a
// partitioned topic (Config.Partitions) the message goes to the partition of its Key as the
// middleware left it (FNV-1a of the key, stream/WIRE.md), a message sent without a Key (and
// whose middleware set none) to the next partition in turn, round robin per Producer; a
// delayed message is scheduled in its partition's delayed-delivery keys. With WithDelay or
// WithDeliverAt the message is scheduled instead, and Send returns its schedule id (24 hex
// digits, not a stream entry id: the entry gets its id when the message is moved into the
// stream), which CancelScheduled takes. It returns an error wrapping
// redstream.ErrInvalidConfig for a nil message, a bad topic name or a delay out of range, one
// wrapping ErrInvalidHeader for headers beyond the limits of Message.Headers (checked after
// the middleware added by Use), one for a bad idempotency key (WithIdempotencyKey), and an
// error for a body that cannot be encoded as JSON or a Redis failure.
//
// Every send has a deadline: the earlier of ctx's and Config.SendTimeout from the call (2 s
// by default), which also bounds a ctx without one. Send returns by
// then even when Redis hangs, with an error wrapping ErrOutcomeUnknown when the message
// may have been written nonetheless (no reply by the deadline, a connection lost after
// the write). To retry such a send without writing the message twice, send it with
// WithIdempotencyKey and retry with the same key.
func (p *Producer) Send(ctx context.Context, topic string, msg Sendable, opts ...SendOption) (string, error) {
	ctx, cancel := p.sendContext(ctx)
	defer cancel()
	t, err := p.topic(topic)
	if err != nil {
		return "", err
	}
	var o sendOptions
	for _, f := range opts {
		f(&o)
	}
	if o.delayErr != nil {
		return "", o.delayErr
	}
	if err := o.checkIdem(false, 1); err != nil {
		return "", err
	}
	if err := o.checkUnique(false); err != nil {
		return "", err
	}
	if err := o.checkPriority(topic, t); err != nil {
		return "", err
	}
	f := p.send.Load()
	out, err := p.outgoing(topic, t, msg, o, f != nil)
	if err != nil {
		return "", err
	}
	if out.idem = o.idem; out.idem != "" {
		if err := p.probeIDMP(ctx, t.streams[0]); err != nil {
			return "", err
		}
	}
	if f == nil {
		return p.write(ctx, out)
	}
	return (*f)(ctx, out)
}

// outgoing prepares msg for sending: key and send time filled in, headers copied when
// middleware may change them.
func (p *Producer) outgoing(topic string, t *producerTopic, msg Sendable, o sendOptions, copyHeaders bool) (*Outgoing, error) {
	if msg == nil {
		return nil, errInvalid("Send: nil message")
	}
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, errInvalid("Send: nil message")
	}
	env := msg.envelope()
	auto := ""
	if env.key == "" {
		env.key = strconv.FormatInt(nextKey(), 10)
		auto = env.key
	}
	if env.sendTime.IsZero() {
		env.sendTime = time.Now()
	}
	out := &Outgoing{Topic: topic, Key: env.key, Tag: env.tag, Headers: env.headers, Body: env.body, env: env, opts: o, t: t, autoKey: auto}
	if copyHeaders {
		out.Headers = make(map[string]string, len(env.headers)+2)
		maps.Copy(out.Headers, env.headers)
	}
	return out, nil
}

// write is the innermost SendFunc: it encodes out and runs XADD, or hands out to the
// SendBatch call it belongs to.
func (p *Producer) write(ctx context.Context, out *Outgoing) (string, error) {
	if out.next != nil {
		return out.next(ctx, out)
	}
	return p.writeDirect(ctx, out)
}

// writeDirect encodes out and runs XADD (or schedules it, delay_add.lua; or, with an
// idempotency key on a server without XADD IDMP, runs xadd_idem.lua). It returns by ctx's
// end, whatever rueidis does.
func (p *Producer) writeDirect(ctx context.Context, out *Outgoing) (string, error) {
	if out.t != nil && out.opts.unique != nil {
		return p.writeUnique(ctx, out)
	}
	if out.t != nil && (out.opts.delayed || (out.idem != "" && p.idmp.Load() == idmpNo)) {
		fields, err := p.fields(out)
		if err != nil {
			return "", err
		}
		if !out.opts.delayed {
			return p.writeIdemScript(ctx, out, fields)
		}
		type reply struct {
			id  string
			err error
		}
		r := await(ctx, func() reply {
			id, err := p.writeDelayed(ctx, out, fields)
			return reply{id, err}
		}, func(err error) reply {
			return reply{"", fmt.Errorf("stream: schedule a message for %q: %w", out.stream, unknown(err))}
		})
		return r.id, r.err
	}
	cmd, err := p.build(out)
	if err != nil {
		return "", err
	}
	return p.result(out, p.do(ctx, cmd))
}

// fields encodes out's entry fields.
func (p *Producer) fields(out *Outgoing) ([]string, error) {
	if out.t == nil {
		return nil, errInvalid("Send: an Outgoing not made by the producer")
	}
	if out.Key == "" {
		out.Key = strconv.FormatInt(nextKey(), 10)
		out.autoKey = out.Key
	}
	out.stream = out.t.routeOut(out)
	env := out.env
	return encodeEntry(out.Key, out.Tag, env.source, env.sendTime, env.body, env.typ, out.opts.gzip, out.Headers)
}

// build encodes out into its XADD command (or, for a delayed message, its delay_add.lua
// call).
func (p *Producer) build(out *Outgoing) (rueidis.Completed, error) {
	fields, err := p.fields(out)
	if err != nil {
		return rueidis.Completed{}, err
	}
	o := out.opts
	if o.delayed {
		return p.buildDelayed(out, fields), nil
	}
	if out.idem != "" {
		return p.buildIdem(out, fields)
	}
	cl := p.client
	if o.maxLen > 0 {
		fv := cl.B().Xadd().Key(out.stream).Maxlen().Almost().Threshold(strconv.FormatInt(o.maxLen, 10)).Id("*").FieldValue()
		for i := 0; i < len(fields); i += 2 {
			fv = fv.FieldValue(fields[i], fields[i+1])
		}
		return fv.Build(), nil
	}
	fv := cl.B().Xadd().Key(out.stream).Id("*").FieldValue()
	for i := 0; i < len(fields); i += 2 {
		fv = fv.FieldValue(fields[i], fields[i+1])
	}
	return fv.Build(), nil
}

// result reads the reply of out's command (build).
func (p *Producer) result(out *Outgoing, r rueidis.RedisResult) (string, error) {
	if out.opts.delayed {
		return p.delayedResult(out, r)
	}
	t := out.t
	id, err := r.ToString()
	if err != nil {
		return "", fmt.Errorf("stream: send to %q: %w", out.stream, sendErr(err))
	}
	t.produced.Inc()
	return id, nil
}

func (p *Producer) topic(topic string) (*producerTopic, error) {
	if t, ok := p.topics.Load(topic); ok {
		return t.(*producerTopic), nil
	}
	streams, levels, err := topicStreams(p.cfg, topic)
	if err != nil {
		return nil, err
	}
	s, _ := streamName(p.cfg, topic)
	t := &producerTopic{stream: s, streams: streams, levels: levels,
		produced:   p.cfg.Metrics.GetOrCreateCounter(metrics.Name(metricProduced, "topic", topic)),
		scheduled:  p.cfg.Metrics.GetOrCreateCounter(metrics.Name(metricScheduled, "topic", topic)),
		duplicates: p.cfg.Metrics.GetOrCreateCounter(metrics.Name(metricDuplicateSends, "topic", topic))}
	v, _ := p.topics.LoadOrStore(topic, t)
	return v.(*producerTopic), nil
}

// route returns the stream of the partition a message with key goes to: the topic's one stream
// when unpartitioned; else the partition of key (FNV-1a of the key, stream/WIRE.md), or, for a
// key the producer made up (autoKey), the next partition in turn (round robin per topic and
// Producer).
func (t *producerTopic) route(key, autoKey string) string {
	n := len(t.streams)
	if n == 1 {
		return t.streams[0]
	}
	if key == autoKey {
		return t.streams[(t.rr.Add(1)-1)%uint64(n)]
	}
	return t.streams[streamwire.PartitionOf(key, n)]
}
