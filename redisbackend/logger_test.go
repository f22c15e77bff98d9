package redisbackend

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// logBuffer is a concurrency-safe slog destination for tests.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.FieldsFunc(l.b.String(), func(r rune) bool { return r == '\n' })
}

// TestLoggerStateChanges: a limiter logs one Warn when a real Redis goes away (however
// many decisions fail meanwhile, concurrently too) and one Info when it is back; healthy
// decisions and a caller's own cancellation log nothing.
func TestLoggerStateChanges(t *testing.T) {
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	spec := redstream.TokenBucket(1000, 1000)
	l := withPolicy(t, mustLimiter(t, c, spec, Options{Logger: log, KeyPrefix: "logtest"}), redstream.FailFallback, nil).(batchLimiter)
	decide := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				if d, err := l.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
					t.Errorf("Allow = %+v, %v; want allowed (by Redis or the fallback)", d, err)
				}
			}()
		}
		wg.Wait()
		if _, err := l.AllowBatch(context.Background(), []string{"a", "b"}, time.Time{}, 1); err != nil {
			t.Errorf("AllowBatch: %v", err)
		}
	}
	decide(20)
	if got := logs.lines(); len(got) != 0 {
		t.Fatalf("healthy decisions logged %q", got)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = l.AllowN(cctx, "k", time.Time{}, 1) // the caller gave up: not a Redis failure
	if got := logs.lines(); len(got) != 0 {
		t.Fatalf("a cancelled call logged %q", got)
	}

	s.Stop()
	// The failures of calls in flight together are one cause to the breaker: three rounds
	// of concurrent decisions, one after the other, open it.
	decide(20)
	decide(20)
	decide(20)
	got := logs.lines()
	if len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "circuit breaker open") ||
		!strings.Contains(got[0], "failure policy") || !strings.Contains(got[0], "prefix=logtest") || !strings.Contains(got[0], "error=") {
		t.Fatalf("after Redis went away: %d lines %q, want one Warn naming the breaker, the policy, the prefix and the error", len(got), got)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// The client reconnects on its own; the first decision Redis answers logs the recovery.
	deadline := time.Now().Add(20 * time.Second)
	for len(logs.lines()) < 2 && time.Now().Before(deadline) {
		decide(5)
		time.Sleep(50 * time.Millisecond)
	}
	decide(20)
	got = logs.lines()
	if len(got) != 2 || !strings.Contains(got[1], "level=INFO") || !strings.Contains(got[1], "answers again") {
		t.Fatalf("after Redis came back: %d lines %q, want the Warn then one Info", len(got), got)
	}
}

// TestLoggerDefault: without Options.Logger a limiter logs through slog.Default().
func TestLoggerDefault(t *testing.T) {
	var logs logBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	l := withPolicy(t, mustLimiter(t, c, redstream.TokenBucket(2, 1), Options{}), redstream.FailOpen, nil)
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for i := 0; i < 3; i++ {
		if d, err := l.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
			t.Fatalf("fail-open Allow = %+v, %v", d, err)
		}
	}
	if got := logs.lines(); len(got) != 1 || !strings.Contains(got[0], "circuit breaker open") {
		t.Fatalf("slog.Default() received %q, want one Warn saying the breaker opened", got)
	}
}
