package cache

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/keyslot"
	"github.com/redstream-go/redstream/internal/redistest"
)

// stamp is the value the staleness tests write: a sequence number and when it was written.
type stamp struct {
	Seq int64
	At  int64 // UnixNano
}

// stampWriter rewrites one key with a new stamp every period, through a cache of its own on
// a connection of its own, and remembers when each write was acknowledged.
type stampWriter struct {
	mu    sync.Mutex
	acked map[int64]time.Time // seq -> when Set returned
}

// replacedFor returns how long before at the value with sequence seq had already been
// replaced by a newer acknowledged write (0 if it had not been).
func (w *stampWriter) replacedFor(seq int64, at time.Time) time.Duration {
	w.mu.Lock()
	next, ok := w.acked[seq+1]
	w.mu.Unlock()
	if !ok || !next.Before(at) {
		return 0
	}
	return at.Sub(next)
}

func (w *stampWriter) run(ctx context.Context, t *testing.T, c *Cache, key string, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for seq := int64(1); ; seq++ {
		err := c.Set(ctx, key, stamp{Seq: seq, At: time.Now().UnixNano()}, time.Minute)
		done := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.Errorf("writer: %v", err)
			return
		}
		w.mu.Lock()
		w.acked[seq] = done
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// staleReads is what the readers of a staleness test saw.
type staleReads struct {
	mu                  sync.Mutex
	ok, failed          int64
	violations          int64         // reads whose value had been replaced for longer than the limit
	maxReplaced, maxAge time.Duration // the longest a value read had been replaced, and its age
}

// readLoop reads key through c until ctx ends, checking each value against the writer.
func (r *staleReads) readLoop(ctx context.Context, c *Cache, key string, w *stampWriter, limit time.Duration) {
	for ctx.Err() == nil {
		start := time.Now()
		v, err := Get[stamp](ctx, c, key)
		if err != nil {
			r.mu.Lock()
			r.failed++
			r.mu.Unlock()
			time.Sleep(time.Millisecond) // a breaker fails fast: do not spin
			continue
		}
		replaced := w.replacedFor(v.Seq, start)
		age := time.Since(time.Unix(0, v.At))
		r.mu.Lock()
		r.ok++
		if replaced > limit {
			r.violations++
		}
		r.maxReplaced = max(r.maxReplaced, replaced)
		r.maxAge = max(r.maxAge, age)
		r.mu.Unlock()
		time.Sleep(500 * time.Microsecond)
	}
}

// TestLocalTierBoundedStaleness: with the cache's connections frozen (a proxy that stops
// forwarding in both directions, the server up and still written through another
// connection every 100ms), no read answers with a value that had been replaced for longer
// than ClientSideCache.MaxStaleness plus 100ms, and the refusals show in the metrics;
// before the freeze, for longer than the bound, and after it, hits are answered from memory.
func TestLocalTierBoundedStaleness(t *testing.T) {
	for _, tc := range []struct {
		name        string
		bound, beat time.Duration // 0: the defaults
		frozen      time.Duration // past the bound, short of rueidis's own 10s write timeout
	}{
		{"default bound", 0, 0, DefaultMaxStaleness + 2*time.Second},
		{"1s bound", time.Second, 200 * time.Millisecond, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { testBoundedStaleness(t, tc.bound, tc.beat, tc.frozen) })
	}
}

func testBoundedStaleness(t *testing.T, bound, beat, frozen time.Duration) {
	addr := redistest.Addr(t)
	px := newFreezeProxy(t, addr)
	readerClient := redistest.NewClient(t, px.addr) // closed before the proxy (cleanups run last first)

	cfg := testConfig(t)
	cfg.Timeout = 300 * time.Millisecond
	cfg.ClientSideCache.Enabled = true
	boundLocal(&cfg, bound, beat)
	reader := newCache(t, readerClient, cfg)
	bound = reader.Config().ClientSideCache.MaxStaleness
	if bound == 0 {
		t.Fatal("Config() reports no MaxStaleness")
	}
	limit := bound + 100*time.Millisecond
	wcfg := cfg
	wcfg.Name += "-writer"
	wcfg.ClientSideCache.Enabled = false
	writer := newCache(t, redistest.NewClient(t, addr), wcfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &stampWriter{acked: map[int64]time.Time{}}
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); w.run(ctx, t, writer, "k", 100*time.Millisecond) }()
	defer bg.Wait()
	defer cancel()
	waitFor(t, "the first write", func() bool { _, err := Get[stamp](ctx, writer, "k"); return err == nil })

	phase := func(name string, d time.Duration) *staleReads {
		t.Helper()
		var r staleReads
		pctx, pcancel := context.WithTimeout(ctx, d)
		defer pcancel()
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); r.readLoop(pctx, reader, "k", w, limit) }()
		}
		wg.Wait()
		t.Logf("%s: %d reads answered (%d failed), %d served a value replaced for more than %v; longest replaced %v, oldest value %v",
			name, r.ok, r.failed, r.violations, limit, r.maxReplaced.Round(time.Millisecond), r.maxAge.Round(time.Millisecond))
		return &r
	}

	// Healthy, for longer than the bound: heartbeats keep memory serving.
	before := reader.Stats().LocalHits
	healthy := phase("healthy", bound+500*time.Millisecond)
	st := reader.Stats()
	if healthy.violations != 0 {
		t.Errorf("healthy connection: %d stale reads", healthy.violations)
	}
	if st.LocalHits == before || st.LocalRefused != 0 || st.HeartbeatAge > bound {
		t.Errorf("healthy connection: stats %+v, want hits from memory and none refused", st)
	}

	px.freeze()
	hitsAtFreeze := reader.Stats().LocalHits
	paused := phase("frozen", frozen)
	st = reader.Stats()
	var text strings.Builder
	reader.Metrics().WritePrometheus(&text)
	px.thaw()
	if paused.violations != 0 {
		t.Errorf("frozen connection: %d reads served a value replaced for more than %v (longest %v)",
			paused.violations, limit, paused.maxReplaced)
	}
	// Memory may hold no copy of the key once frozen (on Valkey 8.1 every read of the freeze
	// goes to Redis: the copy is gone when the freeze begins); then there is nothing to
	// refuse, and nothing stale can be served either.
	noCopy := st.LocalHits == hitsAtFreeze && paused.ok == 0
	if noCopy {
		t.Logf("frozen connection: memory held no copy of the key to serve or refuse")
	}
	if (st.LocalRefused == 0 && !noCopy) || st.HeartbeatFailures == 0 || st.HeartbeatAge <= bound {
		t.Errorf("frozen connection: stats %+v, want refused hits, failed heartbeats and an age past %v", st, bound)
	}
	name := `{name="` + cfg.Name + `"} `
	for _, want := range []string{
		metricLocalRefused + name + strconv.FormatUint(st.LocalRefused, 10),
		metricHeartbeatFailures + name,
		metricHeartbeatAge + name,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, text.String())
		}
	}
	if age := metricValue(t, text.String(), metricHeartbeatAge+name); age <= bound.Seconds() {
		t.Errorf("%s = %v, want more than %v", metricHeartbeatAge, age, bound.Seconds())
	}

	// The connection comes back: hits are served from memory again, and fresh.
	waitFor(t, "hits from memory after the thaw", func() bool {
		b := reader.Stats().LocalHits
		_, err := Get[stamp](ctx, reader, "k")
		return err == nil && reader.Stats().LocalHits > b
	})
	after := phase("after the thaw", time.Second)
	if after.violations != 0 {
		t.Errorf("after the thaw: %d stale reads", after.violations)
	}
}

// metricValue returns the value of the sample starting with prefix in a Prometheus text.
func metricValue(t *testing.T, text, prefix string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no sample %q in:\n%s", prefix, text)
	return 0
}

// TestHeartbeatReachesEveryConnection: rueidis spreads client-side cached reads over
// several connections (here PipelineMultiplex 2: four); freezing any single one of them,
// whichever connection the key read is on, stops hits from memory within the bound, and
// thawing it brings them back.
func TestHeartbeatReachesEveryConnection(t *testing.T) {
	const bound, beat = 500 * time.Millisecond, 50 * time.Millisecond
	px := newFreezeProxy(t, redistest.Addr(t))
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{px.addr}, PipelineMultiplex: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	cfg := testConfig(t)
	cfg.Timeout = 200 * time.Millisecond
	cfg.ClientSideCache.Enabled = true
	boundLocal(&cfg, bound, beat)
	c := newCache(t, client, cfg)
	ctx := context.Background()
	if err := c.Set(ctx, "k", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	fromMemory := func() bool {
		b := c.Stats().LocalHits
		_, err := Get[int](ctx, c, "k")
		return err == nil && c.Stats().LocalHits > b
	}
	waitFor(t, "a hit from memory", fromMemory)
	n := px.accepted()
	if n < 4 {
		t.Fatalf("%d connections, want at least the 4 of PipelineMultiplex 2", n)
	}
	for i := range n {
		refused := c.Stats().LocalRefused
		px.freezeConn(i)
		deadline := time.Now().Add(bound + time.Second)
		for c.Stats().LocalRefused == refused {
			if time.Now().After(deadline) {
				px.thawConn(i)
				t.Fatalf("connection %d of %d frozen: hits still served from memory after %v", i, n, bound+time.Second)
			}
			_, _ = Get[int](ctx, c, "k")
			time.Sleep(5 * time.Millisecond)
		}
		px.thawConn(i)
		waitFor(t, "hits from memory after the thaw", fromMemory)
	}
}

// TestHeartbeatStopsOnCloseWhileFrozen: Close returns at once even when a heartbeat waits
// on a silent connection, and its goroutine ends (TestMain checks for leaks).
func TestHeartbeatStopsOnCloseWhileFrozen(t *testing.T) {
	px := newFreezeProxy(t, redistest.Addr(t))
	client := redistest.NewClient(t, px.addr)
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	boundLocal(&cfg, 5*time.Second, 10*time.Millisecond)
	c, err := New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	px.freeze()
	time.Sleep(50 * time.Millisecond) // a heartbeat is now waiting
	start := time.Now()
	c.Close()
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Close took %v with the connection frozen", took)
	}
	px.thaw()
}

// TestHeartbeatKeys: the heartbeat keys' slots, as rueidis computes them, take every value
// modulo heartbeatSlots (so they reach every connection to a server), whatever braces the
// prefix holds; a prefix with a hash tag of its own, which puts every key of the cache in
// one slot, needs one key.
func TestHeartbeatKeys(t *testing.T) {
	b := redistest.Client(t).B()
	for _, tc := range []struct {
		prefix string
		want   int
	}{
		{"cache:", heartbeatSlots},
		{"", heartbeatSlots},
		{"app{", heartbeatSlots}, // the tag runs into the key's own suffix
		{"{}app:", heartbeatSlots},
		{"app:}{", heartbeatSlots},
		{"app:{tenant}:", 1},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			keys := keyspace{prefix: tc.prefix}.heartbeat()
			if len(keys) != tc.want {
				t.Fatalf("%d keys, want %d", len(keys), tc.want)
			}
			seen := map[uint16]bool{}
			for i, k := range keys {
				if !strings.HasPrefix(k, tc.prefix+markerPrefix) {
					t.Errorf("key %q is outside the prefix and the marker prefix", k)
				}
				cmd := b.Get().Key(k).Cache()
				got := keyslot.Of(k)
				if want := cmd.Slot() & (slots - 1); got != want {
					t.Fatalf("keyslot.Of(%q) = %d, rueidis says %d", k, got, want)
				}
				if tc.prefix == "cache:" && got != heartbeatTarget(i) {
					t.Errorf("key %d has slot %d, want %d", i, got, heartbeatTarget(i))
				}
				seen[got%heartbeatSlots] = true
			}
			if len(seen) != tc.want {
				t.Errorf("slots take %d values modulo %d, want %d", len(seen), heartbeatSlots, tc.want)
			}
		})
	}
}

// TestHeartbeatCluster: on a Redis Cluster the heartbeat keeps every node's copies
// serving: no failed heartbeat, no refused hit, hits from memory on keys of every node.
func TestHeartbeatCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	boundLocal(&cfg, 500*time.Millisecond, 50*time.Millisecond)
	c := newCache(t, redistest.ClusterClient(t), cfg)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"} // slots all over the three nodes
	for _, k := range keys {
		if err := c.Set(ctx, k, k, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // twice the bound: only heartbeats keep memory serving
	for _, k := range keys {
		waitFor(t, "a hit from memory on "+k, func() bool {
			b := c.Stats().LocalHits
			v, err := Get[string](ctx, c, k)
			return err == nil && v == k && c.Stats().LocalHits > b
		})
	}
	if st := c.Stats(); st.HeartbeatFailures != 0 || st.LocalRefused != 0 || st.HeartbeatAge > 500*time.Millisecond {
		t.Errorf("stats %+v, want no failed heartbeat and no refused hit", st)
	}
}

// boundLocal sets the staleness bound and the heartbeat interval of client-side caching.
func boundLocal(cfg *Config, bound, beat time.Duration) {
	cfg.ClientSideCache.MaxStaleness, cfg.ClientSideCache.Heartbeat = bound, beat
}

// refusedHits returns the cache's count of hits from memory it refused.
func refusedHits(c *Cache) uint64 { return c.Stats().LocalRefused }

// TestRefusedHitsFollowThePolicy: once the connections have been silent past the bound,
// Get and GetMany do not answer from memory; the reads go to Redis with their deadline and
// fail (on-redis-error "error"), or are answered by the loader (on-redis-error "load").
func TestRefusedHitsFollowThePolicy(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, policy := range []RedisErrorPolicy{ReturnError, LoadOnError} {
		t.Run(string(policy), func(t *testing.T) {
			ctx := context.Background()
			px := newFreezeProxy(t, redistest.Addr(t))
			cfg := testConfig(t)
			cfg.Timeout = 100 * time.Millisecond
			cfg.OnRedisError = policy
			cfg.Breaker.Disabled = true // every refused read reaches Redis
			cfg.ClientSideCache.Enabled = true
			boundLocal(&cfg, bound, 50*time.Millisecond)
			c := newCache(t, redistest.NewClient(t, px.addr), cfg)
			if err := c.Set(ctx, "k", "cached", time.Minute); err != nil {
				t.Fatal(err)
			}
			load := func(context.Context, []string) (map[string]string, error) {
				return map[string]string{"k": "loaded"}, nil
			}
			waitFor(t, "GetMany from memory", func() bool {
				b := c.Stats().LocalHits
				m, err := GetMany(ctx, c, []string{"k"}, DefaultTTL, load)
				return err == nil && m["k"] == "cached" && c.Stats().LocalHits > b
			})
			px.freeze()
			defer px.thaw()
			time.Sleep(bound + 100*time.Millisecond)

			refused := c.Stats().LocalRefused
			start := time.Now()
			m, err := GetMany(ctx, c, []string{"k"}, DefaultTTL, load)
			took := time.Since(start)
			_, gerr := Get[string](ctx, c, "k")
			switch policy {
			case ReturnError:
				if !errors.Is(err, ErrUnavailable) || !errors.Is(gerr, ErrUnavailable) {
					t.Errorf("GetMany = %v, %v; Get: %v; want ErrUnavailable errors", m, err, gerr)
				}
			case LoadOnError:
				if err != nil || m["k"] != "loaded" {
					t.Errorf("GetMany = %v, %v; want the loader's value", m, err)
				}
			}
			if took > 10*cfg.Timeout {
				t.Errorf("GetMany took %v, want about Timeout (%v)", took, cfg.Timeout)
			}
			if got := c.Stats().LocalRefused; got < refused+2 {
				t.Errorf("LocalRefused = %d, want %d+2 (GetMany and Get)", got, refused)
			}
		})
	}
}
