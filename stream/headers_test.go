package stream_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestHeadersEndToEnd sends a message with headers to a real server, checks the entry's
// fields as Redis holds them, fails it into the dead-letter stream, replays it and checks
// the headers reach the handler on every delivery.
func TestHeadersEndToEnd(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	ctx := context.Background()

	h := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme"}
	sent := maps.Clone(h)
	msg := stream.NewMessage(order{ID: 1, Status: "new"})
	msg.Headers = h
	id, err := p.Send(ctx, topic, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(h, sent) {
		t.Fatalf("Send changed the headers map: %v", h)
	}
	res, err := client.Do(ctx, client.B().Xrange().Key(topic).Start(id).End(id).Build()).ToArray()
	if err != nil || len(res) != 1 {
		t.Fatalf("XRANGE = %v, %v", res, err)
	}
	e, _ := res[0].ToArray()
	fv, err := e[1].AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < len(fv); i += 2 {
		names = append(names, fv[i])
	}
	if got := strings.Join(names, ","); got != "key,tag,enc,body,ts,h:tenant,h:traceparent" {
		t.Fatalf("entry fields %s, want key,tag,enc,body,ts,h:tenant,h:traceparent", got)
	}

	var mu sync.Mutex
	var seen []map[string]string
	var fail atomic.Bool
	fail.Store(true)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Handle: func(_ context.Context, m *stream.Message[order]) error {
		mu.Lock()
		seen = append(seen, m.Headers)
		mu.Unlock()
		if fail.Load() {
			return stream.Permanent(errors.New("refused"))
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	dls, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var dl stream.DeadLetter
	eventually(t, 10*time.Second, "the dead letter", func() bool {
		l, err := dls.List(ctx, topic, stream.ListOptions{})
		if err == nil && len(l) == 1 {
			dl = l[0]
			return true
		}
		return false
	})
	if got := dl.Headers(); !maps.Equal(got, h) {
		t.Fatalf("dead letter headers %v, want %v", got, h)
	}
	fail.Store(false)
	if _, err := dls.Replay(ctx, topic, dl.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the replay handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	for i, got := range seen {
		if !maps.Equal(got, h) {
			t.Errorf("delivery %d: headers %v, want %v", i+1, got, h)
		}
	}
}

func TestSendRejectsBadHeaders(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	msg := stream.NewMessage(order{ID: 1})
	msg.Headers = map[string]string{"bad name": "v"}
	_, err := p.Send(context.Background(), topic, msg)
	if !errors.Is(err, stream.ErrInvalidHeader) || !strings.Contains(err.Error(), `"bad name"`) {
		t.Fatalf("Send = %v, want ErrInvalidHeader naming the header", err)
	}
	if n := xlen(t, client, topic); n != 0 {
		t.Fatalf("XLEN = %d after a rejected send, want 0", n)
	}
}
