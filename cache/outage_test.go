package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/internal/redistest"
)

// serverPID returns the process id of the redis-server behind client.
func serverPID(t *testing.T, client rueidis.Client) int {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}

// failure is one way Redis fails in a test, and how it comes back.
type failure struct {
	name    string
	fail    func(t *testing.T, srv *redistest.Server, pid int)
	recover func(t *testing.T, srv *redistest.Server, pid int)
}

var failures = []failure{
	{
		name: "killed",
		fail: func(t *testing.T, srv *redistest.Server, _ int) { srv.Stop() },
		recover: func(t *testing.T, srv *redistest.Server, _ int) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name: "hung",
		fail: func(t *testing.T, _ *redistest.Server, pid int) {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		},
		recover: func(t *testing.T, _ *redistest.Server, pid int) {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		},
	},
}

// recorder collects breaker state changes.
type recorder struct {
	mu      sync.Mutex
	changes []redstream.BreakerChange
}

func (r *recorder) add(ch redstream.BreakerChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, ch)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, ch := range r.changes {
		parts = append(parts, ch.From.String()+"->"+ch.To.String())
	}
	return strings.Join(parts, ",")
}

// TestOutageLoadPolicy: with Redis killed or hung (SIGSTOP) and on-redis-error "load",
// GetOrLoad without a caller deadline answers from the loader, the first calls within
// about Timeout and all calls after the breaker opens at once; nothing is cached; one
// warning is logged and the fallbacks are counted. Concurrent misses of one key do not hang.
// After the server comes back the cache uses Redis again within the cool-down.
func TestOutageLoadPolicy(t *testing.T) {
	for _, o := range failures {
		for _, clientSide := range []bool{false, true} {
			name := o.name
			if clientSide {
				name += "/client-side cache"
			}
			t.Run(name, func(t *testing.T) { testOutageLoadPolicy(t, o, clientSide) })
		}
	}
}

func testOutageLoadPolicy(t *testing.T, o failure, clientSide bool) {
	{
		{
			srv := redistest.NewServer(t)
			client := redistest.NewClient(t, srv.Addr)
			pid := serverPID(t, client)
			var logs syncBuffer
			var changes recorder
			cfg := testConfig(t)
			cfg.ClientSideCache.Enabled = clientSide
			// Warm the key with a generous deadline (a first call dials, and this machine
			// is loaded); the cache under test has the default 100ms.
			if err := client.Do(context.Background(), client.B().Set().Key(cfg.KeyPrefix+"warm").Value("1").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			cfg.OnRedisError = LoadOnError
			cfg.Timeout = DefaultTimeout
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			cfg.Breaker.OnStateChange = changes.add
			c := newCache(t, client, cfg)
			ctx := context.Background() // no deadline: the cache's own applies

			o.fail(t, srv, pid)
			var loads atomic.Int64
			var slowest, afterOpen time.Duration
			for i := range 20 {
				key := fmt.Sprintf("k%d", i)
				begin := time.Now()
				v, err := GetOrLoad(ctx, c, key, DefaultTTL, func(context.Context) (string, error) {
					loads.Add(1)
					return "from-source-" + key, nil
				})
				took := time.Since(begin)
				if err != nil || v != "from-source-"+key {
					t.Fatalf("GetOrLoad(%s) with Redis %s = %q, %v; want the loader's value", key, o.name, v, err)
				}
				slowest = max(slowest, took)
				if i >= health.DefaultFailures {
					afterOpen = max(afterOpen, took)
				}
			}
			t.Logf("Redis %s: 20 GetOrLoad answered from the loader, slowest %v, slowest after the breaker opened %v",
				o.name, slowest.Round(time.Microsecond), afterOpen.Round(time.Microsecond))
			if slowest > DefaultTimeout+time.Second {
				t.Errorf("slowest call took %v, want about Timeout (%v)", slowest, DefaultTimeout)
			}
			if afterOpen > 50*time.Millisecond {
				t.Errorf("calls after the breaker opened took up to %v, want immediate", afterOpen)
			}
			st := c.Stats()
			if loads.Load() != 20 || st.Fallbacks != 20 || st.Breaker != redstream.BreakerOpen || st.RedisErrors < health.DefaultFailures {
				t.Errorf("loads %d, stats %+v; want 20 loads and fallbacks, breaker open, >= %d Redis errors", loads.Load(), st, health.DefaultFailures)
			}
			var exp strings.Builder
			c.Metrics().WritePrometheus(&exp)
			for _, want := range []string{
				metricFallbacks + `{name="` + cfg.Name + `",reason="` + reasonBreakerOpen + `"} ` + strconv.Itoa(20-health.DefaultFailures),
				metricBreakerState + `{name="` + cfg.Name + `"} 2`,
			} {
				if !strings.Contains(exp.String(), want) {
					t.Errorf("exposition lacks %q:\n%s", want, exp.String())
				}
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings logged, want 1:\n%s", n, logs.String())
			}
			// ReturnError callers of the same outage get ErrUnavailable at once.
			strict := cfg
			strict.Name += "-strict"
			strict.OnRedisError = ReturnError
			strict.Breaker.OnStateChange = nil
			sc := newCache(t, client, strict)
			called := false
			for range health.DefaultFailures + 2 {
				begin := time.Now()
				_, err := GetOrLoad(ctx, sc, "x", DefaultTTL, func(context.Context) (int, error) { called = true; return 1, nil })
				if !errors.Is(err, ErrUnavailable) || time.Since(begin) > DefaultTimeout+time.Second {
					t.Fatalf("ReturnError: GetOrLoad = %v after %v; want ErrUnavailable within about Timeout", err, time.Since(begin))
				}
			}
			if called {
				t.Error("ReturnError called the loader")
			}

			// A stampede on one key while Redis is down: every caller answers, none hangs.
			var wg sync.WaitGroup
			begin := time.Now()
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if v, err := GetOrLoad(ctx, c, "hot", DefaultTTL, func(context.Context) (int, error) {
						time.Sleep(20 * time.Millisecond)
						return 7, nil
					}); err != nil || v != 7 {
						t.Errorf("stampede: %d, %v", v, err)
					}
				}()
			}
			wg.Wait()
			t.Logf("50 concurrent GetOrLoad of one key with Redis %s: %v", o.name, time.Since(begin).Round(time.Millisecond))

			// GetMany: every key from the loader, at once with the breaker open.
			begin = time.Now()
			many, err := GetMany(ctx, c, []string{"m1", "m2", "warm"}, DefaultTTL, func(_ context.Context, keys []string) (map[string]int, error) {
				out := map[string]int{}
				for i, k := range keys {
					out[k] = i + 100
				}
				return out, nil
			})
			if took := time.Since(begin); err != nil || len(many) != 3 || took > 500*time.Millisecond {
				t.Errorf("GetMany with Redis %s = %v, %v after %v; want 3 loaded values at once (well within the 100 ms timeout's multiples)", o.name, many, err, took)
			}
			if _, err := GetMany(ctx, sc, []string{"m1"}, DefaultTTL, func(context.Context, []string) (map[string]int, error) {
				t.Error("ReturnError GetMany called the loader")
				return nil, nil
			}); !errors.Is(err, ErrUnavailable) {
				t.Errorf("ReturnError GetMany = %v, want ErrUnavailable", err)
			}

			o.recover(t, srv, pid)
			deadline := time.Now().Add(health.DefaultCoolDown + 10*time.Second)
			for {
				_, err := GetOrLoad(ctx, c, "after", DefaultTTL, func(context.Context) (string, error) { return "cached", nil })
				if err != nil {
					t.Fatal(err)
				}
				if s, ok := raw(t, client, c.Key("after")); ok && s == `"cached"` {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the cache did not use Redis again within %v of its recovery; changes %s", health.DefaultCoolDown+10*time.Second, &changes)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if c.Stats().Breaker != redstream.BreakerClosed {
				t.Errorf("breaker %v after recovery, want closed", c.Stats().Breaker)
			}
			if !strings.Contains(logs.String(), "circuit breaker closed") {
				t.Errorf("no recovery record logged:\n%s", logs.String())
			}
			if got := changes.String(); !strings.HasPrefix(got, "closed->open,open->half-open") || !strings.HasSuffix(got, "half-open->closed") {
				t.Errorf("state changes %s, want closed->open, open->half-open, ..., half-open->closed", got)
			}
			for i := range 20 {
				if _, ok := raw(t, client, c.Key(fmt.Sprintf("k%d", i))); ok && o.name == "hung" {
					t.Errorf("k%d was cached during the outage", i)
				}
			}
		}
	}
}

// TestOutageWhileWaitingForLock: a caller waiting for another process's load when Redis
// hangs answers from the loader about Timeout after its next read (not after the 3s wait
// timeout), and the lock owner, whose write-back then fails, still returns its value
// within about Timeout of its load; with and without client-side caching (whose waiters
// read on a dedicated tracked connection).
func TestOutageWhileWaitingForLock(t *testing.T) {
	for _, clientSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("client-side=%v", clientSide), func(t *testing.T) {
			srv := redistest.NewServer(t)
			client := redistest.NewClient(t, srv.Addr)
			pid := serverPID(t, client)
			cfg := testConfig(t)
			cfg.Timeout = DefaultTimeout
			cfg.OnRedisError = LoadOnError
			cfg.ClientSideCache.Enabled = clientSide
			owner := newCache(t, redistest.NewClient(t, srv.Addr), cfg)
			waiter := newCache(t, client, cfg)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // before the caches' cleanups
			release := make(chan struct{})
			_, out := holdLock(t, owner, client, "k", "owner's", release)

			got := make(chan string, 1)
			go func() {
				v, err := GetOrLoad(context.Background(), waiter, "k", DefaultTTL, func(context.Context) (string, error) { return "waiter's", nil })
				if err != nil {
					v = "error: " + err.Error()
				}
				got <- v
			}()
			waitFor(t, "the waiter to wait", func() bool { return waiter.Stats().LockWaits == 1 })
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			begin := time.Now()
			select {
			case v := <-got:
				if v != "waiter's" {
					t.Errorf("waiter got %q, want its loader's value", v)
				}
				t.Logf("waiter answered %v after Redis hung", time.Since(begin).Round(time.Millisecond))
				if took := time.Since(begin); took > DefaultTimeout+defaultWaitInterval+time.Second {
					t.Errorf("waiter answered after %v, want about Timeout + WaitInterval", took)
				}
			case <-time.After(defaultWaitTimeout + 5*time.Second):
				t.Fatal("the waiter hangs")
			}
			begin = time.Now()
			close(release)
			if v := <-out; v != "owner's" {
				t.Errorf("owner got %q", v)
			}
			t.Logf("owner returned %v after its load with Redis hung", time.Since(begin).Round(time.Millisecond))
			if took := time.Since(begin); took > DefaultTimeout+time.Second {
				t.Errorf("owner returned %v after its load, want about Timeout", took)
			}
			if st := waiter.Stats(); st.Fallbacks != 1 {
				t.Errorf("waiter stats %+v, want 1 fallback", st)
			}
		})
	}
}

// TestHangDuringLoad: the lock owner's write-back has the cache's deadline, not the lock
// TTL: a server hung while the loader runs costs the caller at most about Timeout more.
func TestHangDuringLoad(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	pid := serverPID(t, client)
	cfg := testConfig(t)
	cfg.Timeout = DefaultTimeout
	c := newCache(t, client, cfg)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	begin := time.Now()
	v, err := GetOrLoad(context.Background(), c, "k", DefaultTTL, func(context.Context) (int, error) {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Error(err)
		}
		return 5, nil
	})
	took := time.Since(begin)
	t.Logf("GetOrLoad with Redis hung during the load returned after %v", took.Round(time.Millisecond))
	if err != nil || v != 5 {
		t.Fatalf("GetOrLoad = %d, %v; want the loaded 5", v, err)
	}
	if took > DefaultTimeout+time.Second {
		t.Errorf("GetOrLoad took %v, want about Timeout (%v) past the load", took, DefaultTimeout)
	}
	// Every other operation returns ErrUnavailable within its deadline.
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"Get":    func() error { _, err := Get[int](ctx, c, "k"); return err },
		"Set":    func() error { return c.Set(ctx, "k", 1, time.Minute) },
		"Delete": func() error { return c.Delete(ctx, "k") },
		"Exists": func() error { _, err := c.Exists(ctx, "k"); return err },
		"Expire": func() error { _, err := c.Expire(ctx, "k", time.Minute); return err },
	} {
		begin := time.Now()
		err := op()
		if !errors.Is(err, ErrUnavailable) || time.Since(begin) > DefaultTimeout+time.Second {
			t.Errorf("%s with Redis hung = %v after %v; want ErrUnavailable within about Timeout", name, err, time.Since(begin))
		}
	}
	// A caller's own shorter deadline is the caller's: not ErrUnavailable.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := Get[int](short, c, "k2"); err == nil || (errors.Is(err, ErrUnavailable) && !errors.Is(err, redstream.ErrCircuitOpen)) {
		t.Errorf("Get with a 10ms caller deadline = %v, want the caller's DeadlineExceeded (or the open breaker)", err)
	}
}

// TestShortCallerDeadlinesOpenBreaker: callers whose own deadline (50ms) is shorter than
// Timeout get their DeadlineExceeded from a hung server, and those expiries still count
// for the breaker: after Failures of them the breaker opens and, under "load", the next
// callers are answered from the loader at once.
func TestShortCallerDeadlinesOpenBreaker(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	pid := serverPID(t, client)
	cfg := testConfig(t)
	cfg.Timeout = DefaultTimeout
	cfg.OnRedisError = LoadOnError
	c := newCache(t, client, cfg)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	load := func(context.Context) (int, error) { return 1, nil }
	for i := range health.DefaultFailures {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		begin := time.Now()
		_, err := GetOrLoad(ctx, c, "k", DefaultTTL, load)
		cancel()
		t.Logf("call %d: %v after %v; stats %+v", i, err, time.Since(begin), c.Stats())
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("call %d: %v, want the caller's own DeadlineExceeded", i, err)
		}
	}
	if st := c.Stats(); st.Breaker != redstream.BreakerOpen {
		t.Fatalf("after %d expired callers: breaker %v, want open", health.DefaultFailures, st.Breaker)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	v, err := GetOrLoad(ctx, c, "k", DefaultTTL, load)
	if err != nil || v != 1 || time.Since(begin) > 20*time.Millisecond {
		t.Errorf("with the breaker open: %d, %v after %v; want the loader's value at once", v, err, time.Since(begin))
	}
}
