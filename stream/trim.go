package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/metrics"
)

// Trimmer trims topic streams by Config.Trim. A Consumer runs one for its topics every
// Trim.Interval; use one directly to trim on demand (for topics nobody consumes in this
// process, say). It is safe for concurrent use and does not own its client.
type Trimmer struct {
	client rueidis.Client
	cfg    Config
	acked  atomic.Int32 // 0 unknown, 1 the server has XTRIM ... ACKED, 2 it has not
}

// trimChunk is the most entries one trim_safe.lua call removes.
const trimChunk = 5000

// NewTrimmer returns a trimmer; cfg is validated (an error wraps redstream.ErrInvalidConfig).
func NewTrimmer(client rueidis.Client, cfg Config) (*Trimmer, error) {
	if client == nil {
		return nil, errInvalid("nil rueidis client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Trimmer{client: client, cfg: cfg.WithDefaults()}, nil
}

// Trim trims topic's stream (every partition's, one after the other, for a partitioned
// topic) once and returns the number of entries removed:
//   - TrimSafe: towards Trim.MaxLen, and of the entries older than Trim.MaxAge when set,
//     never removing an entry some group has not received and acknowledged (XTRIM MAXLEN =
//     n ACKED and XTRIM MINID = id ACKED on Redis 8.2+, else trim_safe.lua's MINID);
//   - TrimMaxLen: XTRIM MAXLEN = n, the Java starter's exact trimming, consumed or not (and XTRIM
//     MINID = id for Trim.MaxAge);
//   - TrimOff: nothing.
//
// Ages are measured by the Redis server's clock against the time in entry ids.
//
// A ctx without deadline gets one of 30 s (trimming a long stream takes several calls).
func (t *Trimmer) Trim(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := withDefaultDeadline(ctx, trimTimeout)
	defer cancel()
	streams, err := PartitionStreams(t.cfg, topic)
	if err != nil {
		return 0, err
	}
	if len(streams) == 1 {
		return t.trimStream(ctx, topic, -1, streams[0])
	}
	var total int64
	for i, s := range streams {
		n, err := t.trimStream(ctx, topic, i, s)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// trimStream trims one stream of topic (partition part, -1 for an unpartitioned topic).
func (t *Trimmer) trimStream(ctx context.Context, topic string, part int, stream string) (int64, error) {
	t.cfg.Metrics.GetOrCreateCounter(metrics.Name(metricTrimAttempts, topicLabels(topic, part)...)).Inc()
	n, err := t.trim(ctx, stream)
	if n > 0 {
		t.cfg.Metrics.GetOrCreateCounter(metrics.Name(metricTrimDeleted, topicLabels(topic, part)...)).Add(int(n))
	}
	return n, err
}

func (t *Trimmer) trim(ctx context.Context, stream string) (int64, error) {
	cl := t.client
	maxlen := strconv.FormatInt(t.cfg.Trim.MaxLen, 10)
	switch t.cfg.Trim.Mode {
	case TrimOff:
		return 0, nil
	case TrimMaxLen:
		n, err := cl.Do(ctx, cl.B().Xtrim().Key(stream).Maxlen().Exact().Threshold(maxlen).Build()).AsInt64()
		if err != nil {
			return 0, fmt.Errorf("stream: trim %q: %w", stream, err)
		}
		if t.cfg.Trim.MaxAge > 0 {
			minID, err := t.ageID(ctx)
			if err != nil {
				return n, fmt.Errorf("stream: trim %q: %w", stream, err)
			}
			m, err := cl.Do(ctx, cl.B().Xtrim().Key(stream).Minid().Exact().Threshold(minID).Build()).AsInt64()
			if err != nil {
				return n, fmt.Errorf("stream: trim %q: %w", stream, err)
			}
			n += m
		}
		return n, nil
	}
	if t.hasAcked(ctx) {
		n, err := cl.Do(ctx, cl.B().Xtrim().Key(stream).Maxlen().Exact().Threshold(maxlen).Acked().Build()).AsInt64()
		if err == nil {
			t.acked.Store(1)
			if t.cfg.Trim.MaxAge > 0 {
				minID, err := t.ageID(ctx)
				if err != nil {
					return n, fmt.Errorf("stream: trim %q: %w", stream, err)
				}
				m, err := cl.Do(ctx, cl.B().Xtrim().Key(stream).Minid().Exact().Threshold(minID).Acked().Build()).AsInt64()
				if err != nil {
					return n, fmt.Errorf("stream: trim %q: %w", stream, err)
				}
				n += m
			}
			return n, nil
		}
		if !strings.Contains(strings.ToLower(err.Error()), "syntax") {
			return 0, fmt.Errorf("stream: trim %q: %w", stream, err)
		}
		t.acked.Store(2)
	}
	var total int64
	for {
		res, err := trimSafeScript.Exec(ctx, cl, []string{stream},
			[]string{maxlen, strconv.Itoa(trimChunk), strconv.FormatInt(t.cfg.Trim.MaxAge.Milliseconds(), 10)}).ToArray()
		if err != nil {
			return total, fmt.Errorf("stream: trim %q: %w", stream, err)
		}
		if len(res) != 3 {
			return total, fmt.Errorf("stream: trim %q: unexpected reply of %d elements", stream, len(res))
		}
		n, _ := res[0].AsInt64()
		more, _ := res[1].AsInt64()
		total += n
		if more == 0 {
			return total, nil
		}
	}
}

// ageID returns the stream id below which entries are older than Trim.MaxAge, by the
// server's clock (TIME).
func (t *Trimmer) ageID(ctx context.Context) (string, error) {
	cl := t.client
	tm, err := cl.Do(ctx, cl.B().Time().Build()).AsStrSlice()
	if err != nil {
		return "", fmt.Errorf("read the server time: %w", err)
	}
	if len(tm) != 2 {
		return "", fmt.Errorf("read the server time: bad reply %q", tm)
	}
	sec, err1 := strconv.ParseInt(tm[0], 10, 64)
	usec, err2 := strconv.ParseInt(tm[1], 10, 64)
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("read the server time: bad reply %q", tm)
	}
	ms := sec*1000 + usec/1000 - t.cfg.Trim.MaxAge.Milliseconds()
	return strconv.FormatInt(max(ms, 0), 10) + "-0", nil
}

// hasAcked reports whether XTRIM ... ACKED (Redis 8.2+) is to be tried: until a server has
// answered it with a syntax error, the first trim is the probe (no version string is read,
// so a server that gains ACKED later, such as a newer Valkey, uses it).
func (t *Trimmer) hasAcked(context.Context) bool {
	return t.acked.Load() != 2
}

func (c *Consumer) trimLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.cfg.Trim.Interval)
	defer tick.Stop()
	for {
		select {
		case <-c.runCtx.Done():
			return
		case <-tick.C:
		}
		type target struct {
			topic string
			part  int
		}
		streams := map[string]target{}
		c.mu.Lock()
		for _, h := range c.handlers {
			if !h.deadLetters { // dead-letter streams have their own bounds
				streams[h.stream] = target{h.topic, h.partition}
			}
		}
		c.mu.Unlock()
		for stream, t := range streams {
			ctx, cancel := context.WithTimeout(c.runCtx, trimTimeout)
			_, err := c.trimmer.trimStream(ctx, t.topic, t.part, stream)
			cancel()
			if c.runCtx.Err() != nil {
				return
			}
			if err != nil {
				c.cfg.Metrics.GetOrCreateCounter(backgroundErrorName(t.topic, t.part, "", "trim")).Inc()
				c.trimState.fail(c.log, "stream: trimming fails", err, "topic", t.topic)
				c.report(err)
			} else {
				c.trimState.ok(c.log, "stream: trimming works again", "topic", t.topic)
			}
		}
	}
}
