package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// waitFor polls cond every 5ms until it holds, failing the test after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdLock starts a GetOrLoad on c whose loader blocks until release is closed, and waits
// until the key holds its lock placeholder. It returns the placeholder and a channel
// receiving the call's outcome.
func holdLock(t *testing.T, c *Cache, client rueidis.Client, key, value string, release <-chan struct{}) (string, <-chan string) {
	t.Helper()
	out := make(chan string, 1)
	go func() {
		v, err := GetOrLoad(context.Background(), c, key, DefaultTTL, func(context.Context) (string, error) {
			<-release
			return value, nil
		})
		if err != nil {
			v = "error: " + err.Error()
		}
		out <- v
	}()
	var placeholder string
	waitFor(t, "the lock placeholder", func() bool {
		s, ok := raw(t, client, c.Key(key))
		placeholder = s
		return ok && classify(s) == kindLocked
	})
	return placeholder, out
}

func TestStampedeFourClients(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clientSide bool
	}{
		{"round trips", false},
		{"client-side cache", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.ClientSideCache.Enabled = tc.clientSide
			const clients, perClient = 4, 50
			caches := make([]*Cache, clients)
			for i := range caches {
				caches[i] = newCache(t, redistest.Client(t), cfg)
			}
			var loads atomic.Int64
			loader := func(ctx context.Context) (user, error) {
				loads.Add(1)
				time.Sleep(100 * time.Millisecond) // a slow source: everyone else arrives meanwhile
				return user{ID: 7, Name: "grace"}, nil
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, clients*perClient)
			for i := range clients * perClient {
				wg.Add(1)
				go func(c *Cache) {
					defer wg.Done()
					<-start
					u, err := GetOrLoad(context.Background(), c, "hot", DefaultTTL, loader)
					if err == nil && u.Name != "grace" {
						err = fmt.Errorf("got %+v", u)
					}
					if err != nil {
						errs <- err
					}
				}(caches[i%clients])
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("GetOrLoad: %v", err)
			}
			if got := loads.Load(); got != 1 {
				t.Fatalf("the loader ran %d times for 200 concurrent calls from 4 clients, want 1", got)
			}
			var total Stats
			for _, c := range caches {
				s := c.Stats()
				total.Loads += s.Loads
				total.Degraded += s.Degraded
				total.LockWaits += s.LockWaits
			}
			if total.Loads != 1 || total.Degraded != 0 {
				t.Errorf("stats over the 4 caches: %+v, want 1 load and no degraded load", total)
			}
			// Everyone now hits.
			for _, c := range caches {
				if u, err := GetOrLoad(context.Background(), c, "hot", DefaultTTL, loader); err != nil || u.ID != 7 {
					t.Errorf("later call = %+v, %v", u, err)
				}
			}
			if got := loads.Load(); got != 1 {
				t.Errorf("the loader ran again on a hit: %d", got)
			}
		})
	}
}

func TestNullMarkerExpiry(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.NullTTL = 300 * time.Millisecond
	c := newCache(t, client, cfg)

	var loads atomic.Int64
	exists := atomic.Bool{}
	loader := func(context.Context) (user, error) {
		loads.Add(1)
		if !exists.Load() {
			return user{}, fmt.Errorf("user 42: %w", ErrNotFound)
		}
		return user{ID: 42}, nil
	}
	for i := range 3 {
		if _, err := GetOrLoad(ctx, c, "u42", time.Minute, loader); !errors.Is(err, ErrNotFound) {
			t.Fatalf("call %d: err = %v, want ErrNotFound", i, err)
		}
	}
	if got := loads.Load(); got != 1 {
		t.Fatalf("loader ran %d times, want 1 (later calls hit the null marker)", got)
	}
	if s, _ := raw(t, client, c.Key("u42")); s != nullMarker {
		t.Fatalf("Redis holds %q, want the null marker", s)
	}
	if got := pttl(t, client, c.Key("u42")); got <= 0 || got > 300 {
		t.Errorf("null marker PTTL = %dms, want in (0, 300]", got)
	}
	if _, err := Get[user](ctx, c, "u42"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a null marker: %v, want ErrNotFound", err)
	}
	if ok, _ := c.Exists(ctx, "u42"); !ok {
		t.Error("Exists of a null marker = false, want true (it is a cached not-found)")
	}
	if st := c.Stats(); st.NullHits != 3 || st.Misses != 1 {
		t.Errorf("stats = %+v, want 3 null hits (2 GetOrLoad + Get) and 1 miss", st)
	}

	exists.Store(true)
	waitFor(t, "the null marker to expire", func() bool { _, ok := raw(t, client, c.Key("u42")); return !ok })
	u, err := GetOrLoad(ctx, c, "u42", time.Minute, loader)
	if err != nil || u.ID != 42 || loads.Load() != 2 {
		t.Fatalf("after expiry: %+v, %v, loads %d; want the loaded value and a second load", u, err, loads.Load())
	}
}

func TestLoaderErrorNotCached(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	boom := errors.New("db down")
	var loads atomic.Int64
	release := make(chan struct{})
	loader := func(context.Context) (int, error) {
		loads.Add(1)
		<-release
		return 0, boom
	}
	const callers = 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := GetOrLoad(ctx, c, "k", DefaultTTL, loader)
			errs <- err
		}()
	}
	waitFor(t, "the load to start", func() bool { return loads.Load() == 1 })
	time.Sleep(20 * time.Millisecond) // let the others join the flight
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("caller got %v, want the loader's error", err)
		}
	}
	if _, ok := raw(t, client, c.Key("k")); ok {
		t.Fatal("a loader error left the key (lock or marker) in Redis")
	}
	if st := c.Stats(); int64(st.LoadErrors) != loads.Load() {
		t.Errorf("load errors = %d, loads = %d", st.LoadErrors, loads.Load())
	}
	before := loads.Load()
	if _, err := GetOrLoad(ctx, c, "k", DefaultTTL, loader); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if loads.Load() != before+1 {
		t.Error("the error was cached: the next call did not load")
	}
}

func TestLockExpiresWhenLoaderHangs(t *testing.T) {
	clientA, clientB := redistest.Client(t), redistest.Client(t)
	cfg := testConfig(t)
	cfg.Breakdown.LockTTL = 300 * time.Millisecond
	cfg.Breakdown.WaitTimeout = 10 * time.Second
	cfg.Breakdown.WaitInterval = 20 * time.Millisecond
	a, b := newCache(t, clientA, cfg), newCache(t, clientB, cfg)

	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	_, outA := holdLock(t, a, clientA, "k", "from-a", release)

	v, err := GetOrLoad(context.Background(), b, "k", DefaultTTL, func(context.Context) (string, error) { return "from-b", nil })
	if err != nil || v != "from-b" {
		t.Fatalf("B = %q, %v; want B to take the expired lock over and load", v, err)
	}
	if st := b.Stats(); st.Degraded != 0 || st.LockWaits != 1 || st.Loads != 1 {
		t.Errorf("B stats = %+v, want one wait, one load, no degraded load", st)
	}
	close(release)
	if got := <-outA; got != "from-a" {
		t.Errorf("A = %q, want its own loaded value", got)
	}
	if s, _ := raw(t, clientA, a.Key("k")); s != `"from-b"` {
		t.Errorf("Redis holds %q; A's late result must not replace B's", s)
	}
}

func TestDegradeAfterWaitTimeout(t *testing.T) {
	clientA, clientB := redistest.Client(t), redistest.Client(t)
	cfg := testConfig(t)
	cfg.Breakdown.WaitTimeout = 150 * time.Millisecond
	cfg.Breakdown.WaitInterval = 20 * time.Millisecond
	a, b := newCache(t, clientA, cfg), newCache(t, clientB, cfg)

	release := make(chan struct{})
	placeholder, outA := holdLock(t, a, clientA, "k", "from-a", release)

	v, err := GetOrLoad(context.Background(), b, "k", DefaultTTL, func(context.Context) (string, error) { return "from-b", nil })
	if err != nil || v != "from-b" {
		t.Fatalf("B = %q, %v; want a degraded load", v, err)
	}
	if st := b.Stats(); st.Degraded != 1 || st.Loads != 1 || st.LockWaits != 1 {
		t.Errorf("B stats = %+v, want one degraded load", st)
	}
	if s, _ := raw(t, clientB, b.Key("k")); s != placeholder {
		t.Errorf("after the degraded load Redis holds %q, want A's lock untouched", s)
	}
	close(release)
	if got := <-outA; got != "from-a" {
		t.Errorf("A = %q", got)
	}
	if s, _ := raw(t, clientA, a.Key("k")); s != `"from-a"` {
		t.Errorf("Redis holds %q, want A's value", s)
	}
}

func TestLockNotReleasedByNonOwner(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	release := make(chan struct{})
	placeholder, out := holdLock(t, c, client, "k", "mine", release)
	rk := c.Key("k")

	for _, tc := range []struct {
		name   string
		script *rueidis.Lua
		args   []string
	}{
		{"unlock with another token", unlockScript, []string{lockPrefix + "intruder"}},
		{"unlock with a value", unlockScript, []string{`"mine"`}},
		{"fill with another token", fillScript, []string{lockPrefix + "intruder", `"theirs"`, "60000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.script.Exec(ctx, client, []string{rk}, tc.args).AsInt64()
			if err != nil || n != 0 {
				t.Fatalf("reply = %d, %v; want 0", n, err)
			}
			if s, _ := raw(t, client, rk); s != placeholder {
				t.Fatalf("key holds %q, want the owner's placeholder", s)
			}
		})
	}
	// A Delete by anyone is an invalidation, not an unlock: the owner's result is not cached.
	if err := c.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if got := <-out; got != "mine" {
		t.Errorf("owner got %q", got)
	}
	if s, ok := raw(t, client, rk); ok {
		t.Errorf("a load whose key was deleted meanwhile cached %q", s)
	}
	// The owner's own release works.
	if err := client.Do(ctx, client.B().Set().Key(rk).Value(placeholder).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, err := unlockScript.Exec(ctx, client, []string{rk}, []string{placeholder}).AsInt64(); err != nil || n != 1 {
		t.Errorf("owner unlock = %d, %v; want 1", n, err)
	}
}

func TestLoaderPanicReleasesLock(t *testing.T) {
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Errorf("recovered %v, want the loader's panic", p)
			}
		}()
		_, _ = GetOrLoad(context.Background(), c, "k", DefaultTTL, func(context.Context) (int, error) { panic("kaboom") })
	}()
	if _, ok := raw(t, client, c.Key("k")); ok {
		t.Error("the panicking loader's lock was not released")
	}
	if st := c.Stats(); st.LoadErrors != 1 {
		t.Errorf("load errors = %d, want 1", st.LoadErrors)
	}
	if v, err := GetOrLoad(context.Background(), c, "k", DefaultTTL, func(context.Context) (int, error) { return 5, nil }); err != nil || v != 5 {
		t.Errorf("after the panic: %d, %v", v, err)
	}
}

func TestFollowerOutlivesCancelledLeader(t *testing.T) {
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	leaderCtx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	leaderErr := make(chan error, 1)
	go func() {
		_, err := GetOrLoad(leaderCtx, c, "k", DefaultTTL, func(ctx context.Context) (string, error) {
			close(started)
			<-ctx.Done()
			return "", ctx.Err()
		})
		leaderErr <- err
	}()
	<-started
	followerOut := make(chan string, 1)
	go func() {
		v, err := GetOrLoad(context.Background(), c, "k", DefaultTTL, func(context.Context) (string, error) { return "follower", nil })
		if err != nil {
			v = err.Error()
		}
		followerOut <- v
	}()
	time.Sleep(30 * time.Millisecond) // let the follower join the leader's flight
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("leader err = %v, want context.Canceled", err)
	}
	if got := <-followerOut; got != "follower" {
		t.Errorf("follower got %q, want its own load after the leader gave up", got)
	}
}

func TestBreakdownDisabled(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.Breakdown.Enabled = false
	c := newCache(t, client, cfg)
	v, err := GetOrLoad(ctx, c, "k", time.Minute, func(context.Context) (string, error) { return "v", nil })
	if err != nil || v != "v" {
		t.Fatalf("GetOrLoad = %q, %v", v, err)
	}
	if s, _ := raw(t, client, c.Key("k")); s != `"v"` {
		t.Errorf("Redis holds %q", s)
	}
	if _, err := GetOrLoad(ctx, c, "n", time.Minute, func(context.Context) (string, error) { return "", ErrNotFound }); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if s, _ := raw(t, client, c.Key("n")); s != nullMarker {
		t.Errorf("Redis holds %q, want the null marker", s)
	}
}

func TestMetricsExposition(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.Name = `orders "eu"`
	c := newCache(t, client, cfg)
	if _, err := GetOrLoad(ctx, c, "k", DefaultTTL, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := GetOrLoad(ctx, c, "k", DefaultTTL, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	c.Metrics().WritePrometheus(&b)
	out := b.String()
	for _, want := range []string{
		`redis_cache_hits_total{name="orders \"eu\""} 1`,
		`redis_cache_misses_total{name="orders \"eu\""} 1`,
		`redis_cache_loads_total{name="orders \"eu\""} 1`,
		`redis_cache_load_errors_total{name="orders \"eu\""} 0`,
		`redis_cache_null_hits_total{`, `redis_cache_local_hits_total{`,
		`redis_cache_lock_waits_total{`, `redis_cache_degraded_loads_total{`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
}
