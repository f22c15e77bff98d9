package cache

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBackgroundWriteFailuresLogged: write-backs that Redis refuses (out of memory, reads
// still served) are logged once at Warn while they fail, and once at Info when they work
// again; the callers get their loaded values all along.
func TestBackgroundWriteFailuresLogged(t *testing.T) {
	srv := redistest.NewServer(t, "--maxmemory-policy", "noeviction")
	client := redistest.NewClient(t, srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var logs syncBuffer
	cfg := testConfig(t)
	cfg.Breakdown.Enabled = false // the lock itself is a write: under OOM it fails the call
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := newCache(t, client, cfg)
	setMaxMemory := func(v string) {
		t.Helper()
		if err := client.Do(ctx, client.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	setMaxMemory("1")
	for i := range 3 {
		v, err := GetOrLoad(ctx, c, fmt.Sprintf("k%d", i), DefaultTTL, func(context.Context) (int, error) { return i, nil })
		if err != nil || v != i {
			t.Fatalf("GetOrLoad under OOM = %v, %v; want the loaded value", v, err)
		}
	}
	if ok, err := c.Exists(ctx, "k0"); err != nil || ok {
		t.Fatalf("k0 cached under OOM: %v, %v", ok, err)
	}
	setMaxMemory("0")
	if _, err := GetOrLoad(ctx, c, "ok", DefaultTTL, func(context.Context) (int, error) { return 9, nil }); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Exists(ctx, "ok"); err != nil || !ok {
		t.Fatalf("not cached after recovery: %v, %v", ok, err)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN msg=\"cache: background writes to Redis are failing"); n != 1 {
		t.Errorf("%d warnings for three failed write-backs, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "OOM") || strings.Count(out, "level=INFO msg=\"cache: background writes to Redis work again\"") != 1 {
		t.Errorf("want the OOM error and one recovery record:\n%s", out)
	}
}
