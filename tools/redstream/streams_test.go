package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// do runs commands on client, failing the test on an error.
func do(t *testing.T, client rueidis.Client, cmds ...rueidis.Completed) {
	t.Helper()
	for _, r := range client.DoMulti(context.Background(), cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// streamsFixture writes, through client: stream orders (3 entries) with group g1 (2 read
// by consumer c1, lag 1) and group g2 (created at $, lag 0), its dead-letter stream (1
// entry), payments_prod (env prod), and a string key.
func streamsFixture(t *testing.T, client rueidis.Client, prefix string) {
	t.Helper()
	orders := prefix + "orders"
	b := client.B()
	for i := 0; i < 3; i++ {
		do(t, client, b.Xadd().Key(orders).Id("*").FieldValue().FieldValue("body", fmt.Sprintf(`{"n":%d}`, i)).Build())
	}
	do(t, client,
		b.XgroupCreate().Key(orders).Group("g1").Id("0").Build(),
		b.XgroupCreate().Key(orders).Group("g2").Id("$").Build(),
		b.Xreadgroup().Group("g1", "c1").Count(2).Streams().Key(orders).Id(">").Build(),
		b.Xadd().Key("{"+orders+"}:dlq").Id("*").FieldValue().FieldValue("body", "{}").FieldValue("dl_error", "broken").Build(),
		b.Xadd().Key(prefix+"payments_prod").Id("*").FieldValue().FieldValue("body", "{}").Build(),
		b.Set().Key(prefix+"not-a-stream").Value("x").Build())
}

func parseStreams(t *testing.T, out string) streamsJSON {
	t.Helper()
	var doc streamsJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("streams --json: %v\n%s", err, out)
	}
	return doc
}

func findTopic(doc streamsJSON, topic string) *topicJSON {
	for i := range doc.Topics {
		if doc.Topics[i].Topic == topic {
			return &doc.Topics[i]
		}
	}
	return nil
}

// checkOrders checks the fixture's orders topic as streams reports it.
func checkOrders(t *testing.T, tp *topicJSON, stream string) {
	t.Helper()
	if tp == nil {
		t.Fatal("orders not reported")
	}
	if tp.Stream != stream || tp.Length != 3 || tp.DeadLetters != 1 || tp.FirstID == "" || tp.LastID == "" || tp.LastID != tp.LastGeneratedID || tp.EntriesAdded != 3 {
		t.Errorf("topic %+v", *tp)
	}
	if len(tp.Groups) != 2 {
		t.Fatalf("groups %+v", tp.Groups)
	}
	g1, g2 := tp.Groups[0], tp.Groups[1]
	if g1.Group != "g1" || g1.Pending != 2 || g1.Lag != 1 || !g1.LagKnown || g1.Consumers != 1 || g1.EntriesRead != 2 ||
		len(g1.ConsumerList) != 1 || g1.ConsumerList[0].Consumer != "c1" || g1.ConsumerList[0].Pending != 2 || g1.ConsumerList[0].IdleMS < 0 {
		t.Errorf("g1 %+v", g1)
	}
	if g2.Group != "g2" || g2.Pending != 0 || g2.Lag != 0 || !g2.LagKnown || g2.LastDeliveredID != tp.LastID || len(g2.ConsumerList) != 0 {
		t.Errorf("g2 %+v", g2)
	}
}

// TestStreamsCommand: `redstream streams` against a real redis-server, by scan and by
// --topic, in JSON and text.
func TestStreamsCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	streamsFixture(t, client, "")
	// Two messages of orders scheduled for later (their schedule, as WithDelay writes it).
	sched, _ := streamwire.DelayedKeys("orders")
	if err := client.Do(context.Background(), client.B().Zadd().Key(sched).ScoreMember().ScoreMember(1e15, "a").ScoreMember(1e15, "b").Build()).Error(); err != nil {
		t.Fatal(err)
	}

	out, err := runCmd(t, "streams", "--redis", srv.Addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	doc := parseStreams(t, out)
	if doc.Scan == nil || !doc.Scan.Complete || doc.Scan.Nodes != 1 || doc.Scan.Keys != 3 {
		t.Errorf("scan %+v", doc.Scan)
	}
	if len(doc.Topics) != 2 || findTopic(doc, "payments_prod") == nil {
		t.Errorf("topics %+v, want orders and payments_prod (no dead-letter stream, no string)", doc.Topics)
	}
	checkOrders(t, findTopic(doc, "orders"), "orders")
	if o := findTopic(doc, "orders"); o == nil || o.Scheduled != 2 {
		t.Errorf("orders: scheduled %+v, want 2", o)
	}

	out, err = runCmd(t, "streams", "--redis", srv.Addr, "--json", "--env", "prod")
	if doc := parseStreams(t, out); err != nil || len(doc.Topics) != 1 || doc.Topics[0].Topic != "payments" || doc.Topics[0].Stream != "payments_prod" {
		t.Errorf("--env prod: %v %+v", err, doc.Topics)
	}
	out, err = runCmd(t, "streams", "--redis", srv.Addr, "--json", "--topic", "orders", "--no-consumers")
	doc = parseStreams(t, out)
	if err != nil || doc.Scan != nil || len(doc.Topics) != 1 || len(doc.Topics[0].Groups) != 2 || len(doc.Topics[0].Groups[0].ConsumerList) != 0 {
		t.Errorf("--topic orders --no-consumers: %v\n%s", err, out)
	}
	out, err = runCmd(t, "streams", "--redis", srv.Addr, "--match", "pay*", "--json")
	if doc := parseStreams(t, out); err != nil || len(doc.Topics) != 1 {
		t.Errorf("--match pay*: %v %+v", err, doc.Topics)
	}

	out, err = runCmd(t, "streams", "--redis", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orders (stream orders): length 3", "dead letters 1, scheduled 2", "g1", "consumer c1", "pending 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if _, err := runCmd(t, "streams", "--redis", srv.Addr, "--topic", "nope"); err == nil || !strings.Contains(err.Error(), "no such stream") {
		t.Errorf("missing topic: err = %v", err)
	}
	if _, err := runCmd(t, "streams", "--redis", srv.Addr, "--topic", "not-a-stream"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("topic of the wrong type: err = %v", err)
	}
	for _, args := range [][]string{{"--scan-limit", "0"}, {"--topic", "a}b"}, {"extra"}, {"--bogus"}} {
		if _, err := runCmd(t, append([]string{"streams", "--redis", srv.Addr}, args...)...); err == nil {
			t.Errorf("streams %v: no error", args)
		}
	}
	if out, err := runCmd(t, "streams", "--help"); err != nil || !strings.Contains(out, "-scan-limit int") || !strings.Contains(out, `(default "127.0.0.1:6379")`) {
		t.Errorf("streams --help: %v\n%s", err, out)
	}
}

// TestStreamsScanLimit: a scan stopped by --scan-limit says so.
func TestStreamsScanLimit(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	cmds := make(rueidis.Commands, 0, 3000)
	for i := 0; i < 3000; i++ {
		cmds = append(cmds, client.B().Xadd().Key(fmt.Sprintf("s%d", i)).Id("*").FieldValue().FieldValue("f", "v").Build())
	}
	do(t, client, cmds...)
	out, err := runCmd(t, "streams", "--redis", srv.Addr, "--scan-limit", "1000", "--no-consumers", "--json")
	doc := parseStreams(t, out)
	if err != nil || doc.Scan.Complete || doc.Scan.Keys == 0 || doc.Scan.Keys >= 3000 {
		t.Errorf("--scan-limit 1000 over 3000 streams: %v, scan %+v", err, doc.Scan)
	}
	out, err = runCmd(t, "streams", "--redis", srv.Addr, "--no-consumers", "--json")
	if doc := parseStreams(t, out); err != nil || !doc.Scan.Complete || doc.Scan.Keys != 3000 || len(doc.Topics) != 3000 {
		t.Errorf("full scan: %v, scan %+v, %d topics", err, doc.Scan, len(doc.Topics))
	}
	out, _ = runCmd(t, "streams", "--redis", srv.Addr, "--scan-limit", "1000", "--no-consumers")
	if !strings.Contains(out, "the scan stopped at --scan-limit") {
		t.Errorf("text output does not say the scan stopped:\n%s", out[max(0, len(out)-300):])
	}
}

// TestStreamsCluster: on the real 3-master cluster, the scan finds the streams of every
// master, and --topic reads any of them.
func TestStreamsCluster(t *testing.T) {
	seeds := redistest.ClusterAddrs(t)
	client := redistest.ClusterClient(t)
	prefix := "cli-streams-"
	streamsFixture(t, client, prefix)
	// Topics spread over the slots, so every master holds some.
	masters := map[string]bool{}
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("%sspread%d", prefix, i)
		do(t, client, client.B().Xadd().Key(k).Id("*").FieldValue().FieldValue("f", "v").Build())
	}
	for addr, node := range client.Nodes() {
		n, err := node.Do(context.Background(), node.B().Dbsize().Build()).AsInt64()
		if err == nil && n > 0 {
			masters[addr] = true
		}
	}
	if len(masters) < 3 {
		t.Fatalf("keys on %d nodes, want 3", len(masters))
	}
	out, err := runCmd(t, "streams", "--redis", strings.Join(seeds, ","), "--cluster", "--match", prefix+"*", "--json")
	if err != nil {
		t.Fatal(err)
	}
	doc := parseStreams(t, out)
	if doc.Scan.Nodes != 3 || !doc.Scan.Complete || len(doc.Topics) != 32 {
		t.Errorf("scan %+v, %d topics, want 3 nodes and 32 topics", doc.Scan, len(doc.Topics))
	}
	checkOrders(t, findTopic(doc, prefix+"orders"), prefix+"orders")
	out, err = runCmd(t, "streams", "--redis", seeds[0], "--cluster", "--topic", prefix+"orders,"+prefix+"spread7", "--json")
	if doc := parseStreams(t, out); err != nil || len(doc.Topics) != 2 {
		t.Errorf("--topic on the cluster: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "streams", "--redis", seeds[0], "--cluster", "--match", prefix+"orders"); err != nil || !strings.Contains(out, "the cluster at") {
		t.Errorf("text on the cluster: %v\n%s", err, out)
	}
}

// TestHostileNames: keys, groups, consumers and dead-letter errors with terminal escapes
// and newlines are quoted in text output and exact in JSON.
func TestHostileNames(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	evil := "evil\x1b[2J\nfake line"
	b := client.B()
	do(t, client,
		b.Xadd().Key(evil).Id("*").FieldValue().FieldValue("body", "{}").Build(),
		b.XgroupCreate().Key(evil).Group(evil).Id("0").Build(),
		b.Xreadgroup().Group(evil, evil).Count(1).Streams().Key(evil).Id(">").Build(),
		b.Xadd().Key("{"+evil+"}:dlq").Id("*").FieldValue().FieldValue("body", "\x1b]0;title\x07").FieldValue("dl_error", evil).Build())
	for _, args := range [][]string{{"streams"}, {"dlq", "topics"}, {"dlq", "list", "--topic", evil}} {
		out, err := runCmd(t, append(args, "--redis", srv.Addr)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nfake line") {
			t.Errorf("%v printed raw control characters:\n%q", args, out)
		}
	}
	out, err := runCmd(t, "streams", "--redis", srv.Addr, "--json")
	doc := parseStreams(t, out)
	if err != nil || findTopic(doc, evil) == nil || doc.Topics[0].Groups[0].Group != evil || doc.Topics[0].Groups[0].ConsumerList[0].Consumer != evil {
		t.Errorf("JSON does not carry the exact names: %v\n%s", err, out)
	}
	var list dlqListJSON
	out, err = runCmd(t, "dlq", "list", "--json", "--redis", srv.Addr, "--topic", evil)
	decodeStrict(t, out, &list)
	if err != nil || len(list.DeadLetters) != 1 || list.DeadLetters[0].Error != evil || list.DeadLetters[0].BodyText == nil || *list.DeadLetters[0].BodyText != "\x1b]0;title\x07" {
		t.Errorf("dlq list --json: %v %+v", err, list)
	}
}
