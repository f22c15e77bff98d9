package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
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
