package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// countingLoader is a BatchLoader over a fixed source that counts the loads of each key.
type countingLoader struct {
	mu    sync.Mutex
	src   map[string]int
	calls [][]string
	loads map[string]int
	delay time.Duration
}

func newCountingLoader(src map[string]int) *countingLoader {
	return &countingLoader{src: src, loads: map[string]int{}}
}

func (l *countingLoader) load(ctx context.Context, keys []string) (map[string]int, error) {
	time.Sleep(l.delay)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, slices.Clone(keys))
	out := map[string]int{}
	for _, k := range keys {
		l.loads[k]++
		if v, ok := l.src[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (l *countingLoader) callsString() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.calls)
}

func TestGetMany(t *testing.T) {
	for _, mode := range []string{"round trips", "client-side cache", "sliding", "client-side sliding", "no breakdown protection"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			client := redistest.Client(t)
			cfg := testConfig(t)
			cfg.ClientSideCache.Enabled = strings.Contains(mode, "client-side")
			cfg.SlidingExpiration = strings.Contains(mode, "sliding")
			cfg.Breakdown.Enabled = mode != "no breakdown protection"
			c := newCache(t, client, cfg)
			if err := c.Set(ctx, "a", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := c.Set(ctx, "b", 2, time.Minute); err != nil {
				t.Fatal(err)
			}
			l := newCountingLoader(map[string]int{"c": 3, "e": 5})
			got, err := GetMany(ctx, c, []string{"a", "b", "c", "d", "a", "e"}, DefaultTTL, l.load)
			want := map[string]int{"a": 1, "b": 2, "c": 3, "e": 5}
			if err != nil || !maps.Equal(got, want) {
				t.Fatalf("GetMany = %v, %v; want %v", got, err, want)
			}
			if calls := l.callsString(); calls != "[[c d e]]" {
				t.Errorf("loader calls %s, want one call with the misses in order [[c d e]]", calls)
			}
			// c and e are cached, d holds a null marker.
			if s, _ := raw(t, client, c.Key("c")); s != "3" {
				t.Errorf("c holds %q, want 3", s)
			}
			if s, _ := raw(t, client, c.Key("d")); s != nullMarker {
				t.Errorf("d holds %q, want the null marker", s)
			}
			if ms := pttl(t, client, c.Key("e")); ms < time.Hour.Milliseconds()-5000 {
				t.Errorf("e's TTL %dms, want DefaultTTL", ms)
			}
			for range 3 {
				got, err = GetMany(ctx, c, []string{"e", "d", "c", "b", "a"}, DefaultTTL, l.load)
				if err != nil || !maps.Equal(got, want) {
					t.Fatalf("GetMany again = %v, %v; want %v", got, err, want)
				}
			}
			if calls := l.callsString(); calls != "[[c d e]]" {
				t.Errorf("loader calls %s after cached reads, want still one", calls)
			}
			st := c.Stats()
			if st.Hits != 2+3*4 || st.NullHits != 3 || st.Misses != 3 || st.Loads != 1 {
				t.Errorf("stats %+v, want 14 hits, 3 null hits, 3 misses, 1 load", st)
			}
			if cfg.ClientSideCache.Enabled && st.LocalHits == 0 {
				t.Errorf("no read answered from memory: %+v", st)
			}
			// Read-your-writes under client-side caching: a Set right before is seen.
			if err := c.Set(ctx, "a", 10, time.Minute); err != nil {
				t.Fatal(err)
			}
			got, err = GetMany(ctx, c, []string{"a"}, DefaultTTL, l.load)
			if err != nil || got["a"] != 10 {
				t.Errorf("GetMany after Set = %v, %v; want a=10", got, err)
			}
			if cfg.SlidingExpiration && !cfg.ClientSideCache.Enabled {
				if err := c.Set(ctx, "short", 1, 2*time.Second); err != nil {
					t.Fatal(err)
				}
				if _, err := GetMany(ctx, c, []string{"short"}, DefaultTTL, l.load); err != nil {
					t.Fatal(err)
				}
				if ms := pttl(t, client, c.Key("short")); ms < time.Hour.Milliseconds()-5000 {
					t.Errorf("a sliding GetMany left the TTL at %dms, want it renewed to DefaultTTL", ms)
				}
			}
		})
	}
}

func TestGetManyBadInput(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, redistest.Client(t), testConfig(t))
	l := newCountingLoader(nil)
	for name, call := range map[string]func() error{
		"empty key":  func() error { _, err := GetMany(ctx, c, []string{"a", ""}, DefaultTTL, l.load); return err },
		"nil loader": func() error { _, err := GetMany[int](ctx, c, []string{"a"}, DefaultTTL, nil); return err },
		"zero ttl":   func() error { _, err := GetMany(ctx, c, []string{"a"}, 0, l.load); return err },
	} {
		if err := call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if got, err := GetMany(ctx, c, nil, DefaultTTL, l.load); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no keys: %v, %v; want an empty map", got, err)
	}
	if err := c.Set(ctx, "bad", "not an int", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := GetMany(ctx, c, []string{"bad"}, DefaultTTL, l.load); !errors.Is(err, ErrDecode) {
		t.Errorf("undecodable hit: %v, want ErrDecode", err)
	}
	c.Close()
	if _, err := GetMany(ctx, c, []string{"a"}, DefaultTTL, l.load); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// TestGetManyLoaderFailure: a loader error or panic caches nothing and releases every lock.
func TestGetManyLoaderFailure(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	boom := errors.New("db down")
	if _, err := GetMany(ctx, c, []string{"x", "y"}, DefaultTTL, func(context.Context, []string) (map[string]int, error) {
		return nil, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the loader's", err)
	}
	for _, k := range []string{"x", "y"} {
		if s, ok := raw(t, client, c.Key(k)); ok {
			t.Errorf("%s holds %q after a failed load, want nothing", k, s)
		}
	}
	func() {
		defer func() {
			if p := recover(); p != "loader panic" {
				t.Errorf("recovered %v, want the loader's panic", p)
			}
		}()
		_, _ = GetMany(ctx, c, []string{"x", "y"}, DefaultTTL, func(context.Context, []string) (map[string]int, error) {
			panic("loader panic")
		})
	}()
	for _, k := range []string{"x", "y"} {
		if s, ok := raw(t, client, c.Key(k)); ok {
			t.Errorf("%s holds %q after a panicked load, want nothing", k, s)
		}
	}
	// Not found for all.
	got, err := GetMany(ctx, c, []string{"x", "y"}, DefaultTTL, func(context.Context, []string) (map[string]int, error) {
		return nil, fmt.Errorf("none: %w", ErrNotFound)
	})
	if err != nil || len(got) != 0 {
		t.Fatalf("ErrNotFound loader: %v, %v", got, err)
	}
	if s, _ := raw(t, client, c.Key("y")); s != nullMarker {
		t.Errorf("y holds %q, want the null marker", s)
	}
}

// TestGetManyWaitsForOtherProcess: a key whose lock another process holds is waited for
// (its value is taken when the owner writes it) while the other misses are loaded at once;
// a lock whose owner never finishes is loaded alone after WaitTimeout, uncached.
func TestGetManyWaitsForOtherProcess(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.Breakdown.WaitTimeout = 500 * time.Millisecond
	owner := newCache(t, redistest.Client(t), cfg)
	c := newCache(t, client, cfg)
	release := make(chan struct{})
	_, out := holdLock(t, owner, client, "held", `"owner's"`, release)
	// A placeholder nobody will fill, as from a crashed process.
	if err := client.Do(ctx, client.B().Set().Key(c.Key("stuck")).Value(lockPrefix+"crashed").Px(time.Minute).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); close(release) }()
	var mu sync.Mutex
	var calls [][]string
	begin := time.Now()
	got, err := GetMany(ctx, c, []string{"held", "free", "stuck"}, DefaultTTL, func(_ context.Context, keys []string) (map[string]string, error) {
		mu.Lock()
		calls = append(calls, slices.Clone(keys))
		mu.Unlock()
		m := map[string]string{}
		for _, k := range keys {
			m[k] = "mine-" + k
		}
		return m, nil
	})
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"held": `"owner's"`, "free": "mine-free", "stuck": "mine-stuck"}
	if !maps.Equal(got, want) {
		t.Errorf("GetMany = %v, want %v", got, want)
	}
	if v := <-out; v != `"owner's"` {
		t.Errorf("owner got %q", v)
	}
	sort.Slice(calls, func(i, j int) bool { return fmt.Sprint(calls[i]) < fmt.Sprint(calls[j]) })
	if fmt.Sprint(calls) != "[[free] [stuck]]" {
		t.Errorf("loader calls %v, want [free] at once and [stuck] after the wait", calls)
	}
	if took < cfg.Breakdown.WaitTimeout {
		t.Errorf("returned after %v, before the wait timeout", took)
	}
	if st := c.Stats(); st.LockWaits != 2 || st.Degraded != 1 {
		t.Errorf("stats %+v, want 2 lock waits and 1 degraded load", st)
	}
	if s, _ := raw(t, client, c.Key("stuck")); s != lockPrefix+"crashed" {
		t.Errorf("stuck holds %q: a degraded load must not overwrite the lock", s)
	}
}

// TestGetManyStampede: GetMany and GetOrLoad calls on overlapping keys from two processes
// at once load every key exactly once.
func TestGetManyStampede(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	caches := []*Cache{newCache(t, redistest.Client(t), cfg), newCache(t, redistest.Client(t), cfg)}
	src := map[string]int{}
	var keys []string
	for i := range 40 {
		k := fmt.Sprintf("k%d", i)
		src[k] = i
		keys = append(keys, k)
	}
	l := newCountingLoader(src)
	l.delay = 30 * time.Millisecond
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := caches[g%2]
			if g%3 == 2 {
				k := keys[g]
				v, err := GetOrLoad(ctx, c, k, DefaultTTL, func(ctx context.Context) (int, error) {
					m, err := l.load(ctx, []string{k})
					return m[k], err
				})
				if err != nil || v != src[k] {
					bad.Add(1)
					t.Errorf("GetOrLoad(%s) = %d, %v", k, v, err)
				}
				return
			}
			sub := keys[g : g+16]
			got, err := GetMany(ctx, c, sub, DefaultTTL, l.load)
			if err != nil || len(got) != len(sub) {
				bad.Add(1)
				t.Errorf("GetMany = %d values, %v", len(got), err)
				return
			}
			for _, k := range sub {
				if got[k] != src[k] {
					t.Errorf("GetMany[%s] = %d, want %d", k, got[k], src[k])
				}
			}
		}()
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.loads {
		if n != 1 {
			t.Errorf("%s loaded %d times, want 1", k, n)
		}
	}
	t.Logf("%d loader calls for %d keys", len(l.calls), len(l.loads))
}

// TestGetManyCluster: on the real 3-master cluster, keys spread over every node (and keys
// with hash tags and braces) are read with one MGET per slot, loaded and cached.
func TestGetManyCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	for _, clientSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("client-side=%v", clientSide), func(t *testing.T) {
			ctx := context.Background()
			client := redistest.ClusterClient(t)
			cfg := testConfig(t)
			cfg.ClientSideCache.Enabled = clientSide
			c := newCache(t, client, cfg)
			src := map[string]int{}
			var keys []string
			for i := range 60 {
				k := fmt.Sprintf("user:%d", i)
				if i%10 == 0 {
					k = fmt.Sprintf("{tag}:%d", i) // several keys in one slot: one MGET for them
				}
				src[k] = i
				keys = append(keys, k)
			}
			keys = append(keys, "}{", "{", "bin\x00\xff")
			nodes := map[string]bool{}
			for _, k := range keys {
				nodes[nodeOf(t, client, c.Key(k))] = true
			}
			if len(nodes) < 3 {
				t.Fatalf("the keys fall on %d nodes, want all 3", len(nodes))
			}
			l := newCountingLoader(src)
			got, err := GetMany(ctx, c, keys, DefaultTTL, l.load)
			if err != nil || !maps.Equal(got, src) {
				t.Fatalf("GetMany = %d values, %v; want %d", len(got), err, len(src))
			}
			for range 2 {
				got, err = GetMany(ctx, c, keys, DefaultTTL, l.load)
				if err != nil || !maps.Equal(got, src) {
					t.Fatalf("GetMany again = %d values, %v", len(got), err)
				}
			}
			if len(l.calls) != 1 {
				t.Errorf("%d loader calls, want 1", len(l.calls))
			}
			if st := c.Stats(); st.Hits != 2*60 || st.NullHits != 2*3 {
				t.Errorf("stats %+v, want 120 hits and 6 null hits", st)
			}
		})
	}
}

// nodeOf returns the address of the cluster node serving key.
func nodeOf(t *testing.T, client rueidis.Client, key string) string {
	t.Helper()
	slot, err := client.Do(context.Background(), client.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := client.Do(context.Background(), client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		f, _ := sh.ToArray()
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		if slot >= lo && slot <= hi {
			node, _ := f[2].ToArray()
			port, _ := node[1].AsInt64()
			return fmt.Sprint(port)
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return ""
}

// TestGetManyLarge: a batch of 20,000 keys on a healthy server, with the default 100ms
// Timeout, is loaded and read back: its round trips get a deadline that grows with the
// batch (Timeout per 1000 keys), so a big batch is not taken for an outage.
func TestGetManyLarge(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Timeout = DefaultTimeout
	c := newCache(t, redistest.Client(t), cfg)
	keys := make([]string, 20000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	value := strings.Repeat("x", 100)
	for round := range 2 {
		begin := time.Now()
		got, err := GetMany(ctx, c, keys, DefaultTTL, func(_ context.Context, ks []string) (map[string]string, error) {
			if round > 0 {
				t.Errorf("round %d loaded %d keys", round, len(ks))
			}
			m := make(map[string]string, len(ks))
			for _, k := range ks {
				m[k] = value
			}
			return m, nil
		})
		if err != nil || len(got) != len(keys) {
			t.Fatalf("round %d: %d values, %v", round, len(got), err)
		}
		t.Logf("round %d (%s): %v", round, []string{"load", "read"}[round], time.Since(begin).Round(time.Millisecond))
	}
	if st := c.Stats(); st.RedisErrors != 0 || st.Breaker != 0 {
		t.Errorf("stats %+v: a large batch counted as a Redis failure", st)
	}
}

// TestGetManyAfterScriptFlush: scripts missing on the server (a restart, SCRIPT FLUSH) are
// loaded again by the batch pipelines.
func TestGetManyAfterScriptFlush(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.SlidingExpiration = true
	c := newCache(t, client, cfg)
	l := newCountingLoader(map[string]int{"a": 1, "b": 2})
	for round := range 2 {
		if err := client.Do(ctx, client.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		got, err := GetMany(ctx, c, []string{"a", "b"}, DefaultTTL, l.load)
		if err != nil || got["a"] != 1 || got["b"] != 2 {
			t.Fatalf("round %d after SCRIPT FLUSH: %v, %v", round, got, err)
		}
	}
	if calls := l.callsString(); calls != "[[a b]]" {
		t.Errorf("loader calls %s, want one", calls)
	}
}
