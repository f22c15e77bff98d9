package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// idemPaths runs f with a producer on the server's own path for keyed sends (XADD IDMP
// where the server has it, the script elsewhere) and with one forced onto the script path.
func idemPaths(t *testing.T, client rueidis.Client, cfg stream.Config, f func(t *testing.T, p *stream.Producer)) {
	t.Helper()
	for _, forced := range []bool{false, true} {
		name := "server"
		if forced {
			name = "script"
		}
		t.Run(name, func(t *testing.T) {
			p := newProducer(t, client, cfg)
			if forced {
				stream.ForceIdempotencyScript(p)
			}
			f(t, p)
		})
	}
}

// TestSendIdempotent: a repeated key returns the first send's id and writes nothing; other
// keys write other entries; the path taken leaves the state it should (a record with a TTL
// on the script path, IDMP metadata on the other).
func TestSendIdempotent(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	idemPaths(t, client, stream.Config{Metrics: vm.NewSet()}, func(t *testing.T, p *stream.Producer) {
		topic := newTopic(t)
		first := send(t, p, topic, order{ID: 1}, stream.WithIdempotencyKey("order-1"))
		path := stream.IdempotencyPath(p)
		t.Logf("path %q", path)
		again := send(t, p, topic, order{ID: 1, Status: "changed"}, stream.WithIdempotencyKey("order-1"))
		if again != first {
			t.Errorf("repeat returned %q, want the first send's id %q", again, first)
		}
		other := send(t, p, topic, order{ID: 2}, stream.WithIdempotencyKey("order-2"))
		if other == first {
			t.Errorf("another key returned the first id %q", first)
		}
		send(t, p, topic, order{ID: 3})
		if n := xlen(t, client, topic); n != 3 {
			t.Fatalf("XLEN = %d after sends with keys order-1 (twice), order-2 and one without; want 3", n)
		}
		// The entry of order-1 is the first message, not the repeat.
		entries, err := client.Do(ctx, client.B().Xrange().Key(topic).Start(first).End(first).Build()).AsXRange()
		if err != nil || len(entries) != 1 || strings.Contains(entries[0].FieldValues[streamwire.FieldBody], "changed") {
			t.Errorf("entry %s = %v, %v; want the first message", first, entries, err)
		}
		rec := stream.SentKey(topic, "order-1")
		ttl, err := client.Do(ctx, client.B().Pttl().Key(rec).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		switch path {
		case "script":
			if ttl <= 0 || ttl > stream.IdempotencyTTL.Milliseconds() {
				t.Errorf("PTTL %s = %d, want 1..%d", rec, ttl, stream.IdempotencyTTL.Milliseconds())
			}
			if got, _ := client.Do(ctx, client.B().Get().Key(rec).Build()).ToString(); got != first {
				t.Errorf("record %s = %q, want %q", rec, got, first)
			}
		case "idmp":
			if ttl != -2 {
				t.Errorf("PTTL %s = %d on the IDMP path, want -2 (no record)", rec, ttl)
			}
			info, err := client.Do(ctx, client.B().XinfoStream().Key(topic).Build()).AsMap()
			if err != nil {
				t.Fatal(err)
			}
			added, dups := info["iids-added"], info["iids-duplicates"]
			if n, _ := added.AsInt64(); n != 2 {
				t.Errorf("XINFO STREAM iids-added = %v, want 2", info["iids-added"])
			}
			if n, _ := dups.AsInt64(); n != 1 {
				t.Errorf("XINFO STREAM iids-duplicates = %v, want 1", info["iids-duplicates"])
			}
		default:
			t.Fatalf("path %q after a keyed send", path)
		}
		// With WithMaxLen the key still holds.
		a := send(t, p, topic, order{ID: 4}, stream.WithIdempotencyKey("order-4"), stream.WithMaxLen(1000))
		if b := send(t, p, topic, order{ID: 4}, stream.WithIdempotencyKey("order-4"), stream.WithMaxLen(1000)); a != b {
			t.Errorf("with WithMaxLen: repeat %q, first %q", b, a)
		}
		if n := xlen(t, client, topic); n != 4 {
			t.Errorf("XLEN = %d, want 4", n)
		}
	})
}

// TestSendIdempotentPartitioned: a keyed message without a business key goes to the
// partition of its idempotency key, so a repeat finds it; the keys of one topic are
// per partition stream.
func TestSendIdempotentPartitioned(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := stream.Config{Metrics: vm.NewSet(), Partitions: map[string]int{topic: 4}}
	idemPaths(t, client, cfg, func(t *testing.T, p *stream.Producer) {
		streams, err := stream.PartitionStreams(cfg, topic)
		if err != nil {
			t.Fatal(err)
		}
		before := int64(0)
		for _, s := range streams {
			before += xlen(t, client, s)
		}
		for i := range 20 {
			k := fmt.Sprintf("%s-k%d", t.Name(), i)
			first := send(t, p, topic, order{ID: i}, stream.WithIdempotencyKey(k))
			for range 3 {
				if again := send(t, p, topic, order{ID: i}, stream.WithIdempotencyKey(k)); again != first {
					t.Fatalf("key %s: repeat %q, first %q (another partition?)", k, again, first)
				}
			}
		}
		after := int64(0)
		for _, s := range streams {
			after += xlen(t, client, s)
		}
		if after-before != 20 {
			t.Errorf("%d entries for 20 keys sent 4 times each", after-before)
		}
	})
}

// TestSendBatchIdempotent: SendBatch with one key per message; the same batch again
// returns the same ids and writes nothing; a key repeated in a batch writes its first
// message only; a batch mixing old and new keys writes the new ones.
func TestSendBatchIdempotent(t *testing.T) {
	client := redistest.Client(t)
	idemPaths(t, client, stream.Config{Metrics: vm.NewSet()}, func(t *testing.T, p *stream.Producer) {
		for _, mw := range []bool{false, true} {
			t.Run(fmt.Sprintf("middleware=%v", mw), func(t *testing.T) {
				if mw {
					p.Use(func(next stream.SendFunc) stream.SendFunc { return next })
				}
				topic := newTopic(t)
				msgs := []stream.Sendable{stream.NewMessage(order{ID: 1}), stream.NewMessage(order{ID: 2}), stream.NewMessage(order{ID: 3})}
				keys := []string{"b-1", "b-2", "b-3"}
				res, err := p.SendBatch(context.Background(), topic, msgs, stream.WithIdempotencyKeys(keys...))
				if err != nil {
					t.Fatal(err)
				}
				again, err := p.SendBatch(context.Background(), topic, msgs, stream.WithIdempotencyKeys(keys...))
				if err != nil {
					t.Fatal(err)
				}
				for i := range res {
					if again[i].ID != res[i].ID || res[i].ID == "" {
						t.Errorf("message %d: repeat %q, first %q", i, again[i].ID, res[i].ID)
					}
				}
				if n := xlen(t, client, topic); n != 3 {
					t.Fatalf("XLEN = %d after the same batch twice, want 3", n)
				}
				mixed, err := p.SendBatch(context.Background(), topic, msgs, stream.WithIdempotencyKeys("b-2", "b-4", "b-4"))
				if err != nil {
					t.Fatal(err)
				}
				if mixed[0].ID != res[1].ID || mixed[1].ID == mixed[0].ID || mixed[2].ID != mixed[1].ID {
					t.Errorf("mixed batch ids %v (first batch %v): want b-2's old id, then one new id twice", mixed, res)
				}
				if n := xlen(t, client, topic); n != 4 {
					t.Errorf("XLEN = %d, want 4", n)
				}
			})
		}
	})
}

// TestIdempotencyKeyValidation: bad keys and misused options fail the call before anything
// is sent, with an error naming what is wrong.
func TestIdempotencyKeyValidation(t *testing.T) {
	client := redistest.Client(t)
	p := newProducer(t, client, stream.Config{Metrics: vm.NewSet()})
	topic := newTopic(t)
	msg := stream.NewMessage(order{ID: 1})
	long := strings.Repeat("k", stream.MaxIdempotencyKeyLen+1)
	tests := []struct {
		name  string
		batch int // messages of a SendBatch call; 0 for Send
		opts  []stream.SendOption
		want  string // in the error
	}{
		{"empty", 0, []stream.SendOption{stream.WithIdempotencyKey("")}, "empty idempotency key"},
		{"too long", 0, []stream.SendOption{stream.WithIdempotencyKey(long)}, "idempotency key of 129 bytes, at most 128"},
		{"space", 0, []stream.SendOption{stream.WithIdempotencyKey("order 1")}, `byte ' ' at offset 5 is not allowed`},
		{"brace", 0, []stream.SendOption{stream.WithIdempotencyKey("a{b}")}, `byte '{' at offset 1`},
		{"newline", 0, []stream.SendOption{stream.WithIdempotencyKey("a\nb")}, `byte 0x0a at offset 1`},
		{"non-ASCII", 0, []stream.SendOption{stream.WithIdempotencyKey("é")}, `byte 0xc3 at offset 0`},
		{"keys in Send", 0, []stream.SendOption{stream.WithIdempotencyKeys("a")}, "WithIdempotencyKeys is for SendBatch"},
		{"key in SendBatch", 1, []stream.SendOption{stream.WithIdempotencyKey("a")}, "use WithIdempotencyKeys"},
		{"key count", 1, []stream.SendOption{stream.WithIdempotencyKeys("a", "b")}, "2 keys for 1 messages"},
		{"no keys", 1, []stream.SendOption{stream.WithIdempotencyKeys()}, "0 keys for 1 messages"},
		{"bad key in batch", 2, []stream.SendOption{stream.WithIdempotencyKeys("a", "b c")}, "WithIdempotencyKeys: key 1: idempotency key"},
		{"with a delay", 0, []stream.SendOption{stream.WithIdempotencyKey("a"), stream.WithDelay(time.Second)}, "cannot be combined with WithDelay"},
		{"batch with a delay", 1, []stream.SendOption{stream.WithIdempotencyKeys("a"), stream.WithDelay(time.Second)}, "cannot be combined with WithDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.batch == 0 {
				_, err = p.Send(context.Background(), topic, msg, tt.opts...)
			} else {
				msgs := make([]stream.Sendable, tt.batch)
				for i := range msgs {
					msgs[i] = msg
				}
				_, err = p.SendBatch(context.Background(), topic, msgs, tt.opts...)
			}
			if err == nil || !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "stream: ") {
				t.Errorf("error %v, want one wrapping ErrInvalidConfig, starting \"stream: \" and containing %q", err, tt.want)
			}
		})
	}
	if n := xlen(t, client, topic); n != 0 {
		t.Errorf("XLEN = %d after rejected sends, want 0", n)
	}
	for _, k := range []string{"a", long[1:], "0192f0c4-7a51-7cc5-a1b2-3c4d5e6f7a8b", "01J9Z3K4M5N6P7Q8R9S0T1V2W3", "sha256:9f86d081884c7d65", "a/b+c=d@e_f.g:h-i"} {
		if _, err := p.Send(context.Background(), topic, msg, stream.WithIdempotencyKey(k)); err != nil {
			t.Errorf("key %q: %v", k, err)
		}
	}
}

// TestSendErrorClasses: an error reply means "not written" (no ErrOutcomeUnknown); a send
// to a closed port fails without ErrOutcomeUnknown too (the dial failed).
func TestSendErrorClasses(t *testing.T) {
	client := redistest.Client(t)
	p := newProducer(t, client, stream.Config{Metrics: vm.NewSet()})
	topic := newTopic(t)
	if err := client.Do(context.Background(), client.B().Set().Key(topic).Value("not a stream").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]stream.SendOption{nil, {stream.WithIdempotencyKey("k")}} {
		_, err := p.Send(context.Background(), topic, stream.NewMessage(order{ID: 1}), opts...)
		if err == nil || errors.Is(err, stream.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Send%v to a string key: %v, want WRONGTYPE without ErrOutcomeUnknown", opts, err)
		}
	}
	srv := redistest.NewServer(t)
	down := redistest.NewClient(t, srv.Addr)
	dp := newProducer(t, down, stream.Config{Metrics: vm.NewSet(), SendTimeout: 500 * time.Millisecond})
	send(t, dp, topic, order{ID: 1})
	srv.Stop()
	// The first send may meet the old connection's end (EOF: unknown, the server may have
	// read the command); the next ones dial, and a refused dial is a definite failure.
	var err error
	for range 5 {
		_, err = dp.Send(context.Background(), topic, stream.NewMessage(order{ID: 2}))
		t.Logf("Send with the server stopped: %v", err)
		if err == nil || !errors.Is(err, stream.ErrOutcomeUnknown) {
			break
		}
	}
	if err == nil || errors.Is(err, stream.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Send to a stopped server: %v, want a refused dial without ErrOutcomeUnknown", err)
	}
}

// TestSendTimeoutConfig: Config.SendTimeout defaults to DefaultSendTimeout and is
// range-checked, the error naming its YAML key.
func TestSendTimeoutConfig(t *testing.T) {
	if got := (stream.Config{}).WithDefaults().SendTimeout; got != stream.DefaultSendTimeout {
		t.Errorf("default SendTimeout %v, want %v", got, stream.DefaultSendTimeout)
	}
	tests := []struct {
		d    time.Duration
		want string // "" for valid
	}{
		{0, ""},
		{time.Millisecond, ""},
		{stream.MaxBlockTimeout, ""},
		{-time.Millisecond, "redis-stream.send-timeout-ms: got -1, want a positive number of milliseconds"},
		{time.Microsecond, "redis-stream.send-timeout-ms: got 1µs, want 0 (the default) or 1 to 3600000 milliseconds"},
		{stream.MaxBlockTimeout + time.Millisecond, "redis-stream.send-timeout-ms: got 3600001, want 0 (the default) or 1 to 3600000 milliseconds"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.d), func(t *testing.T) {
			err := stream.Config{SendTimeout: tt.d}.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tt.want != "" && (err == nil || !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate: %v, want an ErrInvalidConfig containing %q", err, tt.want)
			}
			if tt.want != "" {
				if _, err := stream.NewProducer(redistest.Client(t), stream.Config{SendTimeout: tt.d}); err == nil {
					t.Error("NewProducer accepted it")
				}
			}
		})
	}
}

// TestIDMPProducerSpread: keys spread over the 256 IDMP producer ids.
func TestIDMPProducerSpread(t *testing.T) {
	seen := map[string]int{}
	for i := range 25600 {
		seen[stream.IDMPProducer(fmt.Sprint("order-", i))]++
	}
	if len(seen) != 256 {
		t.Fatalf("%d producer ids for 25600 keys, want 256", len(seen))
	}
	for id, n := range seen {
		if !strings.HasPrefix(id, "redstream-") || len(id) != len("redstream-00") || n < 50 || n > 150 {
			t.Errorf("producer id %q has %d keys (want about 100)", id, n)
		}
	}
}
