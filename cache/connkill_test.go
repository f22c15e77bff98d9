package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// TestConnectionKills: every connection of the cache's client is dropped (CLIENT KILL TYPE
// normal) every 250 ms while 64 goroutines write entries for 3 s. Each kill fails the
// writes in flight on the dropped connections; the breaker counts the failures of one kill
// as one and stays closed: no call fails fast with ErrCircuitOpen, nothing is logged, and no
// more calls fail than were in flight (64 per kill). Writes only: rueidis retries a read
// (read-only) of a dropped connection itself, and v1.0.79 then puts the command back in its
// pool while the dead connection's writer may still read it, which the race detector
// reports inside rueidis.
func TestConnectionKills(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	killer, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, ForceSingleClient: true,
		DisableCache: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close()
	var mu sync.Mutex
	var logs bytes.Buffer
	cfg := testConfig(t)
	// The default breaker; a Timeout of 1 s, so that a loaded machine's slow calls (no
	// kill needed) do not open it: the test counts the kills' failures.
	cfg.Timeout = time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	c := newCache(t, client, cfg)
	ctx := context.Background()
	if err := c.Set(ctx, "warm", "v", time.Minute); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var kills atomic.Int64
	var kwg sync.WaitGroup
	kwg.Add(1)
	go func() {
		defer kwg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			kctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if killer.Do(kctx, killer.B().Arbitrary("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Build()).Error() == nil {
				kills.Add(1)
			}
			cancel()
		}
	}()

	const workers = 64
	var calls, failed, open atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	end := time.Now().Add(3 * time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				time.Sleep(time.Millisecond) // the rest of a request's work
				key := fmt.Sprint("k", w, ":", i%32)
				err := c.Set(ctx, key, i, time.Minute)
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, &err)
					if errors.Is(err, redstream.ErrCircuitOpen) {
						open.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	kwg.Wait()
	n := kills.Load()
	var firstErr error
	if p := first.Load(); p != nil {
		firstErr = *p
	}
	mu.Lock()
	lines := strings.FieldsFunc(logs.String(), func(r rune) bool { return r == '\n' })
	mu.Unlock()
	t.Logf("CLIENT KILL of every connection every 250 ms (%d kills), %d goroutines: %d of %d calls failed (%.2f%%), %d ErrCircuitOpen; breaker %v; first error: %v",
		n, workers, failed.Load(), calls.Load(), 100*float64(failed.Load())/float64(calls.Load()), open.Load(), c.Stats().Breaker, firstErr)
	if n < 5 {
		t.Fatalf("only %d kills ran", n)
	}
	if open.Load() != 0 || len(lines) != 0 || c.Stats().Breaker != redstream.BreakerClosed {
		t.Errorf("%d calls failed fast on an open breaker, logs %q; want the breaker closed throughout", open.Load(), lines)
	}
	if failed.Load() > workers*(n+1) {
		t.Errorf("%d calls failed in %d kills, want at most the %d in flight per kill", failed.Load(), n, workers)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
