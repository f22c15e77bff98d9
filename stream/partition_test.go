package stream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/keyslot"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// TestPartitionVectors pins the partition names, key slots and key-to-partition rule that
// producers in other languages must reproduce (testdata/partitions.json).
func TestPartitionVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/partitions.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Slots map[string]int `json:"slots"`
		Names []struct {
			Topic      string   `json:"topic"`
			Partitions int      `json:"partitions"`
			Streams    []string `json:"streams"`
		} `json:"names"`
		Keys []struct {
			Key        string `json:"key"`
			Partitions int    `json:"partitions"`
			Partition  int    `json:"partition"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for k, want := range v.Slots {
		if got := keySlot(k); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", k, got, want)
		}
	}
	for _, n := range v.Names {
		got, err := stream.PartitionStreams(stream.Config{Partitions: map[string]int{n.Topic: n.Partitions}}, n.Topic)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != strings.Join(n.Streams, " ") {
			t.Errorf("PartitionStreams(%q, %d) = %q, want %q", n.Topic, n.Partitions, got, n.Streams)
		}
	}
	for _, k := range v.Keys {
		if got := streamwire.PartitionOf(k.Key, k.Partitions); got != k.Partition {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", k.Key, k.Partitions, got, k.Partition)
		}
	}
}

// TestPartitionSpread checks the slot rule for many counts: each partition's slot is within
// 16384/(8P) of the centre of its range, so the partitions are spread evenly and every
// master of an evenly split cluster of M <= P masters holds one.
func TestPartitionSpread(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 7, 8, 16, 31, 64, 100, 256, streamwire.MaxPartitions} {
		cfg := stream.Config{Partitions: map[string]int{"orders": n}}
		names, err := stream.PartitionStreams(cfg, "orders")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, s := range names {
			c := (2*i + 1) * 16384 / (2 * n)
			if d := keySlot(s) - c; d < -16384/(8*n) || d > 16384/(8*n) {
				t.Fatalf("P=%d: partition %d %q in slot %d, %d from the centre %d", n, i, s, keySlot(s), d, c)
			}
			if seen[s] {
				t.Fatalf("P=%d: %q twice", n, s)
			}
			seen[s] = true
			if dl := streamwire.DeadLetterStreamName(s); keySlot(dl) != keySlot(s) {
				t.Fatalf("dead-letter stream %q not in the slot of %q", dl, s)
			}
		}
		for m := 1; m <= min(n, 16); m++ { // masters holding equal contiguous ranges
			held := map[int]bool{}
			for _, s := range names {
				held[keySlot(s)*m/16384] = true
			}
			if len(held) != m {
				t.Errorf("P=%d on %d masters: only %d hold a partition", n, m, len(held))
			}
		}
	}
}

func TestPartitionConfigErrors(t *testing.T) {
	for name, cfg := range map[string]stream.Config{
		"negative":  {Partitions: map[string]int{"a": -1}},
		"too many":  {Partitions: map[string]int{"a": streamwire.MaxPartitions + 1}},
		"tagged":    {Partitions: map[string]int{"{shop}orders": 2}},
		"bad topic": {Partitions: map[string]int{"a}b": 2}},
		"empty":     {Partitions: map[string]int{"": 2}},
	} {
		t.Run(name, func(t *testing.T) {
			err := cfg.Validate()
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "partitions.") {
				t.Fatalf("Validate = %v, want an ErrInvalidConfig naming partitions.<topic>", err)
			}
		})
	}
	// A tagged topic with 0 or 1 partitions is a plain topic.
	if err := (stream.Config{Partitions: map[string]int{"{shop}orders": 1}}).Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := stream.PartitionStreams(stream.Config{Partitions: map[string]int{"orders": 1}}, "orders")
	if err != nil || len(s) != 1 || s[0] != "orders" {
		t.Fatalf("one partition = %q, %v; want the plain stream", s, err)
	}
}

func TestPartitionedTopic(t *testing.T) {
	t.Run("server", func(t *testing.T) { testPartitioned(t, redistest.Client(t), false) })
	t.Run("cluster", func(t *testing.T) { testPartitioned(t, redistest.ClusterClient(t), true) })
}

// testPartitioned sends to a 4-partition topic with Send, SendBatch (keyed and keyless) and
// delayed sends, consumes it with one consumer reading every partition, and checks: every
// message handled once, in its key's partition, in per-key order (OrderedByKey, Concurrency
// 4); keyless messages spread round robin; on the cluster, the server's slots match
// KeySlot and the partitions' entries are on all 3 masters; then dead letters, replay,
// trimming and metrics per partition.
func testPartitioned(t *testing.T, client rueidis.Client, cluster bool) {
	ctx := context.Background()
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Partitions = map[string]int{topic: 4}
	cfg.MaxDeliveries = 1
	streams, err := stream.PartitionStreams(cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 20, 15
	var (
		mu      sync.Mutex
		seen    = map[string]int{} // key -> count handled
		last    = map[string]int{} // key -> last sequence number handled
		badOrd  int                // per-key order violations
		wrong   int                // messages read from another partition than their key's
		autoKey = map[int]int{}    // partition -> messages sent without key
	)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", OrderedByKey: true, Concurrency: 4,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if m.Body.Status == "poison" {
				return errors.New("refused")
			}
			mu.Lock()
			defer mu.Unlock()
			if m.Body.Status == "auto" {
				autoKey[m.Partition]++
				return nil
			}
			if streamwire.PartitionOf(m.Key, 4) != m.Partition {
				wrong++
			}
			seen[m.Key+"/"+strconv.Itoa(m.Body.ID)]++
			if m.Body.ID <= last[m.Key] {
				badOrd++
			}
			last[m.Key] = m.Body.ID
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	for seq := 1; seq <= perKey; seq++ {
		if seq%3 == 0 { // every third round as one batch
			batch := make([]stream.Sendable, 0, keys)
			for k := range keys {
				batch = append(batch, &stream.Message[order]{Key: "k" + strconv.Itoa(k), Body: order{seq, "ok"}})
			}
			if _, err := p.SendBatch(ctx, topic, batch); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for k := range keys {
			if _, err := p.Send(ctx, topic, &stream.Message[order]{Key: "k" + strconv.Itoa(k), Body: order{seq, "ok"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 8 { // no key: round robin, two per partition
		send(t, p, topic, order{0, "auto"})
	}
	// Delayed messages land in their key's partition when due.
	for k := range 4 {
		if _, err := p.Send(ctx, topic, &stream.Message[order]{Key: "late" + strconv.Itoa(k), Body: order{1, "ok"}},
			stream.WithDelay(200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := p.Scheduled(ctx, topic); err != nil || n == 0 {
		t.Errorf("Scheduled = %d, %v; want the delayed messages", n, err)
	}
	total := keys*perKey + 4
	eventually(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == total
	})
	time.Sleep(200 * time.Millisecond) // room for a duplicate to show
	mu.Lock()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s handled %d times", k, n)
		}
	}
	if badOrd != 0 || wrong != 0 {
		t.Errorf("%d per-key order violations, %d messages out of their key's partition", badOrd, wrong)
	}
	for i := range 4 {
		if autoKey[i] != 2 {
			t.Errorf("messages without key: %v per partition, want 2 each (round robin)", autoKey)
			break
		}
	}
	mu.Unlock()
	for i, s := range streams {
		if n := xlen(t, client, s); n == 0 {
			t.Errorf("partition %d (%s) is empty", i, s)
		}
	}
	if cluster {
		masters := clusterMasters(t, client)
		on := map[string]int{}
		for _, s := range streams {
			if slot, err := client.Do(ctx, client.B().ClusterKeyslot().Key(s).Build()).AsInt64(); err != nil || int(slot) != keySlot(s) {
				t.Errorf("CLUSTER KEYSLOT %s = %d, %v; KeySlot says %d", s, slot, err, keySlot(s))
			}
			on[masters[keySlot(s)]] += int(xlen(t, client, s))
		}
		t.Logf("entries per master: %v", on)
		if len(on) != 3 {
			t.Errorf("the 4 partitions' entries are on %d masters (%v), want 3", len(on), on)
		}
	}
	// Stats: one per partition.
	if hs := c.Stats().Handlers; len(hs) != 4 || hs[0].Partition != 0 || hs[3].Partition != 3 {
		t.Errorf("Stats().Handlers = %+v, want one per partition", hs)
	}

	// Dead letters, per partition.
	dls, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	poisonKey := "k3"
	pp := streamwire.PartitionOf(poisonKey, 4)
	if _, err := p.Send(ctx, topic, &stream.Message[order]{Key: poisonKey, Body: order{1000, "poison"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the dead letter", func() bool { n, _ := dls.Len(ctx, topic); return n == 1 })
	if _, err := dls.List(ctx, topic, stream.ListOptions{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("List without a partition = %v, want ErrInvalidConfig", err)
	}
	if _, err := dls.Partition(4).List(ctx, topic, stream.ListOptions{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("List of partition 4 of 4 = %v, want ErrInvalidConfig", err)
	}
	l, err := dls.Partition(pp).List(ctx, topic, stream.ListOptions{})
	if err != nil || len(l) != 1 || l[0].Fields[streamwire.FieldKey] != poisonKey {
		t.Fatalf("Partition(%d).List = %+v, %v; want the dead letter", pp, l, err)
	}
	if n := xlen(t, client, streamwire.DeadLetterStreamName(streams[pp])); n != 1 {
		t.Errorf("dead-letter stream of partition %d holds %d, want 1", pp, n)
	}
	if n, err := dls.ReplayAll(ctx, topic, 0, stream.WithReplayHandler(func(_ context.Context, dl *stream.DeadLetter) (bool, error) {
		dl.Fields[streamwire.FieldBody] = strings.Replace(dl.Fields[streamwire.FieldBody], "poison", "ok", 1)
		return true, nil
	})); err != nil || n != 1 {
		t.Fatalf("ReplayAll = %d, %v; want 1", n, err)
	}
	eventually(t, 10*time.Second, "the replayed message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[poisonKey+"/1000"] == 1
	})
	// Trimming works per partition.
	cfg.Trim.MaxLen, cfg.Trim.Mode = 1, stream.TrimMaxLen
	tr, _ := stream.NewTrimmer(client, cfg)
	if n, err := tr.Trim(ctx, topic); err != nil || n < int64(total)-4 {
		t.Errorf("Trim = %d, %v; want about every entry but one per partition", n, err)
	}
	for _, s := range streams {
		if n := xlen(t, client, s); n != 1 {
			t.Errorf("%s holds %d after trimming to 1", s, n)
		}
	}
	var buf bytes.Buffer
	cfg.Metrics.WritePrometheus(&buf)
	for i := range 4 {
		want := fmt.Sprintf(`redis_streaming_mq_consumed_total{topic=%q,partition="%d",group="g"}`, topic, i)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// clusterMasters maps each slot to the address of its master (CLUSTER SLOTS).
func clusterMasters(t *testing.T, client rueidis.Client) map[int]string {
	t.Helper()
	ranges, err := client.Do(context.Background(), client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, r := range ranges {
		a, _ := r.ToArray()
		lo, _ := a[0].AsInt64()
		hi, _ := a[1].AsInt64()
		node, _ := a[2].ToArray()
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		for s := lo; s <= hi; s++ {
			out[int(s)] = fmt.Sprintf("%s:%d", host, port)
		}
	}
	if len(out) != 16384 {
		t.Fatalf("CLUSTER SLOTS covers %d slots", len(out))
	}
	return out
}

// keySlot returns the Redis Cluster hash slot of key.
func keySlot(key string) int { return int(keyslot.Of(key)) }
