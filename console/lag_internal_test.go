package console

import (
	"context"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// TestLagCounted: a group's lag is the entries after its last-delivered id, on a real Redis
// and on miniredis (which reports the stream's length as every group's lag): 5 entries,
// group "half" read 2 of them, "none" none, "all" all of them.
func TestLagCounted(t *testing.T) {
	mr := miniredis.RunT(t)
	mc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	for name, client := range map[string]rueidis.Client{"redis": redistest.Client(t), "miniredis": mc} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			topic := fmt.Sprintf("lag-%s-%s", name, t.Name())
			do := func(cmd rueidis.Completed) {
				t.Helper()
				if err := client.Do(ctx, cmd).Error(); err != nil && !rueidis.IsRedisNil(err) {
					t.Fatal(err)
				}
			}
			for i := 0; i < 5; i++ {
				do(client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("body", "{}").Build())
			}
			for g, n := range map[string]int64{"half": 2, "none": 0, "all": 5} {
				do(client.B().XgroupCreate().Key(topic).Group(g).Id("0").Build())
				if n > 0 {
					do(client.B().Xreadgroup().Group(g, "c").Count(n).Streams().Key(topic).Id(">").Build())
				}
			}
			c, err := New(Options{Client: client})
			if err != nil {
				t.Fatal(err)
			}
			ti, err := c.topicInfo(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, g := range ti.GroupList {
				got[g.Name] = g.Lag
			}
			if want := map[string]int64{"half": 3, "none": 5, "all": 0}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("lags %v, want %v", got, want)
			}
		})
	}
}
