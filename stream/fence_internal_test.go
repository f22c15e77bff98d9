package stream

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// TestAckScriptFence: ack.lua acknowledges the current deliveries of a batch and refuses the
// others, whether its range lookup lists them or they are looked up alone (a range limit
// smaller than the batch).
func TestAckScriptFence(t *testing.T) {
	for _, limit := range []int{1, 100} {
		t.Run("range limit "+strconv.Itoa(limit), func(t *testing.T) {
			ctx := context.Background()
			c := redistest.Client(t)
			stream, _ := dlqKeys(t)
			var ids []string
			for i := 0; i < 5; i++ {
				id, err := c.Do(ctx, c.B().Xadd().Key(stream).Id("*").FieldValue().FieldValue("k", strconv.Itoa(i)).Build()).ToString()
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			do(t, c, c.B().XgroupCreate().Key(stream).Group("g").Id("0").Build())
			do(t, c, c.B().Xreadgroup().Group("g", "c1").Count(5).Streams().Key(stream).Id(">").Build())
			// ids[1]: taken over by c2 (delivery 2); ids[2]: claimed again by c1 (delivery 2);
			// ids[3]: acknowledged already.
			do(t, c, c.B().Xclaim().Key(stream).Group("g").Consumer("c2").MinIdleTime("0").Id(ids[1]).Build())
			do(t, c, c.B().Xclaim().Key(stream).Group("g").Consumer("c1").MinIdleTime("0").Id(ids[2]).Build())
			do(t, c, c.B().Xack().Key(stream).Group("g").Id(ids[3]).Build())
			args := []string{"g", "c1", "0", ids[0], ids[4], strconv.Itoa(limit)}
			for _, id := range ids {
				args = append(args, id, "1")
			}
			res, err := ackScript.Exec(ctx, c, []string{stream}, args).ToArray()
			if err != nil || len(res) != 5 {
				t.Fatalf("ack.lua = %v, %v", res, err)
			}
			acked, _ := res[0].AsInt64()
			stale, _ := res[3].AsStrSlice()
			gone, _ := res[4].AsStrSlice()
			if acked != 2 || !slices.Equal(stale, []string{ids[1], ids[2]}) || !slices.Equal(gone, []string{ids[3]}) {
				t.Errorf("acked %d, stale %v, gone %v; want 2, [%s %s], [%s]", acked, stale, gone, ids[1], ids[2], ids[3])
			}
			if n := pendingCount(t, c, stream); n != 2 {
				t.Errorf("%d entries pending, want 2 (the refused ones)", n)
			}
		})
	}
}

// TestClaimScriptCounts: claim.lua replies each claimed entry with its new delivery count;
// mode own leaves another consumer's entries alone.
func TestClaimScriptCounts(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	stream, _ := dlqKeys(t)
	id := pendingEntry(t, c, stream, []string{"k", "v"})
	claim := func(me, mode string) []string {
		t.Helper()
		msg, err := claimScript.Exec(ctx, c, []string{stream}, []string{"g", me, mode, id}).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range msg {
			f, _ := x.ToArray()
			n, _ := f[2].AsInt64()
			s, _ := f[0].ToString()
			out = append(out, s+"#"+strconv.FormatInt(n, 10))
		}
		return out
	}
	if got := claim("c2", "own"); len(got) != 0 {
		t.Errorf("mode own claimed another consumer's entry: %v", got)
	}
	if got := claim("c2", "any"); !slices.Equal(got, []string{id + "#2"}) {
		t.Errorf("mode any: %v, want [%s#2]", got, id)
	}
	if got := claim("c2", "own"); !slices.Equal(got, []string{id + "#3"}) {
		t.Errorf("mode own on its own entry: %v, want [%s#3]", got, id)
	}
}

// pendingCount returns the number of pending entries of group g in stream.
func pendingCount(t *testing.T, c rueidis.Client, stream string) int64 {
	t.Helper()
	res, err := c.Do(context.Background(), c.B().Xpending().Key(stream).Group("g").Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res[0].AsInt64()
	return n
}
