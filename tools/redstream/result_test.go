package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestResultCommand drives `redstream result` against a real redis-server: a completed
// entry's record, one waited for, a dead-lettered one's, a missing one and bad flags.
func TestResultCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	cfg := stream.Config{BlockTimeout: 50 * time.Millisecond}
	c, err := stream.NewConsumer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	type job struct{ N int }
	if err := stream.Register(c, stream.Handler[job]{Topic: "jobs", Group: "workers", Results: &stream.ResultOptions{}, NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[job]) error {
			if m.Body.N < 0 {
				return errors.New("negative")
			}
			if m.Body.N == 2 {
				<-release
			}
			return m.SetResult(map[string]int{"square": m.Body.N * m.Body.N})
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := stream.NewProducer(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"result"}, append(args, "--redis", srv.Addr)...), &out)
		return out.String(), err
	}
	send := func(n int) string {
		id, err := p.Send(ctx, "jobs", stream.NewMessage(job{N: n}))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := send(3)
	out, err := cli("--topic", "jobs", "--group", "workers", "--id", id, "--wait", "10s", "--json")
	var row resultJSON
	if err == nil {
		err = json.Unmarshal([]byte(out), &row)
	}
	if err != nil || row.State != "completed" || row.Result != `{"square":9}` || row.DeliveryCount != 1 {
		t.Fatalf("result --json: %+v (%q), %v", row, out, err)
	}
	slow := send(2)
	if out, err := cli("--topic", "jobs", "--group", "workers", "--id", slow, "--wait", "200ms"); err == nil || !strings.Contains(err.Error(), "not done") {
		t.Fatalf("wait for a running entry: %q, %v; want not done", out, err)
	}
	close(release)
	if out, err := cli("--topic", "jobs", "--group", "workers", "--id", slow, "--wait", "10s"); err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, `{"square":4}`) {
		t.Fatalf("result text: %q, %v", out, err)
	}
	failed := send(-1)
	if out, err := cli("--topic", "jobs", "--group", "workers", "--id", failed, "--wait", "10s"); err != nil || !strings.Contains(out, "failed") || !strings.Contains(out, "negative") {
		t.Fatalf("result of a dead letter: %q, %v", out, err)
	}
	if _, err := cli("--topic", "jobs", "--group", "workers", "--id", "1-1"); err == nil || !strings.Contains(err.Error(), "no record") {
		t.Fatalf("result of an unknown entry: %v, want no record", err)
	}
	if _, err := cli("--topic", "jobs", "--id", id); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("missing --group: %v", err)
	}
}
