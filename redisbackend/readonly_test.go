package redisbackend

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// TestReadOnlyFallbackWithoutEvalshaRo runs the read-only checks on a server without
// EVALSHA_RO (as Redis 6.2): they fall back to EVALSHA and answer the same. The test asks the
// server once whether it has EVALSHA_RO; one that has it is restarted with the command
// renamed away (a directive a server without the command would refuse).
func TestReadOnlyFallbackWithoutEvalshaRo(t *testing.T) {
	ctx := context.Background()
	probe := func(c rueidis.Client) error {
		// An unknown script: NOSCRIPT where the command exists, unknown command where not.
		return c.Do(ctx, c.B().EvalshaRo().Sha1(scriptBloomExists.sha).Numkeys(0).Build()).Error()
	}
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	err := probe(c)
	if err == nil {
		t.Fatal("EVALSHA_RO of a script never loaded succeeded")
	}
	if !refusedReadOnly(err) {
		t.Logf("the server has EVALSHA_RO (%v): restarting it with EVALSHA_RO renamed", err)
		c.Close()
		s.Stop()
		s = redistest.NewServer(t, "--rename-command", "EVALSHA_RO", "evalsha_ro_disabled")
		c = redistest.NewClient(t, s.Addr)
		if err := probe(c); !refusedReadOnly(err) {
			t.Fatalf("EVALSHA_RO on the renamed server: %v, want an unknown-command error", err)
		}
	} else {
		t.Logf("the server has no EVALSHA_RO (%v)", err)
	}

	bloom, err := NewBloomDeduplicator(c, "ro-bloom", redstream.DedupSpec{Insertions: 1000, FPRate: 0.01}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := bloom.IsDuplicate(ctx, "a"); err != nil || dup {
		t.Fatalf("IsDuplicate before add = %v, %v; want false", dup, err)
	}
	if err := bloom.MarkSeen(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if dup, err := bloom.IsDuplicate(ctx, "a"); err != nil || !dup {
		t.Fatalf("IsDuplicate after add = %v, %v; want true", dup, err)
	}
	if n, err := bloom.Count(ctx); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}

	d, err := NewDeduplicator(c, "ro-window", redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Minute}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := d.(redstream.TimedDeduplicator)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := w.MarkSeenAt(ctx, "order-1", at); err != nil {
		t.Fatal(err)
	}
	if dup, err := w.IsDuplicateAt(ctx, "order-1", at.Add(time.Second)); err != nil || !dup {
		t.Fatalf("IsDuplicateAt = %v, %v; want true", dup, err)
	}
}
