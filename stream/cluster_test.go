package stream_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestCluster runs the scripted paths (dead letter, replay, reclaim, safe trim, sink) on a
// real 3-master Redis Cluster: every script's keys must share a slot, or rueidis and the
// server refuse them.
func TestCluster(t *testing.T) {
	client := redistest.ClusterClient(t)
	ctx := context.Background()
	for _, topic := range []string{newTopic(t), "{tenant-" + newTopic(t) + "}orders", "env-topic"} {
		t.Run(topic, func(t *testing.T) {
			cfg := fastConfig()
			cfg.MaxDeliveries = 2
			cfg.Trim.MaxLen = 1
			if topic == "env-topic" {
				cfg.EnvIsolation, cfg.Env = true, newTopic(t)
			}
			var fail atomic.Bool
			fail.Store(true)
			var handled atomic.Int64
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
				Handle: func(ctx context.Context, m *stream.Message[order]) error {
					if fail.Load() {
						return errors.New("down")
					}
					handled.Add(1)
					return nil
				}}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c)
			send(t, newProducer(t, client, cfg), topic, order{1, "x"})
			dls, _ := stream.NewDeadLetters(client, cfg)
			eventually(t, 10*time.Second, "the dead letter", func() bool { n, _ := dls.Len(ctx, topic); return n == 1 })
			fail.Store(false)
			if n, err := dls.ReplayAll(ctx, topic, 0); err != nil || n != 1 {
				t.Fatalf("ReplayAll = %d, %v", n, err)
			}
			eventually(t, 10*time.Second, "the replay handled", func() bool { return handled.Load() == 1 })
			tr, _ := stream.NewTrimmer(client, cfg)
			eventually(t, 5*time.Second, "a trim", func() bool {
				n, err := tr.Trim(ctx, topic)
				if err != nil {
					t.Fatal(err)
				}
				return n > 0
			})
			s, err := stream.NewCheckpointedListSink(client, topic+":sink:"+newTopic(t), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a", "b", "a"} {
				_ = s.Invoke(ctx, stream.Record{IdempotencyKey: k, Value: k})
			}
			if n, err := s.Checkpoint(ctx); err != nil || n != 2 {
				t.Errorf("Checkpoint = %d, %v; want 2", n, err)
			}
		})
	}
}
