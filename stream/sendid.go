package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// Idempotent sends.
//
// A send with WithIdempotencyKey (WithIdempotencyKeys in SendBatch) writes its entry at
// most once per key and topic: a repeat of the key, within 100 s, writes nothing
// and returns the entry id of the first send. It is how a send is retried safely after an
// error whose outcome is unknown (ErrOutcomeUnknown): the first attempt may have been
// written, and the retry then only reports it.
//
// On servers with XADD IDMP (Redis 8.6 and later) the producer sends
// XADD <stream> IDMP <producer-id> <key> * ..., where the producer id is "redstream-" and
// two hex digits of the FNV-1a hash of the key (see idmpProducer), and the server keeps the
// key with the stream. Elsewhere (Redis before 8.6, Valkey) xadd_idem.lua appends the entry
// and records its id at "{stream}:sent:<key>" (streamwire.SentKey) with a time to live of
// idempotencyTTL, in the stream's hash slot, so it works on Redis Cluster too. Which of the
// two a Producer uses is probed once, at its first send with a key (an XADD ... NOMKSTREAM
// IDMP on a key that does not exist, which writes nothing), never read off a version
// string.

// idempotencyTTL is how long a send's idempotency key is remembered: a repeat within it is
// recognised. On servers without XADD IDMP it is the time to live of the key's record. On
// servers with it the server decides: its stream-idmp-duration (100 s by default, the same)
// and its stream-idmp-maxsize, the most keys it keeps per producer id (100 by default,
// oldest evicted first); the producer spreads keys over 256 producer ids, so a stream
// keeps at least its last 25,600 keys at the defaults. A stream receiving more than 256
// keyed sends a second forgets keys sooner than 100 s: raise stream-idmp-maxsize (up to
// 10,000) or set the stream's IDMP-MAXSIZE with XCFGSET.
const idempotencyTTL = 100 * time.Second

// maxIdempotencyKeyLen is the longest idempotency key, in bytes.
const maxIdempotencyKeyLen = 128

// idmpProducers is the number of IDMP producer ids keys are spread over (see idmpProducer).
const idmpProducers = 256

// XADD IDMP support, as probed (Producer.idmp).
const (
	idmpUnknown int32 = iota
	idmpYes
	idmpNo
)

// WithIdempotencyKey makes the send write its entry at most once per key and topic: a send
// with a key already used for the topic within 100 s writes nothing and returns
// the entry id of the first send with it (even when the messages differ: the first one
// stays). This is the way to retry a send safely: give every message a key of its own (an
// order id, a UUID made before the first attempt), and retry with the same key after an
// error, in particular one matching ErrOutcomeUnknown, whose message may have been written.
// Without a key, a retry after such an error may write the message twice.
//
// A key is 1 to 128 bytes of ASCII letters, digits and the characters
// - _ . : / + = @ (so UUIDs, ULIDs, hex and base64 digests fit); Send rejects other keys
// with an error wrapping redstream.ErrInvalidConfig. In a partitioned topic a message with
// a key but no Key (business key) goes to the partition of the idempotency key, so that
// its retries reach the same partition. A key cannot be combined with WithDelay or
// WithDeliverAt (Send fails): a scheduled message is not deduplicated. For SendBatch, use
// WithIdempotencyKeys. A repeat counts in the produced-messages metric like a first send.
func WithIdempotencyKey(key string) SendOption {
	return func(o *sendOptions) {
		o.idem, o.idems = key, nil
		o.idemErr = checkIdempotencyKey("WithIdempotencyKey", key)
	}
}

// WithIdempotencyKeys gives the messages of one SendBatch call their idempotency keys,
// keys[i] for message i, each as WithIdempotencyKey describes: SendBatch fails (nothing is
// sent) when the number of keys differs from the number of messages or a key is invalid. A
// key repeated within a batch writes its first message only; the others get its id. Send
// rejects this option.
func WithIdempotencyKeys(keys ...string) SendOption {
	keys = append([]string(nil), keys...)
	return func(o *sendOptions) {
		o.idem, o.idems, o.idemErr = "", keys, nil
		if keys == nil {
			o.idems = []string{}
		}
		for i, k := range keys {
			if err := checkIdempotencyKey(fmt.Sprintf("WithIdempotencyKeys: key %d", i), k); err != nil {
				o.idemErr = err
				return
			}
		}
	}
}

// checkIdempotencyKey validates an idempotency key; what names the option in the error.
func checkIdempotencyKey(what, key string) error {
	switch {
	case key == "":
		return errInvalid("%s: empty idempotency key", what)
	case len(key) > maxIdempotencyKeyLen:
		return errInvalid("%s: idempotency key of %d bytes, at most %d", what, len(key), maxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if b := key[i]; !idemByte(b) {
			c := fmt.Sprintf("%q", rune(b))
			if b < 0x20 || b >= 0x7f {
				c = fmt.Sprintf("0x%02x", b)
			}
			return errInvalid("%s: idempotency key %q: byte %s at offset %d is not allowed (ASCII letters, digits and - _ . : / + = @)",
				what, key, c, i)
		}
	}
	return nil
}

// idemByte reports whether b may appear in an idempotency key.
func idemByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("-_.:/+=@", b) >= 0
}

// idmpProducer returns the IDMP producer id of an idempotency key: "redstream-" and two hex
// digits of the key's 32-bit FNV-1a hash (its low byte). The server keeps at most
// stream-idmp-maxsize keys per producer id; spreading keys over 256 ids multiplies what a
// stream remembers by 256, while keeping the producers few (the server scans them all on
// every expiry cycle). The id depends on the key alone, so any process retrying a send
// (another instance, or the same one after a restart) dedupes against the first attempt.
func idmpProducer(key string) string {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	const hex = "0123456789abcdef"
	b := h % idmpProducers
	return "redstream-" + string([]byte{hex[b>>4], hex[b&15]})
}

// checkIdem validates the idempotency options of a call; batch says whether it is SendBatch
// (with n messages).
func (o *sendOptions) checkIdem(batch bool, n int) error {
	if o.idemErr != nil {
		return o.idemErr
	}
	switch {
	case !batch && o.idems != nil:
		return errInvalid("Send: WithIdempotencyKeys is for SendBatch; use WithIdempotencyKey")
	case batch && o.idem != "":
		return errInvalid("SendBatch: WithIdempotencyKey names one message; use WithIdempotencyKeys, one key per message")
	case batch && o.idems != nil && len(o.idems) != n:
		return errInvalid("SendBatch: WithIdempotencyKeys: %d keys for %d messages", len(o.idems), n)
	case (o.idem != "" || o.idems != nil) && o.delayed:
		return errInvalid("idempotency keys cannot be combined with WithDelay or WithDeliverAt: a scheduled message is not deduplicated")
	}
	return nil
}

// probeIDMP learns, once per Producer, whether the server has XADD IDMP: it sends
// XADD <probe key> NOMKSTREAM IDMP ... to stream's slot, which a server with IDMP answers
// with a null (the key does not exist, nothing is written) and one without with an error.
// A call that gets no answer (a timeout, a connection error) or another error (the
// cluster down, say) leaves the question open for the next send and returns an error: the
// message was not sent.
func (p *Producer) probeIDMP(ctx context.Context, stream string) error {
	if p.idmp.Load() != idmpUnknown {
		return nil
	}
	cl := p.client
	cmd := cl.B().Xadd().Key(streamwire.IDMPProbeKey(stream)).Nomkstream().Idmp().Pid("redstream-probe").Iid("probe").
		Id("*").FieldValue().FieldValue("probe", "1").Build()
	err := p.do(ctx, cmd).Error()
	switch {
	case err == nil || rueidis.IsRedisNil(err):
		p.idmp.Store(idmpYes)
	case isRedisErr(err) && !codedErr(err):
		p.idmp.Store(idmpNo) // a plain ERR: "Invalid stream ID", "syntax error"
	default:
		return fmt.Errorf("stream: send to %q: the probe for XADD IDMP failed, the message was not sent: %w", stream, err)
	}
	return nil
}

// codedErr reports whether err, an error reply, starts with an error code of its own
// (CLUSTERDOWN, LOADING, NOPERM, READONLY...) rather than the generic ERR, which rueidis
// strips: such an error says nothing of the command's syntax.
func codedErr(err error) bool {
	code, _, _ := strings.Cut(err.Error(), " ")
	if code == "" {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	return true
}

// isRedisErr reports whether err is an error reply of the server (not a connection error,
// a timeout or a null reply).
func isRedisErr(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && !re.IsNil()
}

// buildIdem encodes out, which has an idempotency key, into its command: XADD IDMP on a
// server that has it, else an EVAL of xadd_idem.lua (EVAL, not EVALSHA: the command may go
// into a DoMulti, where EVALSHA's fallback cannot).
func (p *Producer) buildIdem(out *Outgoing, fields []string) (rueidis.Completed, error) {
	cl := p.client
	switch p.idmp.Load() {
	case idmpYes:
		b := cl.B().Xadd().Key(out.stream).Idmp().Pid(idmpProducer(out.idem)).Iid(out.idem)
		if out.opts.maxLen > 0 {
			fv := b.Maxlen().Almost().Threshold(strconv.FormatInt(out.opts.maxLen, 10)).Id("*").FieldValue()
			for i := 0; i < len(fields); i += 2 {
				fv = fv.FieldValue(fields[i], fields[i+1])
			}
			return fv.Build(), nil
		}
		fv := b.Id("*").FieldValue()
		for i := 0; i < len(fields); i += 2 {
			fv = fv.FieldValue(fields[i], fields[i+1])
		}
		return fv.Build(), nil
	case idmpNo:
		return cl.B().Eval().Script(xaddIdemCompact).Numkeys(2).Key(out.stream, streamwire.SentKey(out.stream, out.idem)).
			Arg(idemArgs(out, fields)...).Build(), nil
	}
	return rueidis.Completed{}, fmt.Errorf("stream: send to %q: XADD IDMP support not probed", out.stream)
}

// idemArgs returns the ARGV of xadd_idem.lua for out.
func idemArgs(out *Outgoing, fields []string) []string {
	args := make([]string, 0, 2+len(fields))
	args = append(args, strconv.FormatInt(idempotencyTTL.Milliseconds(), 10), strconv.FormatInt(max(out.opts.maxLen, 0), 10))
	return append(args, fields...)
}

// writeIdemScript runs xadd_idem.lua for out (EVALSHA, falling back to EVAL).
func (p *Producer) writeIdemScript(ctx context.Context, out *Outgoing, fields []string) (string, error) {
	keys := []string{out.stream, streamwire.SentKey(out.stream, out.idem)}
	args := idemArgs(out, fields)
	r := await(ctx, func() rueidis.RedisResult { return xaddIdemScript.Exec(ctx, p.client, keys, args) }, unknownResult)
	return p.result(out, r)
}

// route returns the stream out goes to: by its Key, or, for a message with an idempotency
// key and a Key the producer made up, by the idempotency key, so that every retry of it
// goes to the same partition.
func (t *producerTopic) routeOut(out *Outgoing) string {
	if t.levels {
		return t.streams[out.opts.priority]
	}
	if out.idem != "" && out.Key == out.autoKey && len(t.streams) > 1 {
		return t.streams[streamwire.PartitionOf(out.idem, len(t.streams))]
	}
	if out.uniq != "" && out.Key == out.autoKey && len(t.streams) > 1 {
		return t.streams[streamwire.PartitionOf(out.uniq, len(t.streams))]
	}
	return t.route(out.Key, out.autoKey)
}
