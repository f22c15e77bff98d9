package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestDeadLetterReplay: a message fails until the dead-letter stream holds it, is replayed
// to its group only (a second, healthy group does not see it again), and succeeds.
func TestDeadLetterReplay(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	cfg.MaxDeliveries = 2
	topic := newTopic(t)
	var healthy atomic.Bool
	var mu sync.Mutex
	var billing, audit []int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "billing",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if !healthy.Load() {
				return errors.New("billing down")
			}
			mu.Lock()
			billing = append(billing, m.DeliveryCount)
			mu.Unlock()
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "audit",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			mu.Lock()
			audit = append(audit, m.DeliveryCount)
			mu.Unlock()
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	msg := stream.Message[order]{Key: "k1", Tag: "eu", Source: "shop", Body: order{9, "new"}}
	origID, err := p.Send(ctx, topic, msg, stream.WithGzip())
	if err != nil {
		t.Fatal(err)
	}
	dls, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the dead letter", func() bool { n, _ := dls.Len(ctx, topic); return n == 1 })
	list, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d entries, %v", len(list), err)
	}
	dl := list[0]
	if dl.OriginalID != origID || dl.Group != "billing" || dl.Deliveries != 2 || dl.Consumer != c.Stats().Consumer ||
		dl.Fields["key"] != "k1" || dl.Fields["tag"] != "eu" || dl.Fields["enc"] != "gzip" || time.Since(dl.Time) > time.Minute {
		t.Errorf("dead letter = %+v", dl)
	}
	if !strings.Contains(dl.Error, "max retry exceeded") || !strings.Contains(dl.Error, "billing down") {
		t.Errorf("dead letter error = %q, want max retry exceeded and the handler's error", dl.Error)
	}
	body, err := dl.Body()
	if err != nil {
		t.Fatal(err)
	}
	var got order
	if err := json.Unmarshal(body, &got); err != nil || got != (order{9, "new"}) {
		t.Errorf("dead letter body %s: %v", body, err)
	}
	if g, err := dls.Get(ctx, topic, dl.ID); err != nil || g.OriginalID != origID {
		t.Errorf("Get = %+v, %v", g, err)
	}
	if _, err := dls.Get(ctx, topic, "1-1"); !errors.Is(err, redstream.ErrNotFound) {
		t.Errorf("Get of a missing id = %v, want ErrNotFound", err)
	}

	healthy.Store(true)
	newID, err := dls.Replay(ctx, topic, dl.ID)
	if err != nil || newID == "" || newID == origID {
		t.Fatalf("Replay = %q, %v", newID, err)
	}
	eventually(t, 5*time.Second, "the replayed message", func() bool { mu.Lock(); defer mu.Unlock(); return len(billing) == 1 })
	if n, _ := dls.Len(ctx, topic); n != 0 {
		t.Errorf("dead letters after replay = %d, want 0", n)
	}
	if _, err := dls.Replay(ctx, topic, dl.ID); !errors.Is(err, redstream.ErrNotFound) {
		t.Errorf("second Replay = %v, want ErrNotFound", err)
	}
	eventually(t, 5*time.Second, "both groups idle", func() bool {
		return pending(t, client, topic, "billing") == 0 && pending(t, client, topic, "audit") == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(audit) != 1 {
		t.Errorf("the audit group handled %d times, want once (replays target the failed group)", len(audit))
	}
}

func TestDeadLetterAdmin(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	topic := newTopic(t)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error { return errors.New("no") }}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, client, cfg)
	for i := 0; i < 6; i++ {
		send(t, p, topic, order{i, "x"})
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	eventually(t, 10*time.Second, "6 dead letters", func() bool { n, _ := dls.Len(ctx, topic); return n == 6 })
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := dls.List(ctx, topic, stream.ListOptions{Count: 3})
	if err != nil || len(all) != 3 {
		t.Fatalf("List count 3 = %d, %v", len(all), err)
	}
	if n, err := dls.Delete(ctx, topic, all[0].ID, "1-1"); err != nil || n != 1 {
		t.Errorf("Delete = %d, %v; want 1", n, err)
	}
	if n, err := dls.ReplayAll(ctx, topic, 2, stream.ToAllGroups()); err != nil || n != 2 {
		t.Errorf("ReplayAll(2) = %d, %v; want 2", n, err)
	}
	if n, err := dls.Purge(ctx, topic); err != nil || n != 3 {
		t.Errorf("Purge = %d, %v; want 3", n, err)
	}
	if n := xlen(t, client, topic); n != 8 {
		t.Errorf("topic length = %d, want 6 + 2 replayed", n)
	}
	// The two replayed messages fail again and come back.
	c2 := newConsumer(t, client, cfg)
	if err := stream.Register(c2, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error { return errors.New("no") }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c2)
	eventually(t, 10*time.Second, "2 dead letters again", func() bool { n, _ := dls.Len(ctx, topic); return n == 2 })
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := dls.ReplayAll(ctx, topic, 0); err != nil || n != 2 {
		t.Errorf("ReplayAll(0) = %d, %v; want 2", n, err)
	}
	if _, err := dls.List(ctx, "bad}topic", stream.ListOptions{}); err == nil {
		t.Error("List of a bad topic: got nil error")
	}
}

func TestDeadLetterBounds(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	cfg.DeadLetter.MaxLen = 3
	topic := newTopic(t)
	var calls atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error { calls.Add(1); return errors.New("no") }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	for i := 0; i < 5; i++ {
		send(t, p, topic, order{i, "x"})
	}
	eventually(t, 10*time.Second, "5 failures, nothing pending", func() bool { return calls.Load() == 5 && pending(t, client, topic, "g") == 0 })
	dls, _ := stream.NewDeadLetters(client, cfg)
	list, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil || len(list) != 3 {
		t.Fatalf("dead letters = %d, %v; want the newest 3", len(list), err)
	}
	var first order
	b, _ := list[0].Body()
	_ = json.Unmarshal(b, &first)
	if first.ID != 2 {
		t.Errorf("oldest kept dead letter is order %d, want 2", first.ID)
	}
}

func TestDeadLetterMaxAge(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	cfg.DeadLetter.MaxAge = 50 * time.Millisecond
	topic := newTopic(t)
	var calls atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error { calls.Add(1); return errors.New("no") }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	dls, _ := stream.NewDeadLetters(client, cfg)
	send(t, p, topic, order{1, "old"})
	eventually(t, 10*time.Second, "the first dead letter", func() bool { n, _ := dls.Len(ctx, topic); return n == 1 })
	time.Sleep(100 * time.Millisecond)
	send(t, p, topic, order{2, "new"})
	eventually(t, 10*time.Second, "2 failures, nothing pending", func() bool { return calls.Load() == 2 && pending(t, client, topic, "g") == 0 })
	list, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters = %d, %v; want only the new one", len(list), err)
	}
	var o order
	b, _ := list[0].Body()
	if err := json.Unmarshal(b, &o); err != nil || o.ID != 2 {
		t.Errorf("kept %s, want order 2", b)
	}
}
