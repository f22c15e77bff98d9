package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// countingClient counts the client's round trips: Do calls and DoMulti calls.
type countingClient struct {
	rueidis.Client
	do, multi, multiCmds atomic.Int64
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.do.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.multi.Add(1)
	c.multiCmds.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}

// bodies returns the "id" member of each entry's body in topic, in stream order.
func bodies(t *testing.T, client rueidis.Client, topic string) []int {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().Xrange().Key(topic).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, e := range res {
		var o order
		if err := json.Unmarshal([]byte(e.FieldValues[streamwire.FieldBody]), &o); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	return ids
}

func TestSendBatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster bool
		mw      bool
	}{{"server", false, false}, {"server, middleware", false, true}, {"cluster", true, false}, {"cluster, middleware", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var base rueidis.Client
			if tc.cluster {
				base = redistest.ClusterClient(t)
			} else {
				base = redistest.Client(t)
			}
			cc := &countingClient{Client: base}
			topic := newTopic(t)
			p := newProducer(t, cc, fastConfig())
			var mu sync.Mutex
			seen := map[int]string{} // order id -> id seen by the middleware
			if tc.mw {
				p.Use(func(next stream.SendFunc) stream.SendFunc {
					return func(ctx context.Context, out *stream.Outgoing) (string, error) {
						o, _ := out.Body.(order)
						if o.Status == "refuse" {
							return "", errors.New("refused")
						}
						out.Headers["n"] = fmt.Sprint(o.ID)
						id, err := next(ctx, out)
						mu.Lock()
						seen[o.ID] = id
						mu.Unlock()
						return id, err
					}
				})
			}
			const n = 200
			msgs := make([]stream.Sendable, 0, n)
			var want []int
			bad := map[int]string{}
			for i := 0; i < n; i++ {
				m := stream.NewMessage(order{ID: i})
				switch {
				case i == 17:
					m.Headers = map[string]string{"": "x"}
					bad[i] = "empty name"
				case i == 42:
					msgs = append(msgs, stream.NewMessage(func() {})) // not JSON
					bad[i] = "encode body"
					continue
				case i == 99 && tc.mw:
					m.Body.Status = "refuse"
					bad[i] = "refused"
				default:
					want = append(want, i)
				}
				msgs = append(msgs, m)
			}
			res, err := p.SendBatch(context.Background(), topic, msgs)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d messages failed; message 17", len(bad), n)) {
				t.Fatalf("SendBatch error %v, want %d of %d failed, first 17", err, len(bad), n)
			}
			if len(res) != n {
				t.Fatalf("%d results, want %d", len(res), n)
			}
			for i, r := range res {
				if why, isBad := bad[i]; isBad {
					if r.Err == nil || r.ID != "" || !strings.Contains(r.Err.Error(), why) {
						t.Errorf("result %d = %+v, want an error %q", i, r, why)
					}
				} else if r.Err != nil || r.ID == "" {
					t.Errorf("result %d = %+v, want an id", i, r)
				} else if tc.mw && seen[i] != r.ID {
					t.Errorf("middleware saw id %q for message %d, result %q", seen[i], i, r.ID)
				}
			}
			if got := bodies(t, base, topic); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("stream holds %v\nwant %v", got, want)
			}
			if cc.multi.Load() != 1 || cc.do.Load() != 0 || cc.multiCmds.Load() != int64(len(want)) {
				t.Fatalf("round trips: %d DoMulti of %d commands and %d Do, want 1 DoMulti of %d and no Do", cc.multi.Load(), cc.multiCmds.Load(), cc.do.Load(), len(want))
			}
		})
	}
}

func TestSendBatchInvalid(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	p := newProducer(t, client, fastConfig())
	ctx := context.Background()
	if res, err := p.SendBatch(ctx, topic, nil); err != nil || len(res) != 0 {
		t.Fatalf("empty batch = %v, %v; want no results, nil", res, err)
	}
	tests := []struct {
		name  string
		topic string
		msgs  []stream.Sendable
	}{
		{"too many", topic, make([]stream.Sendable, stream.MaxBatch+1)},
		{"nil message", topic, []stream.Sendable{stream.NewMessage(order{ID: 1}), nil}},
		{"bad topic", "", []stream.Sendable{stream.NewMessage(order{ID: 1})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.SendBatch(ctx, tc.topic, tc.msgs)
			if !errors.Is(err, redstream.ErrInvalidConfig) || res != nil {
				t.Fatalf("SendBatch = %v, %v; want nil, ErrInvalidConfig", res, err)
			}
		})
	}
	if n := xlen(t, client, topic); n != 0 {
		t.Fatalf("XLEN = %d, want 0", n)
	}
}
