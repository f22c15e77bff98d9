package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// TestExplicitDeadLetter: a handler dead-letters its message itself (Message.DeadLetter),
// and an operator dead-letters an entry another consumer holds (DeadLetters.Move); both are
// atomic moves, acknowledged, with the given reason, and OnFailure is not called.
func TestExplicitDeadLetter(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	ctx := context.Background()
	rec := newRecorder()
	second := make(chan error, 1)
	stuck := make(chan string, 1)
	release := make(chan struct{})
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 2, OnFailure: rec.fail,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if m.Body.ID == 2 {
				stuck <- m.ID
				<-release
				return nil
			}
			if err := m.DeadLetter(ctx, "bad data: no customer"); err != nil {
				return err
			}
			second <- m.DeadLetter(ctx, "again")
			return errors.New("returned after the dead letter: ignored")
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	defer close(release)
	p := newProducer(t, client, cfg)
	id1 := send(t, p, topic, order{ID: 1})
	if err := <-second; err == nil {
		t.Error("a second DeadLetter succeeded")
	}
	send(t, p, topic, order{ID: 2})
	id2 := <-stuck
	dls, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dls.Move(ctx, topic, "g", id2, "operator: stuck"); err != nil {
		t.Fatalf("Move: %v", err)
	}
	if _, err := dls.Move(ctx, topic, "g", id2, "operator: again"); !errors.Is(err, redstream.ErrNotFound) {
		t.Errorf("second Move = %v, want ErrNotFound", err)
	}
	eventually(t, 5*time.Second, "nothing pending", func() bool { return pending(t, client, topic, "g") == 0 })
	l, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil || len(l) != 2 {
		t.Fatalf("dead letters = %+v, %v; want 2", l, err)
	}
	if l[0].OriginalID != id1 || l[0].Error != "bad data: no customer" || l[0].Group != "g" || l[0].Deliveries != 1 {
		t.Errorf("first dead letter = %+v", l[0])
	}
	if l[1].OriginalID != id2 || l[1].Error != "operator: stuck" {
		t.Errorf("second dead letter = %+v", l[1])
	}
	time.Sleep(300 * time.Millisecond) // no retry comes back
	if n := rec.numFailures(); n != 0 {
		t.Errorf("OnFailure called %d times, want 0 for explicit dead letters", n)
	}
	if n, _ := dls.Len(ctx, topic); n != 2 {
		t.Errorf("%d dead letters after a while, want 2 (no retry of the dead-lettered message)", n)
	}
}

// TestDeleteOnAck: a single-group topic handled with DeleteOnAck keeps only its backlog;
// with a second group the entries are acknowledged but kept, so that group still reads all.
func TestDeleteOnAck(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	ctx := context.Background()
	p := newProducer(t, client, cfg)
	for _, groups := range []int{1, 2} {
		topic := newTopic(t)
		if groups == 2 {
			if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("other").Id("0").Mkstream().Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 50 {
			send(t, p, topic, order{ID: i})
		}
		rec := newRecorder()
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4, DeleteOnAck: true,
			Handle: func(_ context.Context, m *stream.Message[order]) error { rec.ok(m.Body.ID); return nil }}); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
		eventually(t, 10*time.Second, "every message", func() bool { return rec.numHandled() == 50 })
		eventually(t, 5*time.Second, "the acknowledgements", func() bool { return pending(t, client, topic, "g") == 0 })
		want := int64(0)
		if groups == 2 {
			want = 50
		}
		if n := xlen(t, client, topic); n != want {
			t.Errorf("%d groups: the stream holds %d entries after handling, want %d", groups, n, want)
		}
		deleted := promValue(t, cfg.Metrics, `redis_streaming_mq_deleted_on_ack_total{topic="`+topic+`",group="g"}`)
		if deleted != float64(50-want) {
			t.Errorf("%d groups: deleted_on_ack_total = %v, want %d", groups, deleted, 50-want)
		}
	}
}

// TestReplayHandler: a replay handler changes one dead letter's body and headers, drops
// another and keeps a third; ReplayAll replays the two it kept, as it left them. An error
// of the handler leaves the dead letter in place.
func TestReplayHandler(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	ctx := context.Background()
	p := newProducer(t, client, cfg)
	for i := 1; i <= 4; i++ {
		send(t, p, topic, order{ID: i, Status: "broken"})
	}
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	for _, id := range readGroup(t, client, topic, "g", 10) {
		if _, err := dls.Move(ctx, topic, "g", id, "bad status"); err != nil {
			t.Fatal(err)
		}
	}
	list, _ := dls.List(ctx, topic, stream.ListOptions{})
	if len(list) != 4 {
		t.Fatalf("%d dead letters, want 4", len(list))
	}
	failing := stream.WithReplayHandler(func(context.Context, *stream.DeadLetter) (bool, error) { return true, errors.New("not now") })
	if _, err := dls.Replay(ctx, topic, list[3].ID, failing); err == nil || !strings.Contains(err.Error(), "not now") {
		t.Fatalf("Replay with a failing handler = %v", err)
	}
	if _, err := dls.Get(ctx, topic, list[3].ID); err != nil {
		t.Fatalf("the dead letter is gone after a failed handler: %v", err)
	}
	fix := stream.WithReplayHandler(func(_ context.Context, dl *stream.DeadLetter) (bool, error) {
		body, err := dl.Body()
		if err != nil {
			return false, err
		}
		var o order
		if err := json.Unmarshal(body, &o); err != nil {
			return false, err
		}
		switch o.ID {
		case 1:
			dl.Fields[streamwire.FieldBody] = fmt.Sprintf(`{"id":1,"status":"fixed after %s"}`, dl.Error)
			dl.Fields[streamwire.FieldEnc] = streamwire.EncPlain
			dl.Fields[streamwire.HeaderPrefix+"replayed"] = "yes"
		case 2:
			return false, nil // drop
		}
		return true, nil
	})
	n, err := dls.ReplayAll(ctx, topic, 0, fix)
	if err != nil || n != 3 {
		t.Fatalf("ReplayAll = %d, %v; want 3 replayed (one dropped)", n, err)
	}
	if left, _ := dls.Len(ctx, topic); left != 0 {
		t.Errorf("%d dead letters left, want 0", left)
	}
	if v := promValue(t, cfg.Metrics, `redis_streaming_dlq_deleted_total{topic="`+topic+`"}`); v != 1 {
		t.Errorf("dlq_deleted_total = %v, want 1 (the dropped one)", v)
	}
	got := map[int]*stream.Message[order]{}
	var mu sync.Mutex
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Handle: func(_ context.Context, m *stream.Message[order]) error {
		mu.Lock()
		got[m.Body.ID] = m
		mu.Unlock()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	eventually(t, 5*time.Second, "the replays", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if m := got[1]; m.Body.Status != "fixed after bad status" || m.Headers["replayed"] != "yes" {
		t.Errorf("replay of 1 = %+v (headers %v), want the handler's body and header", m.Body, m.Headers)
	}
	if _, ok := got[2]; ok {
		t.Error("the dropped dead letter was replayed")
	}
	if got[3].Body.Status != "broken" || got[4].Body.Status != "broken" {
		t.Errorf("kept replays changed: %+v %+v", got[3].Body, got[4].Body)
	}
}

// TestDeadLetterConsumer: a typed consumer of a topic's dead-letter stream gets each dead
// letter's record (group, deliveries, error, time) and its message, a poison one with the
// decoding error instead of a body; it runs beside the topic's handler in one Consumer.
func TestDeadLetterConsumer(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	ctx := context.Background()
	got := make(chan *stream.DeadLetterMessage[order], 4)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "billing", NoRetry: true,
		Handle: func(context.Context, *stream.Message[order]) error { return errors.New("card declined") }}); err != nil {
		t.Fatal(err)
	}
	if err := stream.RegisterDeadLetters(c, stream.DeadLetterHandler[order]{Topic: topic, Group: "alerts",
		Handle: func(_ context.Context, dl *stream.DeadLetterMessage[order]) error { got <- dl; return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	before := time.Now().Add(-time.Second)
	msg := stream.Message[order]{Key: "o-7", Body: order{ID: 7, Status: "new"}, Headers: map[string]string{"tenant": "acme"}}
	if _, err := p.Send(ctx, topic, msg); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("key", "p").FieldValue("enc", "plain").FieldValue("body", "not json").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var dls []*stream.DeadLetterMessage[order]
	for range 2 {
		select {
		case dl := <-got:
			dls = append(dls, dl)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d dead letters, want 2", len(dls))
		}
	}
	d := dls[0]
	if d.Group != "billing" || d.Deliveries != 1 || d.Error != "card declined" || d.Time.Before(before) || d.OriginalID == "" {
		t.Errorf("record = %+v", d.DeadLetter)
	}
	if d.BodyErr != nil || d.Message.Body != msg.Body || d.Message.Key != "o-7" || d.Message.Headers["tenant"] != "acme" || d.Message.Topic != topic+":dlq" {
		t.Errorf("message = %+v (body error %v)", d.Message, d.BodyErr)
	}
	p2 := dls[1]
	if !errors.Is(p2.BodyErr, stream.ErrUndecodable) || !strings.HasPrefix(p2.Error, "poison: ") || p2.Message.Key != "p" || p2.Fields["body"] != "not json" {
		t.Errorf("poison dead letter = %+v, body error %v", p2.DeadLetter, p2.BodyErr)
	}
	dlq := streamwire.DeadLetterStreamName(topic)
	eventually(t, 5*time.Second, "the dead-letter group's acks", func() bool { return pending(t, client, dlq, "alerts") == 0 })
	if err := c.Unregister(ctx, topic+":dlq", "alerts"); err != nil {
		t.Errorf("Unregister of the dead-letter handler: %v", err)
	}
}
