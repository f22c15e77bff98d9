package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
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
