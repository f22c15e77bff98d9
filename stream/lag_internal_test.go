package stream

import (
	"context"
	"testing"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// TestLagFallback: without a lag field in XINFO GROUPS (Redis 6.2), or with a nil one (Redis
// cannot compute it), the lag is counted after the group's last-delivered id, capped.
func TestLagFallback(t *testing.T) {
	if _, exact := groupLag(map[string]rueidis.RedisMessage{}); exact {
		t.Error("groupLag without a lag field reports an exact lag")
	}

	client := redistest.Client(t)
	ctx := context.Background()
	topic := "lagtest-" + t.Name()
	_ = client.Do(ctx, client.B().Del().Key(topic).Build()).Error()
	var ids []string
	for i := 0; i < 5; i++ {
		id, err := client.Do(ctx, client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("a", "1").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	c, err := NewConsumer(client, Config{Metrics: vm.NewSet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(c, Handler[struct{}]{Topic: topic, Group: "g", Handle: func(context.Context, *Message[struct{}]) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	h := c.handlers[0].house
	for _, tc := range []struct {
		last string
		want int64
	}{{"0-0", 5}, {ids[2], 2}, {ids[4], 0}} {
		if got := h.countLag(ctx, tc.last); got != tc.want {
			t.Errorf("countLag after %s = %d, want %d", tc.last, got, tc.want)
		}
	}
	// A group created at an explicit id has no entries-read counter: Redis 7.0 reports a nil
	// lag, and the gauge falls back to the count.
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id(ids[1]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	h.c.runCtx = ctx
	h.updateGauges()
	if got, exact := h.lagN.Load(), h.lagExact.Load(); got != 3 {
		t.Errorf("lag = %d (exact %v), want 3", got, exact)
	} else {
		t.Logf("lag %d, from XINFO GROUPS: %v", got, exact)
	}
	_ = c.Close(ctx)
}
