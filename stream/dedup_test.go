package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

// flakyDedup fails its first IsDuplicate call.
type flakyDedup struct {
	redstream.Deduplicator
	failed atomic.Bool
}

func (f *flakyDedup) IsDuplicate(ctx context.Context, e string) (bool, error) {
	if !f.failed.Swap(true) {
		return false, errors.New("dedup store down")
	}
	return f.Deduplicator.IsDuplicate(ctx, e)
}

// TestDedup, on a real server with the Redis set deduplicator: business duplicates (one
// key sent three times) are handled once and acknowledged; a failure under Dedup is
// retried as without it (not recorded); a failing deduplicator check is a failed delivery
// that is retried.
func TestDedup(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	set := vm.NewSet()
	cfg.Metrics = set
	topic := newTopic(t)
	sd, err := redisbackend.NewDeduplicator(client, "dedup-"+topic, redstream.DedupSpec{Strategy: redstream.DedupSet}, redisbackend.DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dd := &flakyDedup{Deduplicator: sd}
	var mu sync.Mutex
	calls := map[string]int{}
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Dedup: dd,
		Handle: func(_ context.Context, m *stream.Message[order]) error {
			mu.Lock()
			calls[m.Key]++
			n := calls[m.Key]
			mu.Unlock()
			if m.Key == "k2" && n == 1 {
				return errors.New("fails once")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, client, cfg)
	for _, k := range []string{"k1", "k2", "k1", "k1"} {
		m := stream.NewMessage(order{ID: 1})
		m.Key = k
		if _, err := p.Send(context.Background(), topic, m); err != nil {
			t.Fatal(err)
		}
	}
	startConsumer(t, c)
	eventually(t, 10*time.Second, "everything acknowledged", func() bool {
		mu.Lock()
		k2 := calls["k2"]
		mu.Unlock()
		return k2 == 2 && pending(t, client, topic, "g") == 0 && xlen(t, client, topic) == 4 &&
			promValue(t, set, fmt.Sprintf(`%s{topic="%s",group="g"}`, "redis_streaming_mq_duplicates_total", topic)) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	// k1: the first delivery of the first k1 failed in the deduplicator's check, its retry
	// was handled; the two later k1 were skipped.
	if calls["k1"] != 1 || calls["k2"] != 2 {
		t.Fatalf("Handle calls %v, want k1 once and k2 twice (one failure, one retry)", calls)
	}
	if dup, _ := sd.IsDuplicate(context.Background(), "k2"); !dup {
		t.Fatal("k2 not recorded after its successful retry")
	}
}
