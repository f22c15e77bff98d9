package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/stream"
)

// TestDLQCommand drives `redstream dlq` against the embedded Redis: two messages are
// dead-lettered, listed, one replayed by id, the other purged.
func TestDLQCommand(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
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
		err := run(ctx, append([]string{"dlq"}, append(args, "--redis", mr.Addr(), "--topic", "orders", "--env", "prod")...), &out)
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
	if err := run(ctx, []string{"dlq", "list", "--redis", mr.Addr()}, &out2); err == nil {
		t.Error("missing --topic: got nil error")
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
