package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

// loadLog records the times each key's loader was called.
type loadLog struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (l *loadLog) add(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string][]time.Time{}
	}
	l.at[key] = append(l.at[key], time.Now())
}

// since returns the calls of key at or after from.
func (l *loadLog) since(key string, from time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, t := range l.at[key] {
		if !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}

var errSource = errors.New("the database is down")

// TestFailSafeOutage: with Redis hung (SIGSTOP) and the loader failing, keys read before
// the outage keep being served, flagged stale, each call within about Timeout, and each
// key's source is asked at most once per throttle interval; after recovery every key is
// fresh again within one throttle backoff and the breaker's cool-down.
func TestFailSafeOutage(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	pid := serverPID(t, client)
	cfg := testConfig(t)
	cfg.Timeout = DefaultTimeout
	cfg.OnRedisError = LoadOnError // the loader is a second failing source
	cfg.FailSafe.Enabled = true
	cfg.FailSafe.Throttle = 300 * time.Millisecond
	c := newCache(t, client, cfg)
	ctx := context.Background()
	var failing atomic.Bool
	var gen atomic.Int64 // the loader's values: key + "@" + gen
	var log loadLog
	loader := func(key string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			log.add(key)
			if failing.Load() {
				return "", errSource
			}
			return fmt.Sprintf("%s@%d", key, gen.Load()), nil
		}
	}
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		// A TTL shorter than the outage: after it Redis has nothing, the loader must answer.
		if _, err := GetOrLoad(ctx, c, keys[i], time.Second, loader(keys[i])); err != nil {
			t.Fatal(err)
		}
	}
	failing.Store(true)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	outage := time.Now()
	took := readStale(t, c, keys, loader, 3*time.Second)
	slices.Sort(took)
	worst, p99 := took[len(took)-1], took[len(took)*99/100]
	over := len(took) - sort.Search(len(took), func(i int) bool { return took[i] > 110*time.Millisecond })
	t.Logf("%d calls during the outage: p99 %v, slowest %v, %d over 110ms", len(took), p99.Round(time.Microsecond), worst.Round(time.Microsecond), over)
	// Each call waits at most Timeout for Redis; a loaded machine (-race, tests in
	// parallel) may add scheduling delay to a few of them.
	if over > len(took)/200 || worst > DefaultTimeout+time.Second {
		t.Errorf("%d of %d calls over 110ms, slowest %v; want each within about Timeout (%v)", over, len(took), worst, DefaultTimeout)
	}
	if st := c.Stats(); st.Stale == 0 {
		t.Errorf("Stats().Stale = 0 after the outage")
	}
	for _, k := range keys {
		calls := log.since(k, outage)
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].Sub(calls[i-1]); gap < cfg.FailSafe.Throttle {
				t.Errorf("key %s: loader asked %v after its previous failure, want at least the throttle %v", k, gap, cfg.FailSafe.Throttle)
			}
		}
		if len(calls) == 0 || len(calls) > 4 {
			t.Errorf("key %s: loader asked %d times in 3s of outage, want 1 to 4 (throttle 300ms, backoff)", k, len(calls))
		}
	}
	gen.Store(1)
	failing.Store(false)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	for _, k := range keys {
		for {
			var stale bool
			v, err := GetOrLoad(ctx, c, k, time.Minute, loader(k), Stale(&stale))
			if err == nil && !stale && v == k+"@1" {
				break
			}
			if time.Since(recovered) > 8*cfg.FailSafe.Throttle+2*time.Second {
				t.Fatalf("key %s after recovery: %q, %v, stale %v; want the fresh value", k, v, err, stale)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("every key fresh %v after recovery", time.Since(recovered).Round(time.Millisecond))
}

// readStale reads keys in a loop for d, checking that every read returns the value loaded
// before the outage, flagged stale; it returns the durations of the calls.
func readStale(t *testing.T, c *Cache, keys []string, loader func(string) func(context.Context) (string, error), d time.Duration) []time.Duration {
	t.Helper()
	var took []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, k := range keys {
			var stale bool
			begin := time.Now()
			v, err := GetOrLoad(context.Background(), c, k, time.Minute, loader(k), Stale(&stale))
			took = append(took, time.Since(begin))
			if err != nil || v != k+"@0" || !stale {
				t.Fatalf("GetOrLoad(%s) during the outage = %q, %v, stale %v; want %q, stale", k, v, err, stale, k+"@0")
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return took
}

// TestFailSafeLoaderFails: with Redis up, a key that expired is served stale when its
// loader fails, the loader is not asked again within the throttle, and the max staleness
// bounds how long the stale value is served.
func TestFailSafeLoaderFails(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	cfg := testConfig(t)
	cfg.FailSafe.Enabled = true
	cfg.FailSafe.Throttle = 200 * time.Millisecond
	cfg.FailSafe.MaxStaleness = 700 * time.Millisecond
	c := newCache(t, client, cfg)
	ctx := context.Background()
	var calls atomic.Int64
	fail := func(context.Context) (int, error) { calls.Add(1); return 0, errSource }
	if _, err := GetOrLoad(ctx, c, "k", 20*time.Millisecond, func(context.Context) (int, error) { return 7, nil }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond) // expired in Redis
	var stale bool
	for i := range 5 {
		v, err := GetOrLoad(ctx, c, "k", time.Minute, fail, Stale(&stale))
		if err != nil || v != 7 || !stale {
			t.Fatalf("call %d with the loader failing = %d, %v, stale %v; want the stale 7", i, v, err, stale)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("loader asked %d times within the throttle, want 1", n)
	}
	time.Sleep(cfg.FailSafe.Throttle + 20*time.Millisecond)
	if _, err := GetOrLoad(ctx, c, "k", time.Minute, fail, Stale(&stale)); err != nil || calls.Load() != 2 {
		t.Errorf("after the throttle: err %v, loader calls %d; want the stale value and a second try", err, calls.Load())
	}
	time.Sleep(cfg.FailSafe.MaxStaleness)
	if _, err := GetOrLoad(ctx, c, "k", time.Minute, fail); !errors.Is(err, errSource) {
		t.Errorf("past MaxStaleness: err %v, want the loader's error", err)
	}
	// Delete forgets the last value: nothing stale to serve.
	if _, err := GetOrLoad(ctx, c, "d", time.Minute, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := GetOrLoad(ctx, c, "d", time.Minute, fail); !errors.Is(err, errSource) {
		t.Errorf("after Delete: err %v, want the loader's error", err)
	}
}

// TestFailSafeGetOutage: with Redis hung (SIGSTOP), Get and GetMany keep serving the values
// they read before the outage, flagged stale, each call within about Timeout; after
// recovery they return the fresh values.
func TestFailSafeGetOutage(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	pid := serverPID(t, client)
	cfg := testConfig(t)
	cfg.Timeout = DefaultTimeout
	cfg.FailSafe.Enabled = true
	cfg.FailSafe.Throttle = 300 * time.Millisecond
	c := newCache(t, client, cfg)
	ctx := context.Background()
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		if err := c.Set(ctx, keys[i], keys[i]+"@0", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var stale bool
	if _, err := GetMany(ctx, c, keys[5:], time.Minute, noBatch, Stale(&stale)); err != nil || stale {
		t.Fatalf("GetMany before the outage: %v, stale %v", err, stale)
	}
	for _, k := range keys[:5] {
		if _, err := Get[string](ctx, c, k, Stale(&stale)); err != nil || stale {
			t.Fatalf("Get(%s) before the outage: %v, stale %v", k, err, stale)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	var took []time.Duration
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, k := range keys[:5] {
			begin := time.Now()
			v, err := Get[string](ctx, c, k, Stale(&stale))
			took = append(took, time.Since(begin))
			if err != nil || v != k+"@0" || !stale {
				t.Fatalf("Get(%s) during the outage = %q, %v, stale %v; want %q, stale", k, v, err, stale, k+"@0")
			}
		}
		begin := time.Now()
		m, err := GetMany(ctx, c, keys[5:], time.Minute, noBatch, Stale(&stale))
		took = append(took, time.Since(begin))
		if err != nil || len(m) != 5 || m[keys[5]] != keys[5]+"@0" || !stale {
			t.Fatalf("GetMany during the outage = %v, %v, stale %v; want the values before it, stale", m, err, stale)
		}
	}
	slices.Sort(took)
	worst := took[len(took)-1]
	over := len(took) - sort.Search(len(took), func(i int) bool { return took[i] > 110*time.Millisecond })
	t.Logf("%d calls during the outage: p99 %v, slowest %v, %d over 110ms", len(took), took[len(took)*99/100].Round(time.Microsecond), worst.Round(time.Microsecond), over)
	if over > len(took)/100+1 || worst > DefaultTimeout+time.Second {
		t.Errorf("%d of %d calls over 110ms, slowest %v; want each within about Timeout (%v)", over, len(took), worst, DefaultTimeout)
	}
	// A key never read has nothing to serve: the outage's error.
	if _, err := Get[string](ctx, c, "never", Stale(&stale)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Get of a key never read during the outage = %v, want ErrUnavailable", err)
	}
	if _, err := GetMany(ctx, c, []string{keys[5], "never"}, time.Minute, noBatch); !errors.Is(err, ErrUnavailable) {
		t.Errorf("GetMany with a key never read during the outage = %v, want ErrUnavailable", err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	for {
		if err := c.Set(ctx, keys[0], "fresh", time.Minute); err == nil {
			break
		}
		if time.Since(recovered) > 8*cfg.FailSafe.Throttle+3*time.Second {
			t.Fatal("Set never worked after recovery")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		v, err := Get[string](ctx, c, keys[0], Stale(&stale))
		if err == nil && !stale && v == "fresh" {
			break
		}
		if time.Since(recovered) > 8*cfg.FailSafe.Throttle+3*time.Second {
			t.Fatalf("Get after recovery = %q, %v, stale %v; want the fresh value", v, err, stale)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noBatch is a BatchLoader that finds nothing.
func noBatch(context.Context, []string) (map[string]string, error) { return nil, nil }
