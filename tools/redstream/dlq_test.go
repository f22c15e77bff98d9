package main

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

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// TestDLQCommand drives `redstream dlq` against a real redis-server: two messages are
// dead-lettered, listed, one replayed by id, the other purged.
func TestDLQCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond, EnvIsolation: true, Env: "prod"}
	c, _ := stream.NewConsumer(client, cfg)
	if err := stream.Register(c, stream.Handler[demoOrder]{Topic: "orders", Group: "g", NoRetry: true,
		Handle: func(context.Context, *stream.Message[demoOrder]) error { return errors.New("broken") }}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, _ := stream.NewProducer(client, cfg)
	for i := int64(1); i <= 2; i++ {
		if _, err := p.Send(ctx, "orders", stream.NewMessage(demoOrder{ID: i})); err != nil {
			t.Fatal(err)
		}
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := dls.Len(ctx, "orders"); n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letters")
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	letters, _ := dls.List(ctx, "orders", stream.ListOptions{})

	dlqRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"dlq"}, append(args, "--redis", srv.Addr, "--topic", "orders", "--env", "prod")...), &out)
		return out.String(), err
	}
	out, err := dlqRun("list")
	if err != nil || !strings.Contains(out, "{orders_prod}:dlq: 2 dead letters") || !strings.Contains(out, `"orderId":2`) || !strings.Contains(out, "error=broken") {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, err = dlqRun("replay", "--id", letters[0].ID)
	if err != nil || !strings.Contains(out, "replayed "+letters[0].ID) {
		t.Errorf("replay: %v\n%s", err, out)
	}
	if _, err := dlqRun("replay"); err == nil {
		t.Error("replay without --id or --all: got nil error")
	}
	if _, err := dlqRun("purge"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("purge without --yes = %v", err)
	}
	out, err = dlqRun("purge", "--yes")
	if err != nil || !strings.Contains(out, "purged 1 dead letters") {
		t.Errorf("purge: %v\n%s", err, out)
	}
	if n := xlenOf(t, client, "orders_prod"); n != 3 {
		t.Errorf("topic length %d, want 2 + 1 replayed", n)
	}
	if _, err := dlqRun("bogus"); err == nil {
		t.Error("unknown subcommand: got nil error")
	}
	var out2 bytes.Buffer
	if err := run(ctx, []string{"dlq", "list", "--redis", srv.Addr}, &out2); err == nil {
		t.Error("missing --topic: got nil error")
	}
}

// TestDLQReplayAllCommand: `dlq replay --all` over 50 dead letters, while a consumer whose
// handler still fails turns the replays back into dead letters, replays exactly those 50 and
// returns; --limit stops earlier.
func TestDLQReplayAllCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	var cfg stream.Config // the defaults
	var calls atomic.Int64
	c, _ := stream.NewConsumer(client, cfg)
	if err := stream.Register(c, stream.Handler[demoOrder]{Topic: "orders", Group: "g", NoRetry: true,
		Handle: func(context.Context, *stream.Message[demoOrder]) error {
			calls.Add(1)
			return errors.New("still broken")
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	p, _ := stream.NewProducer(client, cfg)
	const n = 50
	for i := int64(1); i <= n; i++ {
		if _, err := p.Send(ctx, "orders", stream.NewMessage(demoOrder{ID: i})); err != nil {
			t.Fatal(err)
		}
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	settled := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if l, _ := dls.Len(ctx, "orders"); l == n && calls.Load() == want {
				return
			}
			if time.Now().After(deadline) {
				l, _ := dls.Len(ctx, "orders")
				t.Fatalf("%d dead letters and %d handler calls, want %d and %d", l, calls.Load(), n, want)
			}
		}
	}
	settled(n)
	replay := func(args ...string) string {
		t.Helper()
		done := make(chan struct{})
		var out bytes.Buffer
		var err error
		go func() {
			defer close(done)
			err = run(ctx, append([]string{"dlq", "replay", "--redis", srv.Addr, "--topic", "orders"}, args...), &out)
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("dlq replay --all did not return")
		}
		if err != nil {
			t.Fatalf("dlq replay %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	if out := replay("--all"); !strings.Contains(out, fmt.Sprintf("replayed %d dead letters onto orders\n", n)) {
		t.Errorf("replay --all printed %q, want %d replayed", out, n)
	}
	settled(2 * n) // each replay failed once more and is a dead letter again
	if out := replay("--all", "--limit", "7"); !strings.Contains(out, "replayed 7 dead letters") {
		t.Errorf("replay --all --limit 7 printed %q", out)
	}
	for deadline := time.Now().Add(20 * time.Second); calls.Load() != 2*n+7; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d handler calls, want %d", calls.Load(), 2*n+7)
		}
	}
}

func xlenOf(t *testing.T, client rueidis.Client, key string) int64 {
	t.Helper()
	n, err := client.Do(context.Background(), client.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deadLetter fails every message of topic through a real consumer until n dead letters
// exist, and returns them.
func deadLetter(t *testing.T, client rueidis.Client, cfg stream.Config, topic string, n int64) []stream.DeadLetter {
	t.Helper()
	ctx := context.Background()
	cfg.BlockTimeout = 50 * time.Millisecond
	c, err := stream.NewConsumer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Register(c, stream.Handler[demoOrder]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(context.Context, *stream.Message[demoOrder]) error { return errors.New("broken: " + topic) }}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	p, _ := stream.NewProducer(client, cfg)
	for i := int64(1); i <= n; i++ {
		if _, err := p.Send(ctx, topic, stream.NewMessage(demoOrder{ID: i})); err != nil {
			t.Fatal(err)
		}
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if l, _ := dls.Len(ctx, topic); l == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d dead letters on %s", n, topic)
		}
	}
	letters, err := dls.List(ctx, topic, stream.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return letters
}

func decodeStrict(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, out)
	}
}

// testDLQJSON drives dlq topics/list/delete/replay/purge --json on the server or cluster
// at addrs (extra: --cluster), and checks the documents against Redis.
func testDLQJSON(t *testing.T, client rueidis.Client, prefix string, extra ...string) {
	cfg := stream.Config{}
	a, b := prefix+"alpha", "{"+prefix+"shop}beta"
	la := deadLetter(t, client, cfg, a, 3)
	deadLetter(t, client, cfg, b, 1)
	dlqRun := func(args ...string) string {
		t.Helper()
		out, err := runCmd(t, append(append([]string{"dlq"}, args...), extra...)...)
		if err != nil {
			t.Fatalf("dlq %v: %v\n%s", args, err, out)
		}
		return out
	}

	var topics dlqTopicsJSON
	decodeStrict(t, dlqRun("topics", "--json", "--match", "*"+prefix+"*"), &topics)
	got := map[string]dlqTopicJSON{}
	for _, tp := range topics.Topics {
		got[tp.Topic] = tp
	}
	if len(got) != 2 || got[a].DeadLetters != 3 || got[a].DeadLetterStream != "{"+a+"}:dlq" || got[a].OldestID != la[0].ID || got[a].NewestID != la[2].ID ||
		got[b].DeadLetters != 1 || got[b].DeadLetterStream != b+":dlq" || got[b].Stream != b || !topics.Scan.Complete {
		t.Errorf("topics %+v", topics)
	}
	if out := dlqRun("topics", "--match", "*"+prefix+"*"); !strings.Contains(out, a) || !strings.Contains(out, "{"+a+"}:dlq") {
		t.Errorf("topics text:\n%s", out)
	}

	var list dlqListJSON
	decodeStrict(t, dlqRun("list", "--json", "--topic", a, "--count", "2"), &list)
	if list.Total != 3 || len(list.DeadLetters) != 2 || list.Stream != a {
		t.Fatalf("list %+v", list)
	}
	d0 := list.DeadLetters[0]
	var body demoOrder
	if err := json.Unmarshal(d0.Body, &body); err != nil || body.ID != 1 || d0.ID != la[0].ID || d0.Group != "g" || d0.Error != "broken: "+a ||
		d0.Deliveries != 1 || d0.OriginalID == "" || d0.Time == "" || d0.Fields["body"] == "" {
		t.Errorf("dead letter %+v (body %v)", d0, err)
	}
	if _, err := time.Parse(time.RFC3339, d0.Time); err != nil {
		t.Errorf("time %q: %v", d0.Time, err)
	}

	var del dlqDeleteJSON
	decodeStrict(t, dlqRun("delete", "--json", "--topic", a, "--id", la[1].ID+", 0-1"), &del)
	if del.Deleted != 1 || len(del.Requested) != 2 {
		t.Errorf("delete %+v", del)
	}
	if n := xlenOf(t, client, "{"+a+"}:dlq"); n != 2 {
		t.Errorf("%d dead letters after delete, want 2", n)
	}
	// Deleting again matches nothing: the count is printed and the command fails.
	if out, err := runCmd(t, append([]string{"dlq", "delete", "--topic", a, "--id", la[1].ID}, extra...)...); err == nil ||
		!strings.Contains(out, "deleted 0 of 1") || !strings.Contains(err.Error(), "no dead letter of "+a+" has the id "+la[1].ID) {
		t.Errorf("deleting again: err %v, out %s", err, out)
	}

	var rep dlqReplayJSON
	decodeStrict(t, dlqRun("replay", "--json", "--topic", a, "--id", la[0].ID), &rep)
	if rep.Replayed != 1 || len(rep.Entries) != 1 || rep.Entries[0].ID != la[0].ID || rep.Entries[0].NewID == "" || rep.Error != "" {
		t.Errorf("replay %+v", rep)
	}
	out, err := runCmd(t, append([]string{"dlq", "replay", "--json", "--topic", a, "--id", la[0].ID}, extra...)...)
	if err == nil {
		t.Error("replaying a replayed dead letter: no error")
	}
	rep = dlqReplayJSON{}
	decodeStrict(t, out, &rep)
	if rep.Replayed != 0 || rep.Error == "" {
		t.Errorf("failed replay document %+v", rep)
	}
	var purge dlqPurgeJSON
	decodeStrict(t, dlqRun("purge", "--json", "--yes", "--topic", b), &purge)
	if purge.Purged != 1 || purge.DeadLetterStream != b+":dlq" {
		t.Errorf("purge %+v", purge)
	}
	topics = dlqTopicsJSON{}
	decodeStrict(t, dlqRun("topics", "--json", "--match", "*"+prefix+"*"), &topics)
	if len(topics.Topics) != 1 || topics.Topics[0].Topic != a || topics.Topics[0].DeadLetters != 1 {
		t.Errorf("topics after purge (an empty dead-letter stream is not listed): %+v", topics.Topics)
	}
}

func TestDLQJSON(t *testing.T) {
	srv := redistest.NewServer(t)
	testDLQJSON(t, redistest.NewClient(t, srv.Addr), "", "--redis", srv.Addr)
}

func TestDLQJSONCluster(t *testing.T) {
	seeds := redistest.ClusterAddrs(t)
	testDLQJSON(t, redistest.ClusterClient(t), "cli-dlq-", "--redis", strings.Join(seeds, ","), "--cluster")
}

// TestDLQHelp: --help of dlq and of each subcommand lists the flags with their defaults.
func TestDLQHelp(t *testing.T) {
	for _, args := range [][]string{{"dlq", "--help"}, {"dlq", "-h"}, {"dlq", "list", "--help"}, {"dlq", "topics", "-h"}} {
		out, err := runCmd(t, args...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		for _, want := range []string{"-topic string", "-redis string", `(default "127.0.0.1:6379")`, "-timeout duration", "(default 30s)",
			"-tls-ca string", "-user string", "-password string", "-db int", "-url string", "-json", "-scan-limit int"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, out)
			}
		}
	}
	if out, err := runCmd(t, "dlq"); err == nil || !strings.Contains(out, "-topic string") {
		t.Errorf("dlq without a subcommand: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "dlq", "delete", "--topic", "t"); err == nil || !strings.Contains(err.Error(), "--id") {
		t.Errorf("delete without --id: %v", err)
	}
}

// TestDLQBadInput: out-of-range flags are errors naming the flag, before any connection.
func TestDLQBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--topic", "t", "--count", "0"}, "--count 0"},
		{[]string{"list", "--topic", "t", "--count", "1000000000"}, "--count"},
		{[]string{"replay", "--topic", "t", "--all", "--limit", "-1"}, "--limit -1"},
		{[]string{"replay", "--topic", "t", "--all", "--id", "1-0"}, "not both"},
		{[]string{"topics", "--scan-limit", "0"}, "--scan-limit"},
		{[]string{"list", "--topic", "a}b"}, "'}'"},
		{[]string{"list", "--topic", "t", "stray"}, "unexpected argument"},
		{[]string{"list", "--topic", "t", "--url", "redis://h:1?x=1"}, "unknown query parameter"},
	} {
		_, err := runCmd(t, append([]string{"dlq"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dlq %v: err = %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestDLQCommandPartition lists and replays the dead letters of one partition of a
// partitioned topic (--partitions, --partition) on a real redis-server.
func TestDLQCommandPartition(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond, EnvIsolation: true, Env: "prod",
		Partitions: map[string]int{"orders": 4}}
	c, _ := stream.NewConsumer(client, cfg)
	if err := stream.Register(c, stream.Handler[demoOrder]{Topic: "orders", Group: "g", NoRetry: true,
		Handle: func(context.Context, *stream.Message[demoOrder]) error { return errors.New("broken") }}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, _ := stream.NewProducer(client, cfg)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for i, k := range keys {
		if _, err := p.Send(ctx, "orders", stream.Message[demoOrder]{Key: k, Body: demoOrder{ID: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	dls, _ := stream.NewDeadLetters(client, cfg)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := dls.Len(ctx, "orders"); n == int64(len(keys)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letters")
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	part := streamwire.PartitionOf("a", 4)
	want := 0
	for _, k := range keys {
		if streamwire.PartitionOf(k, 4) == part {
			want++
		}
	}
	streams, _ := stream.PartitionStreams(cfg, "orders")
	dlqRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"dlq"}, append(args, "--redis", srv.Addr, "--topic", "orders", "--env", "prod",
			"--partitions", "4", "--partition", strconv.Itoa(part))...), &out)
		return out.String(), err
	}
	out, err := dlqRun("list")
	if head := fmt.Sprintf("%s: %d dead letters", streamwire.DeadLetterStreamName(streams[part]), want); err != nil || !strings.Contains(out, head) {
		t.Fatalf("dlq list = %q, %v; want %q", out, err, head)
	}
	out, err = dlqRun("replay", "--all")
	if err != nil || !strings.Contains(out, fmt.Sprintf("replayed %d", want)) {
		t.Fatalf("dlq replay --all = %q, %v", out, err)
	}
	if n, _ := dls.Len(ctx, "orders"); n != int64(len(keys)-want) {
		t.Errorf("%d dead letters left, want %d", n, len(keys)-want)
	}
	var buf bytes.Buffer
	if err := run(ctx, []string{"dlq", "list", "--redis", srv.Addr, "--topic", "orders", "--partitions", "4", "--partition", "4"}, &buf); err == nil || !strings.Contains(err.Error(), "--partition 4") {
		t.Errorf("--partition 4 of 4 = %v, want an error", err)
	}
}
