package redisbackend

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// TestConnectorStartsWithoutRedis: a service starts while no Redis answers; its limiter
// (in WithFailurePolicy with the default in-process fallback) and deduplicator answer at
// once meanwhile, and once the server is started they use it.
func TestConnectorStartsWithoutRedis(t *testing.T) {
	srv := redistest.NewServer(t)
	srv.Stop() // the address is known, nothing listens yet
	var logs logBuffer
	var attempts atomic.Int64
	conn, err := Connect(func(context.Context) (rueidis.Client, error) {
		attempts.Add(1)
		return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}})
	}, ConnectOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prefix := uniq("connector")
	eng, err := conn.NewLimiter(redstream.FixedWindow(time.Hour, 5), Options{KeyPrefix: prefix, Timeout: DefaultTimeout})
	if err != nil {
		t.Fatal(err)
	}
	l := withPolicy(t, eng, redstream.FailFallback, nil)
	dedup, err := conn.NewDeduplicator(uniq("connector"), redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var slowest time.Duration
	meter := redistest.NewStallMeter(t)
	for i := 0; i < 5; i++ {
		var d redstream.Decision
		var err error
		took, stall := meter.Time(func() { d, err = l.AllowN(ctx, "k", time.Time{}, 1) })
		slowest = max(slowest, took-stall)
		if err != nil || !d.Allowed {
			t.Fatalf("decision %d before Redis: %+v, %v; want the fallback's admission", i, d, err)
		}
	}
	if _, err := eng.AllowN(ctx, "k", time.Time{}, 1); !errors.Is(err, ErrNotConnected) {
		t.Errorf("engine before Redis: %v, want ErrNotConnected", err)
	}
	if _, err := dedup.CheckAndMark(ctx, "m"); !errors.Is(err, ErrNotConnected) {
		t.Errorf("deduplicator before Redis: %v, want ErrNotConnected", err)
	}
	// At once: far below the Redis call's timeout, which a decision waiting for a dial
	// attempt would take (a quarter of it leaves room for -race on a loaded machine).
	if slowest > DefaultTimeout/4 {
		t.Errorf("slowest decision before Redis %v (less the process's stall), want at most %v", slowest, DefaultTimeout/4)
	}
	time.Sleep(300 * time.Millisecond)
	if n := attempts.Load(); n < 3 {
		t.Errorf("%d attempts in 300 ms, want retries with backoff", n)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	begin := time.Now()
	client, err := conn.Wait(wctx)
	if err != nil {
		t.Fatalf("no client 10 s after the server started: %v", err)
	}
	t.Logf("connector: client made %v after the server started, after %d attempts", time.Since(begin), attempts.Load())
	if d, err := eng.AllowN(ctx, "k", time.Time{}, 1); err != nil || d.Remaining != 4 {
		t.Fatalf("engine once connected: %+v, %v; want Redis's first decision (Remaining 4)", d, err)
	}
	if n, err := client.Do(ctx, client.B().Exists().Key(eng.Keys("k")...).Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("key in Redis: %d, %v", n, err)
	}
	if dup, err := dedup.CheckAndMark(ctx, "m"); err != nil || dup {
		t.Errorf("deduplicator once connected: %v, %v", dup, err)
	}
	got := logs.lines()
	if len(got) != 2 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[1], "connected") {
		t.Errorf("logs %q, want one Warn and one Info", got)
	}
	conn.Close()
	if _, err := eng.AllowN(ctx, "k", time.Time{}, 1); err == nil {
		t.Error("a decision after Close succeeded")
	}
}

// TestConnectorHungServer: against a hung server (SIGSTOP) each attempt is abandoned at
// its deadline; the client is made once the server resumes, and Close returns at once.
func TestConnectorHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := redistest.NewClient(t, srv.Addr)
	pid := serverPID(t, admin)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	var attempts atomic.Int64
	conn, err := Connect(func(ctx context.Context) (rueidis.Client, error) {
		attempts.Add(1)
		return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}})
	}, ConnectOptions{AttemptTimeout: 200 * time.Millisecond, MinBackoff: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(700 * time.Millisecond)
	if conn.Client() != nil {
		t.Fatal("a client was made while the server hung")
	}
	if n := attempts.Load(); n < 2 {
		t.Errorf("%d attempts in 700 ms with a 200 ms attempt deadline, want at least 2", n)
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := conn.Wait(wctx); err != nil {
		t.Fatalf("no client after SIGCONT: %v", err)
	}
	start := time.Now()
	conn.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
}

func TestConnectErrors(t *testing.T) {
	nc := func(context.Context) (rueidis.Client, error) { return nil, errors.New("no") }
	for name, tc := range map[string]struct {
		f    func(context.Context) (rueidis.Client, error)
		opts ConnectOptions
	}{
		"nil factory":      {nil, ConnectOptions{}},
		"negative timeout": {nc, ConnectOptions{AttemptTimeout: -1}},
		"max below min":    {nc, ConnectOptions{MinBackoff: time.Second, MaxBackoff: time.Millisecond}},
		"negative backoff": {nc, ConnectOptions{MinBackoff: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := Connect(tc.f, tc.opts); !errors.Is(err, redstream.ErrInvalidConfig) {
				if c != nil {
					c.Close()
				}
				t.Errorf("Connect = %v, want ErrInvalidConfig", err)
			}
		})
	}
	// A factory that panics or returns nil is retried, never crashes the process.
	var calls atomic.Int64
	c, err := Connect(func(context.Context) (rueidis.Client, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil, nil
	}, ConnectOptions{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c.Close()
	if calls.Load() < 2 {
		t.Errorf("%d calls, want retries after a panic", calls.Load())
	}
	if _, _, err := c.get(); !errors.Is(err, ErrNotConnected) {
		t.Errorf("closed connector: %v", err)
	}
}
