package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// Record is one value for an idempotent sink: Value is written only if IdempotencyKey was not
// seen within the sink's TTL.
type Record struct {
	IdempotencyKey string
	Value          string
}

// defaultSinkTTL is how long an idempotent sink remembers a key when its TTL is zero.
const defaultSinkTTL = 24 * time.Hour

// ListSink appends records to a Redis list, each at most once per idempotency key: turning
// at-least-once delivery into exactly-once output, as long as a redelivery comes within the
// TTL. One script per write (sink_write.lua: SET key NX PX ttl, then RPUSH), with the list
// and the keys in one hash slot. It is safe for concurrent use and does not own its client.
type ListSink struct {
	client rueidis.Client
	list   string
	ttl    string // ms
}

var _ redstream.Sink[Record] = (*ListSink)(nil)

// NewListSink returns a sink appending to list, remembering idempotency keys for ttl (0
// means 24 hours; at least 1 ms). The idempotency key k is stored at "{list}:idem:k"
// (or "list:idem:k" when list has a hash tag). A bad list name or negative ttl is an error.
func NewListSink(client rueidis.Client, list string, ttl time.Duration) (*ListSink, error) {
	if client == nil {
		return nil, errInvalid("nil rueidis client")
	}
	if err := checkName("list", list); err != nil {
		return nil, err
	}
	if ttl < 0 {
		return nil, errInvalid("sink TTL %v: want >= 0", ttl)
	}
	if ttl == 0 {
		ttl = defaultSinkTTL
	}
	return &ListSink{client: client, list: list, ttl: strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)}, nil
}

// Invoke writes r (see Write); a duplicate is not an error.
func (s *ListSink) Invoke(ctx context.Context, r Record) error {
	_, err := s.Write(ctx, r)
	return err
}

// Write appends r.Value unless r.IdempotencyKey was written before (within the TTL), and
// reports whether it was appended. An empty idempotency key is an error. A ctx without
// deadline gets one of 10 s.
func (s *ListSink) Write(ctx context.Context, r Record) (bool, error) {
	w, err := s.write(ctx, []Record{r})
	if err != nil {
		return false, err
	}
	return w[0], nil
}

// write runs sink_write.lua for rs and returns, per record, whether it was appended.
// A ctx without deadline gets one of 10 s.
func (s *ListSink) write(ctx context.Context, rs []Record) ([]bool, error) {
	ctx, cancel := withDefaultDeadline(ctx, defaultCallTimeout)
	defer cancel()
	keys := make([]string, 0, len(rs)+1)
	args := make([]string, 0, len(rs)+1)
	keys = append(keys, s.list)
	args = append(args, s.ttl)
	for _, r := range rs {
		if r.IdempotencyKey == "" {
			return nil, fmt.Errorf("stream: sink %q: %w", s.list, redstream.ErrEmptyKey)
		}
		keys = append(keys, streamwire.IdemKey(s.list, r.IdempotencyKey))
		args = append(args, r.Value)
	}
	res, err := sinkWriteScript.Exec(ctx, s.client, keys, args).ToArray()
	if err != nil {
		return nil, fmt.Errorf("stream: sink %q: %w", s.list, err)
	}
	if len(res) != len(rs) {
		return nil, fmt.Errorf("stream: sink %q: unexpected reply of %d elements for %d records", s.list, len(res), len(rs))
	}
	out := make([]bool, len(rs))
	for i, v := range res {
		n, _ := v.AsInt64()
		out[i] = n == 1
	}
	return out, nil
}

// CheckpointedListSink buffers records in memory and writes them on Checkpoint, all in one
// atomic script, each at most once per idempotency key. Used with a stream consumer that
// checkpoints after a batch, a crash before the checkpoint loses only the buffer, which
// redelivery refills; a crash after it leaves nothing to redo. It is safe for concurrent
// use and does not own its client.
type CheckpointedListSink struct {
	sink *ListSink
	mu   sync.Mutex
	buf  []Record
}

var _ redstream.Sink[Record] = (*CheckpointedListSink)(nil)

// NewCheckpointedListSink returns a buffering sink; arguments as for NewListSink.
func NewCheckpointedListSink(client rueidis.Client, list string, ttl time.Duration) (*CheckpointedListSink, error) {
	s, err := NewListSink(client, list, ttl)
	if err != nil {
		return nil, err
	}
	return &CheckpointedListSink{sink: s}, nil
}

// Invoke buffers r until the next Checkpoint. An empty idempotency key is an error.
func (s *CheckpointedListSink) Invoke(_ context.Context, r Record) error {
	if r.IdempotencyKey == "" {
		return fmt.Errorf("stream: sink %q: %w", s.sink.list, redstream.ErrEmptyKey)
	}
	s.mu.Lock()
	s.buf = append(s.buf, r)
	s.mu.Unlock()
	return nil
}

// buffered returns the number of records waiting for Checkpoint.
func (s *CheckpointedListSink) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

// Checkpoint writes every buffered record in one atomic script and empties the buffer; it
// returns how many records were appended (the rest were duplicates). On error the buffer is
// kept, so the next Checkpoint tries again (the script being atomic, nothing was written).
// A ctx without deadline gets one of 10 s.
func (s *CheckpointedListSink) Checkpoint(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) == 0 {
		return 0, nil
	}
	w, err := s.sink.write(ctx, s.buf)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ok := range w {
		if ok {
			n++
		}
	}
	s.buf = s.buf[:0]
	return n, nil
}

// Discard drops the buffered records (a rollback to the last checkpoint) and returns how
// many there were.
func (s *CheckpointedListSink) Discard() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.buf)
	s.buf = s.buf[:0]
	return n
}
