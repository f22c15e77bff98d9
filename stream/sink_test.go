package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

func TestListSink(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	list := newTopic(t) + ":out"
	s, err := stream.NewListSink(client, list, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, val string
		want     bool
	}{
		{"a", "1", true}, {"b", "2", true}, {"a", "1 again", false}, {"c", "3", true}, {"b", "x", false},
	} {
		got, err := s.Write(ctx, stream.Record{IdempotencyKey: tc.key, Value: tc.val})
		if err != nil || got != tc.want {
			t.Errorf("Write(%s, %s) = %v, %v; want %v", tc.key, tc.val, got, err, tc.want)
		}
	}
	vals, err := client.Do(ctx, client.B().Lrange().Key(list).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil || fmt.Sprint(vals) != "[1 2 3]" {
		t.Errorf("list = %v, %v; want [1 2 3]", vals, err)
	}
	if err := s.Invoke(ctx, stream.Record{Value: "x"}); !errors.Is(err, redstream.ErrEmptyKey) {
		t.Errorf("empty key: %v, want ErrEmptyKey", err)
	}
	// The TTL expires the idempotency key.
	short, _ := stream.NewListSink(client, list, 20*time.Millisecond)
	if ok, _ := short.Write(ctx, stream.Record{IdempotencyKey: "z", Value: "4"}); !ok {
		t.Fatal("first write of z refused")
	}
	time.Sleep(60 * time.Millisecond)
	if ok, _ := short.Write(ctx, stream.Record{IdempotencyKey: "z", Value: "5"}); !ok {
		t.Error("write after the TTL refused")
	}
	// A key of another type is an error, and nothing is recorded.
	other := newTopic(t)
	if err := client.Do(ctx, client.B().Set().Key(other).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	bad, _ := stream.NewListSink(client, other, 0)
	if _, err := bad.Write(ctx, stream.Record{IdempotencyKey: "k", Value: "v"}); err == nil {
		t.Error("write to a string key: got nil error")
	}
	if err := client.Do(ctx, client.B().Del().Key(other).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if ok, err := bad.Write(ctx, stream.Record{IdempotencyKey: "k", Value: "v"}); !ok || err != nil {
		t.Errorf("write after the failed one = %v, %v; want written (the failure recorded nothing)", ok, err)
	}
	for _, name := range []string{"", "a}b"} {
		if _, err := stream.NewListSink(client, name, 0); err == nil {
			t.Errorf("NewListSink(%q): got nil error", name)
		}
	}
	if _, err := stream.NewListSink(client, "x", -time.Second); err == nil {
		t.Error("negative TTL: got nil error")
	}
}

func TestListSinkConcurrent(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	list := newTopic(t)
	s, _ := stream.NewListSink(client, list, time.Minute)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if err := s.Invoke(ctx, stream.Record{IdempotencyKey: fmt.Sprint(i), Value: fmt.Sprint(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, err := client.Do(ctx, client.B().Llen().Key(list).Build()).AsInt64(); err != nil || n != 100 {
		t.Errorf("LLEN = %d, %v; want 100 (8 writers, 100 keys)", n, err)
	}
}

func TestCheckpointedListSink(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	list := "{" + newTopic(t) + "}out"
	s, err := stream.NewCheckpointedListSink(client, list, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"a", "b", "a"} {
		if err := s.Invoke(ctx, stream.Record{IdempotencyKey: k, Value: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := client.Do(ctx, client.B().Llen().Key(list).Build()).AsInt64(); n != 0 || stream.Buffered(s) != 3 {
		t.Fatalf("before checkpoint: LLEN %d, buffered %d; want 0, 3", n, stream.Buffered(s))
	}
	if n, err := s.Checkpoint(ctx); err != nil || n != 2 {
		t.Fatalf("Checkpoint = %d, %v; want 2", n, err)
	}
	// Replaying the same input after a restart writes nothing new.
	for i, k := range []string{"a", "b", "c"} {
		_ = s.Invoke(ctx, stream.Record{IdempotencyKey: k, Value: fmt.Sprint(i)})
	}
	if n, err := s.Checkpoint(ctx); err != nil || n != 1 {
		t.Fatalf("second Checkpoint = %d, %v; want 1", n, err)
	}
	_ = s.Invoke(ctx, stream.Record{IdempotencyKey: "d", Value: "d"})
	if n := s.Discard(); n != 1 || stream.Buffered(s) != 0 {
		t.Errorf("Discard = %d, buffered %d", n, stream.Buffered(s))
	}
	if n, err := s.Checkpoint(ctx); err != nil || n != 0 {
		t.Errorf("empty Checkpoint = %d, %v", n, err)
	}
	vals, _ := client.Do(ctx, client.B().Lrange().Key(list).Start(0).Stop(-1).Build()).AsStrSlice()
	if fmt.Sprint(vals) != "[0 1 2]" {
		t.Errorf("list = %v, want [0 1 2]", vals)
	}
}
