package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// killConnections drops client connections of the server at addr every period until the
// returned stop is called, which reports how many kills ran: with name "", every normal
// connection but the killer's own at once (CLIENT KILL TYPE normal SKIPME yes); else one
// connection of the clients named name per kill, in turn (CLIENT KILL ID). The killer is a
// client of its own with one connection.
func killConnections(t *testing.T, addr, name string, period time.Duration) (stop func() int) {
	t.Helper()
	killer, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
		DisableCache: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatal(err)
	}
	kill := func(ctx context.Context, n int) error {
		if name == "" {
			return killer.Do(ctx, killer.B().Arbitrary("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Build()).Error()
		}
		list, err := killer.Do(ctx, killer.B().Arbitrary("CLIENT", "LIST", "TYPE", "normal").Build()).ToString()
		if err != nil {
			return err
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimPrefix(list, "txt:"), "\n") { // RESP3 verbatim
			f := strings.Fields(line)
			if len(f) > 0 && slices.Contains(f, "name="+name) {
				ids = append(ids, strings.TrimPrefix(f[0], "id="))
			}
		}
		if len(ids) == 0 {
			return errors.New("no connection to kill")
		}
		return killer.Do(ctx, killer.B().Arbitrary("CLIENT", "KILL", "ID", ids[n%len(ids)]).Build()).Error()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var kills atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := kill(ctx, n); err == nil {
				kills.Add(1)
			} else {
				t.Logf("kill %d: %v", n, err)
			}
			cancel()
		}
	}()
	var once sync.Once
	return func() int {
		once.Do(func() { close(done); wg.Wait(); killer.Close() })
		return int(kills.Load())
	}
}

// hammer runs workers goroutines calling f for d and returns the number of calls and of
// failed ones.
func hammer(workers int, d time.Duration, f func(w, i int) error) (calls, failed int64, first error) {
	var nc, nf atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				nc.Add(1)
				if err := f(w, i); err != nil {
					nf.Add(1)
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return nc.Load(), nf.Load(), first
}

// TestConnectionKills: connections of the limiter's client are dropped (CLIENT KILL)
// every 250 ms while 64 goroutines make decisions for 3 s with the default breaker.
// Each kill fails the calls in flight on the dropped connections at once (rueidis cannot
// tell which of them Redis ran, so none is retried); the breaker counts such a burst as
// one failure and stays closed. Killing one connection of the client's four per tick (its
// ~16 calls in flight), under 1% of the decisions fail; killing all of them at once, no
// decision fails but those in flight (at most 64 per kill) and none is ErrCircuitOpen; the
// same for a deduplicator's checks.
func TestConnectionKills(t *testing.T) {
	for _, tc := range []struct {
		name       string
		all, dedup bool
	}{
		{"one connection", false, false},
		{"every connection", true, false},
		{"deduplicator, every connection", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.NewServer(t)
			client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, ClientName: "limiter"})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var logs logBuffer
			// The default breaker; a Timeout of 1 s rather than 100 ms, because 64
			// goroutines deciding as fast as they can under the race detector on a loaded
			// 2-core machine make calls wait over 100 ms with no kill at all, and three such
			// timeouts in a row open the breaker: the test measures the kills.
			eng := mustLimiter(t, client, redstream.TokenBucket(1e6, 1e6), Options{Timeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), KeyPrefix: uniq("kill")})
			dedup, err := newSetDeduplicator(client, uniq("kill"), DedupOptions{Timeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			g := &eng.g
			decide := func(ctx context.Context, key string) error {
				_, err := eng.AllowN(ctx, key, time.Time{}, 1)
				return err
			}
			if tc.dedup {
				g = &dedup.g
				decide = func(ctx context.Context, key string) error { _, err := dedup.CheckAndMark(ctx, key); return err }
			}
			ctx := context.Background()
			if err := decide(ctx, "warm"); err != nil {
				t.Fatal(err)
			}
			name := "limiter"
			if tc.all {
				name = ""
			}
			const workers = 64
			stop := killConnections(t, srv.Addr, name, 250*time.Millisecond)
			defer stop()
			var open, timeouts atomic.Int64
			calls, failed, first := hammer(workers, 3*time.Second, func(w, i int) error {
				time.Sleep(time.Millisecond) // the rest of a request's work
				err := decide(ctx, fmt.Sprint("k", w, ":", i))
				switch {
				case errors.Is(err, redstream.ErrCircuitOpen):
					open.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					timeouts.Add(1)
				}
				return err
			})
			kills := stop()
			rate := float64(failed) / float64(calls)
			t.Logf("CLIENT KILL of %s every 250 ms (%d kills), %d goroutines: %d of %d decisions failed (%.2f%%), %d of them ErrCircuitOpen, %d timeouts; breaker %+v; logs %q; first error: %v",
				tc.name, kills, workers, failed, calls, 100*rate, open.Load(), timeouts.Load(), g.br.Stats(), logs.lines(), first)
			if kills < 5 {
				t.Fatalf("only %d kills ran", kills)
			}
			if open.Load() != 0 || len(logs.lines()) != 0 {
				t.Errorf("%d decisions failed fast on an open breaker, logs %q; want the breaker closed throughout", open.Load(), logs.lines())
			}
			if tc.all {
				if failed > int64(workers*(kills+1)) {
					t.Errorf("%d decisions failed in %d kills, want at most the %d in flight per kill", failed, kills, workers)
				}
			} else if rate >= 0.01 {
				t.Errorf("%.2f%% of the decisions failed, want under 1%%", 100*rate)
			}
		})
	}
}
