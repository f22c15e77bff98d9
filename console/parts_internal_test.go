package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// TestStreamOf: partitions and priority levels name their topic; other streams do not.
func TestStreamOf(t *testing.T) {
	for _, tc := range []struct{ name, topic, part string }{
		{streamwire.PartitionName("orders", 2, 4), "orders", "p2"},
		{streamwire.PriorityName("orders", 3), "orders", "priority 3"},
		{streamwire.PriorityName("{shop}orders", 1), "{shop}orders", "priority 1"},
		{"orders", "", ""},
		{"{orders}:dlq", "", ""},
		{"{x:p1}", "", ""},
		{"{orders}:prio:", "", ""},
	} {
		topic, part, ok := streamOf(tc.name)
		if topic != tc.topic || part != tc.part || ok != (tc.topic != "") {
			t.Errorf("streamOf(%q) = %q, %q, %v; want %q, %q", tc.name, topic, part, ok, tc.topic, tc.part)
		}
	}
}

// TestFoldParts: a topic's partitions, and a topic's levels with its own stream as level 0,
// are folded under a row summing them, in part order; other streams stay as they are.
func TestFoldParts(t *testing.T) {
	s := func(name string, length, pending, lag int64) topicSummary {
		return topicSummary{Name: name, Exists: true, Length: length, Pending: pending, Lag: lag, Consumers: 1, Groups: 1}
	}
	in := []topicSummary{
		s("audit", 1, 0, 0),
		s("orders", 10, 1, 2),
		s(streamwire.PartitionName("pay", 1, 2), 5, 2, 7),
		s(streamwire.PartitionName("pay", 0, 2), 4, 1, -1),
		s(streamwire.PriorityName("orders", 2), 3, 0, 5),
		s(streamwire.PriorityName("orders", 1), 2, 1, 1),
	}
	var got []string
	for _, r := range foldParts(in) {
		line := r.Name
		if r.Folded > 0 {
			line = "sum " + r.Name
		}
		if r.Part != "" {
			line = "  " + r.Part
		}
		got = append(got, line)
	}
	want := "audit|sum orders|  priority 0|  priority 1|  priority 2|sum pay|  p0|  p1"
	if strings.Join(got, "|") != want {
		t.Fatalf("rows %q, want %q", strings.Join(got, "|"), want)
	}
	rows := foldParts(in)
	if o := rows[1]; o.Folded != 3 || o.Length != 15 || o.Pending != 2 || o.Lag != 5 || o.Consumers != 3 {
		t.Errorf("orders' sum: %+v", o)
	}
	if p := rows[5]; p.Folded != 2 || p.Length != 9 || p.Lag != -1 {
		t.Errorf("pay's sum: %+v (a part with an unknown lag makes the sum's unknown)", p)
	}
}

// FuzzStreamOf: any stream name (names come from the server's SCAN) is parsed without panic,
// and a name that is a part names a non-empty topic.
func FuzzStreamOf(f *testing.F) {
	for _, s := range []string{"orders", "{orders:p0:3}", "{orders}:prio:2", "{a}b:prio:1", "{}:prio:1", "{:p0:0}", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		topic, part, ok := streamOf(name)
		if ok && (topic == "" || part == "") {
			t.Fatalf("streamOf(%q) = %q, %q, true", name, topic, part)
		}
	})
}

// TestIdleConsumers: a consumer that has not tried to read for staleAfter is counted idle,
// one that just read is not, and a topic without groups has none.
func TestIdleConsumers(t *testing.T) {
	defer func(d time.Duration) { staleAfter = d }(staleAfter)
	staleAfter = time.Second
	ctx := context.Background()
	c := redistest.Client(t)
	topic, quiet := fmt.Sprintf("idle-%d", time.Now().UnixNano()), fmt.Sprintf("quiet-%d", time.Now().UnixNano())
	for _, cmd := range []rueidis.Completed{
		c.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("body", "{}").Build(),
		c.B().Xadd().Key(quiet).Id("*").FieldValue().FieldValue("body", "{}").Build(),
		c.B().XgroupCreate().Key(topic).Group("g").Id("0").Build(),
		c.B().Xreadgroup().Group("g", "stopped").Count(1).Streams().Key(topic).Id(">").Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(staleAfter + 500*time.Millisecond)
	if err := c.Do(ctx, c.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("body", "{}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Xreadgroup().Group("g", "alive").Count(1).Streams().Key(topic).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	con, err := New(Options{Client: c, Topics: []string{topic, quiet}})
	if err != nil {
		t.Fatal(err)
	}
	ss := con.summaries(ctx, []string{topic, quiet})
	if ss[0].Consumers != 2 || ss[0].Idle != 1 || ss[1].Idle != 0 {
		t.Fatalf("consumers %d, idle %d (want 2, 1); the topic without groups: idle %d", ss[0].Consumers, ss[0].Idle, ss[1].Idle)
	}
}
