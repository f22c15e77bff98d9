package stream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// waitAfterScripts is a client that, after every script call, waits (up to 10 s) until
// cond holds. ReplayAll through it replays one dead letter, then waits for the consumer to
// fail the replay and dead-letter it again, so replays come back during the call.
type waitAfterScripts struct {
	rueidis.Client
	cond func() bool
}

func (w waitAfterScripts) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	name := cmd.Commands()[0]
	r := w.Client.Do(ctx, cmd)
	if name == "EVALSHA" || name == "EVAL" {
		for deadline := time.Now().Add(10 * time.Second); !w.cond() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return r
}

// idAfter reports whether stream entry id a is after b.
func idAfter(a, b string) bool {
	split := func(id string) (ms, seq uint64) {
		l, r, _ := strings.Cut(id, "-")
		ms, _ = strconv.ParseUint(l, 10, 64)
		seq, _ = strconv.ParseUint(r, 10, 64)
		return ms, seq
	}
	am, as := split(a)
	bm, bs := split(b)
	return am > bm || am == bm && as > bs
}

// promValue returns the value of the series line starting with series in set's exposition.
func promValue(t testing.TB, set *vm.Set, series string) float64 {
	t.Helper()
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// TestDLQReplayAllReplaysEachOnce: 3 dead letters, a consumer whose handler still fails, so
// that every replay comes back as a new dead letter during the call. ReplayAll replays
// exactly the 3 that existed when it started, with a limit of 100 and with no limit, and the
// replay metrics count what happened.
func TestDLQReplayAllReplaysEachOnce(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	topic := newTopic(t)
	var calls atomic.Int64
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(context.Context, *stream.Message[order]) error { calls.Add(1); return errors.New("still broken") }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	for i := 0; i < 3; i++ {
		send(t, p, topic, order{i, "x"})
	}
	plain, _ := stream.NewDeadLetters(client, cfg)
	three := func() bool { n, _ := plain.Len(ctx, topic); return n == 3 }
	eventually(t, 10*time.Second, "3 dead letters", three)
	dls, err := stream.NewDeadLetters(waitAfterScripts{client, three}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for round, limit := range []int{100, 0} {
		before, _ := plain.List(ctx, topic, stream.ListOptions{})
		bound := before[len(before)-1].ID
		n, err := dls.ReplayAll(ctx, topic, limit)
		if err != nil || n != 3 {
			t.Fatalf("ReplayAll(%d) = %d, %v; want 3", limit, n, err)
		}
		after, _ := plain.List(ctx, topic, stream.ListOptions{})
		if len(after) != 3 {
			t.Fatalf("%d dead letters after ReplayAll, want the 3 replays back", len(after))
		}
		for _, dl := range after {
			if !idAfter(dl.ID, bound) {
				t.Errorf("dead letter %s is not a replay that came back (bound %s)", dl.ID, bound)
			}
		}
		if got, want := calls.Load(), int64(3*(round+2)); got != want {
			t.Errorf("handler calls = %d, want %d", got, want)
		}
	}
	series := `{topic="` + topic + `"}`
	if v := promValue(t, cfg.Metrics, "redis_streaming_dlq_replay_success_total"+series); v != 6 {
		t.Errorf("%s = %v, want 6", "redis_streaming_dlq_replay_success_total", v)
	}
	if v := promValue(t, cfg.Metrics, "redis_streaming_dlq_replay_latency_seconds"+"_count"+series); v != 6 {
		t.Errorf("%s_count = %v, want 6", "redis_streaming_dlq_replay_latency_seconds", v)
	}
	if v := promValue(t, cfg.Metrics, "redis_streaming_dlq_replay_latency_seconds"+"_sum"+series); v <= 0 || v > 60 {
		t.Errorf("%s_sum = %v s, want the time of 6 replays", "redis_streaming_dlq_replay_latency_seconds", v)
	}
	if _, err := plain.Replay(ctx, topic, "1-1"); !errors.Is(err, redstream.ErrNotFound) {
		t.Errorf("Replay of a missing id = %v, want ErrNotFound", err)
	}
	if v := promValue(t, cfg.Metrics, "redis_streaming_dlq_replay_failure_total"+series); v != 1 {
		t.Errorf("%s = %v, want 1", "redis_streaming_dlq_replay_failure_total", v)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the last replays dead-lettered", three)
	list, _ := plain.List(ctx, topic, stream.ListOptions{})
	if n, err := plain.Delete(ctx, topic, list[0].ID, "1-1"); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if v := promValue(t, cfg.Metrics, "redis_streaming_dlq_deleted_total"+series); v != 1 {
		t.Errorf("%s = %v, want 1", "redis_streaming_dlq_deleted_total", v)
	}
	if n, err := plain.Purge(ctx, topic); err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	if v := promValue(t, cfg.Metrics, "redis_streaming_dlq_cleared_total"+series); v != 2 {
		t.Errorf("%s = %v, want 2", "redis_streaming_dlq_cleared_total", v)
	}
	if n, err := plain.ReplayAll(ctx, topic, 0); err != nil || n != 0 {
		t.Errorf("ReplayAll of an empty dead-letter stream = %d, %v", n, err)
	}
}

// TestDLQReplayAllLimit: a limit stops ReplayAll early; the next call goes on from the
// oldest remaining dead letter.
func TestDLQReplayAllLimit(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	topic := newTopic(t)
	name, _ := streamwire.StreamKey(topic, cfg.EnvIsolation, cfg.Env)
	dlq := streamwire.DeadLetterStreamName(name)
	for i := 0; i < 5; i++ {
		if err := client.Do(ctx, client.B().Xadd().Key(dlq).Id("*").FieldValue().FieldValue("body", strconv.Itoa(i)).FieldValue("dl_group", "g").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	if n, err := dls.ReplayAll(ctx, topic, 2); err != nil || n != 2 {
		t.Fatalf("ReplayAll(2) = %d, %v", n, err)
	}
	if n, err := dls.ReplayAll(ctx, topic, -1); err != nil || n != 3 {
		t.Fatalf("ReplayAll(-1) = %d, %v; want the other 3", n, err)
	}
	res, err := client.Do(ctx, client.B().Xrange().Key(name).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(res) != 5 {
		t.Fatalf("topic = %d entries, %v", len(res), err)
	}
	for i, e := range res {
		if e.FieldValues["body"] != strconv.Itoa(i) || e.FieldValues["replay_group"] != "g" {
			t.Errorf("replay %d = %v, want body %d in order", i, e.FieldValues, i)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := dls.ReplayAll(cctx, topic, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReplayAll with a cancelled context = %v", err)
	}
}

// hugeEntry returns the fields of an entry as a producer in another language might write
// it: the wire fields with body, plus extra fields.
func hugeEntry(body string, extra int) []string {
	f := []string{streamwire.FieldKey, "k1", streamwire.FieldEnc, streamwire.EncPlain, streamwire.FieldBody, body,
		streamwire.FieldTS, strconv.FormatInt(time.Now().UnixMilli(), 10)}
	for i := 0; i < extra; i++ {
		f = append(f, "x"+strconv.Itoa(i), fmt.Sprintf("value-%d", i))
	}
	return f
}

// deadLetterAndReplay writes fields to topic, lets a consumer fail it into the dead-letter
// stream, checks the dead letter, replays it (ReplayAll) and checks that the consumer
// handles the replay with the same body. The configuration is the default one: handling a
// huge entry may take longer than the short min-idle of fastConfig.
func deadLetterAndReplay(t *testing.T, client rueidis.Client, topic string, fields []string) {
	t.Helper()
	ctx := context.Background()
	cfg := stream.Config{Metrics: vm.NewSet()}
	var healthy atomic.Bool
	var got atomic.Value
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(_ context.Context, m *stream.Message[order]) error {
			if !healthy.Load() {
				return errors.New("too big to handle today")
			}
			got.Store(m.Body)
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	name, _ := streamwire.StreamKey(topic, cfg.EnvIsolation, cfg.Env)
	id, err := client.Do(ctx, client.B().Arbitrary("XADD").Keys(name).Args("*").Args(fields...).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	eventually(t, 30*time.Second, "the dead letter", func() bool { n, _ := dls.Len(ctx, topic); return n == 1 })
	list, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	dl := list[0]
	if dl.OriginalID != id || dl.Group != "g" || dl.Consumer != c.Stats().Consumer || dl.Deliveries != 1 || !strings.Contains(dl.Error, "too big") {
		t.Errorf("dead letter = id %s group %s consumer %s deliveries %d error %q", dl.OriginalID, dl.Group, dl.Consumer, dl.Deliveries, dl.Error)
	}
	if len(dl.Fields) != len(fields)/2 {
		t.Errorf("dead letter has %d fields, want %d", len(dl.Fields), len(fields)/2)
	}
	for i := 0; i < len(fields); i += 2 {
		if dl.Fields[fields[i]] != fields[i+1] {
			t.Fatalf("dead letter field %q differs", fields[i])
		}
	}
	healthy.Store(true)
	if n, err := dls.ReplayAll(ctx, topic, 0); err != nil || n != 1 {
		t.Fatalf("ReplayAll = %d, %v", n, err)
	}
	eventually(t, 30*time.Second, "the replay handled", func() bool { return got.Load() != nil })
	var want order
	if err := json.Unmarshal([]byte(fields[5]), &want); err != nil {
		t.Fatal(err)
	}
	if b := got.Load().(order); b != want {
		t.Errorf("replayed body differs: %d bytes of status, want %d", len(b.Status), len(want.Status))
	}
	if n, _ := dls.Len(ctx, topic); n != 0 {
		t.Errorf("%d dead letters after the replay", n)
	}
}

// TestDLQHugeEntriesThroughConsumer: a consumer dead-letters a 100,000-field entry and a
// 10 MB entry like small ones, and handles their replays.
func TestDLQHugeEntriesThroughConsumer(t *testing.T) {
	client := redistest.Client(t)
	t.Run("100k fields", func(t *testing.T) {
		deadLetterAndReplay(t, client, newTopic(t), hugeEntry(`{"id":1,"status":"many fields"}`, 100_000-4))
	})
	t.Run("10 MB", func(t *testing.T) {
		deadLetterAndReplay(t, client, newTopic(t), hugeEntry(`{"id":2,"status":"`+strings.Repeat("z", 10<<20)+`"}`, 0))
	})
}

// TestDLQLargeEntriesOnCluster: the transaction path of large entries on a real 3-master
// cluster, on untagged and tagged topics.
func TestDLQLargeEntriesOnCluster(t *testing.T) {
	client := redistest.ClusterClient(t)
	for _, topic := range []string{newTopic(t), "{tenant-" + newTopic(t) + "}orders"} {
		t.Run(topic, func(t *testing.T) {
			deadLetterAndReplay(t, client, topic, hugeEntry(`{"id":3,"status":"cluster"}`, 10_000))
		})
	}
}
