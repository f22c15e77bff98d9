package redisbackend

import (
	"context"
	"strings"
	"sync"
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

	bloom, err := newBloomDeduplicator(c, "ro-bloom", redstream.DedupSpec{Insertions: 1000, FPRate: 0.01}, DedupOptions{})
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
	if _, err := w.CheckAndMarkAt(ctx, "order-1", at); err != nil {
		t.Fatal(err)
	}
	if dup, err := w.IsDuplicateAt(ctx, "order-1", at.Add(time.Second)); err != nil || !dup {
		t.Fatalf("IsDuplicateAt = %v, %v; want true", dup, err)
	}
}

// countingClient counts the commands sent through it, by name.
type countingClient struct {
	rueidis.Client
	mu   sync.Mutex
	sent map[string]int
}

func (c *countingClient) record(cmds ...rueidis.Completed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.sent[strings.ToUpper(cmd.Commands()[0])]++
	}
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.record(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.record(cmds...)
	return c.Client.DoMulti(ctx, cmds...)
}

func (c *countingClient) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sent
	c.sent = map[string]int{}
	return s
}

// TestReadOnlyRefusalRemembered: on a server without EVALSHA_RO and EVAL_RO (renamed
// away, as on Redis 6.2), 100 read-only checks send 100 commands plus one refused probe,
// and deduplicators made later on the same client send no probe at all.
func TestReadOnlyRefusalRemembered(t *testing.T) {
	ctx := context.Background()
	s := redistest.NewServer(t, "--rename-command", "EVALSHA_RO", "", "--rename-command", "EVAL_RO", "")
	raw := redistest.NewClient(t, s.Addr)
	for _, sc := range []*script{scriptDedupWindowCheck, scriptBloomExists} {
		if err := raw.Do(ctx, raw.B().ScriptLoad().Script(sc.src).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	c := &countingClient{Client: raw, sent: map[string]int{}}
	w, err := newWindowDeduplicator(c, uniq("ro-count"), time.Minute, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 100; i++ {
		if dup, err := w.IsDuplicateAt(ctx, "order-1", at); err != nil || dup {
			t.Fatalf("check %d = %v, %v", i, dup, err)
		}
	}
	got := c.take()
	if got["EVALSHA_RO"] != 1 || got["EVALSHA"] != 100 || len(got) != 2 {
		t.Errorf("100 read-only checks sent %v, want 100 EVALSHA and one refused EVALSHA_RO", got)
	}

	bloom, err := newBloomDeduplicator(c, uniq("ro-count"), redstream.DedupSpec{Insertions: 1000}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := bloom.IsDuplicate(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.take(); got["EVALSHA"] != 100 || len(got) != 1 {
		t.Errorf("a second deduplicator on the same client sent %v, want 100 EVALSHA and no probe", got)
	}
}
