package stream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

func xadd(t testing.TB, client rueidis.Client, key string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := client.Do(context.Background(), client.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("body", fmt.Sprint(i)).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// readGroup reads up to n new entries for group and returns their ids.
func readGroup(t testing.TB, client rueidis.Client, key, group string, n int64) []string {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().Xreadgroup().Group(group, "c").Count(n).Streams().Key(key).Id(">").Build()).AsXRead()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range res[key] {
		ids = append(ids, e.ID)
	}
	return ids
}

func ack(t testing.TB, client rueidis.Client, key, group string, ids ...string) {
	t.Helper()
	if len(ids) == 0 {
		return
	}
	if err := client.Do(context.Background(), client.B().Xack().Key(key).Group(group).Id(ids...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func firstID(t testing.TB, client rueidis.Client, key string) string {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().Xrange().Key(key).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil || len(res) == 0 {
		t.Fatalf("XRANGE %s: %v (%d entries)", key, err, len(res))
	}
	return res[0].ID
}

// hasXtrimAcked asks the server once whether it runs XTRIM ... ACKED (Redis 8.2+): on a
// missing key the command answers 0 where the option exists and a syntax error where not.
// It probes the command rather than reading a version (Valkey reports a frozen
// redis_version).
func hasXtrimAcked(t testing.TB, client rueidis.Client, key string) bool {
	t.Helper()
	err := client.Do(context.Background(), client.B().Xtrim().Key(key).Maxlen().Exact().Threshold("0").Acked().Build()).Error()
	switch {
	case err == nil:
		return true
	case strings.Contains(strings.ToLower(err.Error()), "syntax"):
		return false
	}
	t.Fatalf("probing XTRIM ... ACKED: %v", err)
	return false
}

// trimStreamIDs returns the ids of every entry of key, in order.
func trimStreamIDs(t testing.TB, client rueidis.Client, key string) []string {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().Xrange().Key(key).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", key, err)
	}
	ids := make([]string, len(res))
	for i, e := range res {
		ids[i] = e.ID
	}
	return ids
}

// TestSafeTrim: safe trimming never removes an entry some group has not received or not
// acknowledged. Where the server runs XTRIM ... ACKED (Redis 8.2+) the trimmer uses it, and
// the server must also remove every entry all groups have acknowledged, wherever it sits in
// the stream; elsewhere trim_safe.lua trims up to the oldest entry a group still needs.
func TestSafeTrim(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	acked := hasXtrimAcked(t, client, topic+":probe")
	t.Logf("XTRIM ... ACKED supported: %v", acked)
	cfg := fastConfig()
	cfg.Trim.MaxLen = 10
	tr, err := stream.NewTrimmer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	trim := func() int64 {
		t.Helper()
		n, err := tr.Trim(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// expect checks the stream holds exactly want, in order.
	expect := func(step string, want []string) {
		t.Helper()
		got := trimStreamIDs(t, client, topic)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: the stream holds %d entries %v..., want %d entries %v...", step, len(got), trimHead(got), len(want), trimHead(want))
		}
	}
	if n := trim(); n != 0 {
		t.Fatalf("trim of a missing stream removed %d", n)
	}
	ids := xadd(t, client, topic, 100)
	for _, g := range []string{"fast", "slow"} {
		if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group(g).Id("0").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// The slow group has received nothing: nothing may go.
	ack(t, client, topic, "fast", readGroup(t, client, topic, "fast", 100)...)
	if n := trim(); n != 0 {
		t.Fatalf("removed %d entries the slow group never received", n)
	}
	expect("slow group received nothing", ids)
	// The slow group received 40 and acknowledged 30 of them, leaving ids[20..29] pending.
	got := readGroup(t, client, topic, "slow", 40)
	ack(t, client, topic, "slow", got[:20]...)
	ack(t, client, topic, "slow", got[30:]...)
	n := trim()
	if acked {
		// Every entry both groups acknowledged goes (ids[0..19] and ids[30..39]); the
		// pending ids[20..29] and the undelivered ids[40..] stay.
		if n != 30 {
			t.Fatalf("ACKED: removed %d, want 30 (every entry acknowledged by both groups)", n)
		}
		expect("ACKED, ids[20..29] pending", append(append([]string(nil), ids[20:30]...), ids[40:]...))
	} else {
		if n != 20 {
			t.Fatalf("removed %d, want 20 (up to the oldest pending entry)", n)
		}
		expect("ids[20..29] pending", ids[20:])
	}
	// Once acknowledged, ids[20..29] may go too; what the slow group has not received stays.
	ack(t, client, topic, "slow", got[20:30]...)
	n = trim()
	if acked {
		if n != 10 {
			t.Fatalf("ACKED: removed %d, want 10 (the entries acknowledged last)", n)
		}
		expect("ACKED, all delivered entries acknowledged", ids[40:])
	} else {
		if n != 19 {
			t.Fatalf("removed %d, want 19 (up to the last delivered entry)", n)
		}
		expect("all delivered entries acknowledged", ids[39:])
	}
	// When every group is done, the stream goes down to maxlen: the newest 10 entries.
	ack(t, client, topic, "slow", readGroup(t, client, topic, "slow", 100)...)
	trim()
	expect("every group done", ids[90:])
	if n := trim(); n != 0 {
		t.Fatalf("second trim removed %d", n)
	}
}

// trimHead returns the first few ids of a list, for messages.
func trimHead(ids []string) []string { return ids[:min(len(ids), 5)] }

func TestSafeTrimChunks(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Trim.MaxLen = 5
	tr, _ := stream.NewTrimmer(client, cfg)
	// More than one script call's worth (5000) of entries, no groups: a plain trim to maxlen.
	const n = 12000
	cmds := make(rueidis.Commands, 0, n)
	for i := 0; i < n; i++ {
		cmds = append(cmds, client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("body", "x").Build())
	}
	for _, r := range client.DoMulti(context.Background(), cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tr.Trim(context.Background(), topic)
	if err != nil || got != n-5 {
		t.Fatalf("Trim = %d, %v; want %d", got, err, n-5)
	}
}

// TestSafeTrimRace: a fast group races ahead while a slow group lags and a trimmer runs in a
// loop with a tiny maxlen; the slow group still receives every entry.
func TestSafeTrimRace(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Trim.MaxLen = 5
	tr, _ := stream.NewTrimmer(client, cfg)
	const total = 2000
	for _, g := range []string{"fast", "slow"} {
		if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group(g).Id("0").Mkstream().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stopTrim := make(chan struct{})
	var trimmed int64
	wg.Add(3)
	go func() { // producer
		defer wg.Done()
		xadd(t, client, topic, total)
	}()
	go func() { // fast group
		defer wg.Done()
		for seen := 0; seen < total; {
			ids := readGroup(t, client, topic, "fast", 100)
			ack(t, client, topic, "fast", ids...)
			seen += len(ids)
		}
	}()
	go func() { // trimmer
		defer wg.Done()
		for {
			select {
			case <-stopTrim:
				return
			default:
			}
			n, err := tr.Trim(ctx, topic)
			if err != nil {
				t.Error(err)
				return
			}
			trimmed += n
			time.Sleep(time.Millisecond)
		}
	}()
	// The slow group reads a little, slowly, acknowledging only half of each batch at first.
	seen := map[string]bool{}
	var held []string
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < total {
		if time.Now().After(deadline) {
			close(stopTrim)
			wg.Wait()
			t.Fatalf("the slow group received %d of %d entries: some were trimmed before delivery", len(seen), total)
		}
		ids := readGroup(t, client, topic, "slow", 7)
		for _, id := range ids {
			seen[id] = true
		}
		half := len(ids) / 2
		ack(t, client, topic, "slow", ids[:half]...)
		held = append(held, ids[half:]...)
		if len(held) > 50 {
			ack(t, client, topic, "slow", held...)
			held = held[:0]
		}
		time.Sleep(time.Millisecond)
	}
	ack(t, client, topic, "slow", held...)
	close(stopTrim)
	wg.Wait()
	if trimmed == 0 {
		t.Error("the trimmer never removed anything: the race was not exercised")
	}
	t.Logf("slow group received all %d entries; %d trimmed meanwhile", len(seen), trimmed)
}

// TestMaxLenTrimReportsPending: the seed's MAXLEN mode deletes pending entries; the scan
// reports them through OnTrimmedWhilePending instead of dropping them silently.
func TestMaxLenTrimReportsPending(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	cfg := fastConfig()
	cfg.Trim = stream.TrimConfig{MaxLen: 2, Interval: 3600_000 * time.Millisecond, Mode: stream.TrimMaxLen}
	var mu sync.Mutex
	var reported []string
	cfg.OnTrimmedWhilePending = func(tp, group string, ids []string) {
		mu.Lock()
		defer mu.Unlock()
		if tp == topic && group == "g" {
			reported = append(reported, ids...)
		}
	}
	if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ids := xadd(t, client, topic, 5)
	readGroup(t, client, topic, "g", 5) // all pending for consumer "c", who then dies
	tr, _ := stream.NewTrimmer(client, cfg)
	if n, err := tr.Trim(ctx, topic); err != nil || n != 3 {
		t.Fatalf("Trim = %d, %v; want 3", n, err)
	}
	handled := make(chan string, 5)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error { handled <- m.ID; return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	eventually(t, 10*time.Second, "the report", func() bool { mu.Lock(); defer mu.Unlock(); return len(reported) == 3 })
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ids[:3] {
		if reported[i] != id {
			t.Errorf("reported %v, want %v", reported, ids[:3])
			break
		}
	}
	eventually(t, 10*time.Second, "nothing pending", func() bool { return pending(t, client, topic, "g") == 0 })
}

// TestTrimMaxAge: Trim.MaxAge removes entries older than the bound (by their ids and the
// server clock); safe mode still keeps what the group has not acknowledged; maxlen mode
// removes them all: through trim_safe.lua before Redis 8.2, XTRIM ... ACKED from 8.2 on.
func TestTrimMaxAge(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for _, tc := range []struct {
		name          string
		mode          stream.TrimMode
		read, acked   int64
		wantRemoved   int64
		wantOldestAge bool // the oldest kept entry is an old one
	}{
		{"safe, all acknowledged", stream.TrimSafe, 110, 110, 100, false},
		{"safe, 40 of 100 old acknowledged", stream.TrimSafe, 50, 40, 40, true},
		{"maxlen mode ignores groups", stream.TrimMaxLen, 50, 40, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := newTopic(t)
			for i := range 100 { // 2 h old
				id := fmt.Sprintf("%d-%d", old, i)
				if err := client.Do(ctx, client.B().Xadd().Key(topic).Id(id).FieldValue().FieldValue("body", "old").Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			xadd(t, client, topic, 10) // new
			if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			ids := readGroup(t, client, topic, "g", tc.read)
			if err := client.Do(ctx, client.B().Xack().Key(topic).Group("g").Id(ids[:tc.acked]...).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			cfg := fastConfig()
			cfg.Trim = stream.TrimConfig{MaxLen: 1000, MaxAge: time.Hour, Mode: tc.mode}
			tr, err := stream.NewTrimmer(client, cfg)
			if err != nil {
				t.Fatal(err)
			}
			n, err := tr.Trim(ctx, topic)
			if err != nil || n != tc.wantRemoved {
				t.Fatalf("Trim = %d, %v; want %d removed", n, err, tc.wantRemoved)
			}
			if got := xlen(t, client, topic); got != 110-tc.wantRemoved {
				t.Errorf("%d entries left, want %d", got, 110-tc.wantRemoved)
			}
			first, err := client.Do(ctx, client.B().Xrange().Key(topic).Start("-").End("+").Count(1).Build()).AsXRange()
			if err != nil || len(first) != 1 {
				t.Fatal(err)
			}
			if isOld := strings.HasPrefix(first[0].ID, fmt.Sprint(old)+"-"); isOld != tc.wantOldestAge {
				t.Errorf("oldest kept entry %s: old = %v, want %v", first[0].ID, isOld, tc.wantOldestAge)
			}
		})
	}
	t.Run("12000 old entries, in chunks", func(t *testing.T) {
		topic := newTopic(t)
		cmds := make(rueidis.Commands, 0, 12000)
		for i := range 12000 {
			cmds = append(cmds, client.B().Xadd().Key(topic).Id(fmt.Sprintf("%d-%d", old, i)).FieldValue().FieldValue("body", "old").Build())
		}
		for _, r := range client.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
		}
		xadd(t, client, topic, 3)
		cfg := fastConfig()
		cfg.Trim = stream.TrimConfig{MaxAge: time.Hour}
		tr, _ := stream.NewTrimmer(client, cfg)
		if n, err := tr.Trim(ctx, topic); err != nil || n != 12000 {
			t.Fatalf("Trim = %d, %v; want 12000 (a stream without groups, over 3 chunks)", n, err)
		}
	})
	if err := (stream.Config{Trim: stream.TrimConfig{MaxAge: -time.Second}}).Validate(); err == nil || !strings.Contains(err.Error(), "trim.max-age-ms") {
		t.Errorf("negative trim.max-age-ms: Validate = %v", err)
	}
}
