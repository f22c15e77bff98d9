package cache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// seenToken waits until c reads tag's token as want (another process's invalidation
// message has reached it) and returns how long that took.
func seenToken(t *testing.T, c *Cache, tag string, changedFrom string) time.Duration {
	t.Helper()
	begin := time.Now()
	for {
		tokens, err := c.tagTokens(context.Background(), []string{tag})
		if err != nil {
			t.Fatalf("tagTokens(%q): %v", tag, err)
		}
		if tokens[0] != changedFrom {
			return time.Since(begin)
		}
		if time.Since(begin) > c.cfg.ClientSideCache.MaxStaleness+time.Second {
			t.Fatalf("tag %q: token unchanged %v after InvalidateTag, want within MaxStaleness %v", tag, time.Since(begin), c.cfg.ClientSideCache.MaxStaleness)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTags: entries tagged through Set, GetOrLoad and GetMany become misses for every read
// path, in the process that invalidated and in another one, after one InvalidateTag;
// entries without the tag stay.
func TestTags(t *testing.T) {
	ctx := context.Background()
	for _, clientSide := range []bool{false, true} {
		t.Run(fmt.Sprintf("client-side=%v", clientSide), func(t *testing.T) {
			srv := redistest.NewServer(t)
			cfg := testConfig(t)
			cfg.ClientSideCache.Enabled = clientSide
			a := newCache(t, redistest.NewClient(t, srv.Addr), cfg)
			b := newCache(t, redistest.NewClient(t, srv.Addr), cfg)
			var gen atomic.Int64
			var loads atomic.Int64
			load := func(context.Context) (string, error) {
				loads.Add(1)
				return "v" + strconv.FormatInt(gen.Load(), 10), nil
			}
			batch := func(_ context.Context, keys []string) (map[string]string, error) {
				out := map[string]string{}
				for _, k := range keys {
					loads.Add(1)
					out[k] = "v" + strconv.FormatInt(gen.Load(), 10)
				}
				return out, nil
			}
			if err := a.Set(ctx, "set", "v0", time.Minute, Tags("t1", "t2")); err != nil {
				t.Fatal(err)
			}
			if _, err := GetOrLoad(ctx, a, "gol", time.Minute, load, Tags("t1")); err != nil {
				t.Fatal(err)
			}
			if _, err := GetMany(ctx, a, []string{"m1", "m2"}, time.Minute, batch, Tags("t1")); err != nil {
				t.Fatal(err)
			}
			if _, err := GetOrLoad(ctx, a, "other", time.Minute, load, Tags("t2")); err != nil {
				t.Fatal(err)
			}
			if err := a.Set(ctx, "plain", "v0", time.Minute); err != nil {
				t.Fatal(err)
			}
			// Every reader sees the values before the invalidation (b warms its tag copies).
			for _, c := range []*Cache{a, b} {
				for _, k := range []string{"set", "gol", "m1", "m2", "other", "plain"} {
					if v, err := Get[string](ctx, c, k); err != nil || v != "v0" {
						t.Fatalf("Get(%s) before the invalidation = %q, %v", k, v, err)
					}
				}
			}
			before, err := b.tagTokens(ctx, []string{"t1"})
			if err != nil {
				t.Fatal(err)
			}
			gen.Store(1)
			if err := a.InvalidateTag(ctx, "t1"); err != nil {
				t.Fatal(err)
			}
			t.Logf("the other process saw the new token after %v", seenToken(t, b, "t1", before[0]))
			// a: Get misses, Exists says no.
			if _, err := Get[string](ctx, a, "set"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(set) after InvalidateTag(t1) = %v, want ErrNotFound", err)
			}
			if ok, err := a.Exists(ctx, "gol"); ok || err != nil {
				t.Errorf("Exists(gol) = %v, %v; want false", ok, err)
			}
			// b: GetOrLoad and GetMany reload; untagged and other-tag entries stay.
			loads.Store(0)
			if v, err := GetOrLoad(ctx, b, "gol", time.Minute, load, Tags("t1")); err != nil || v != "v1" {
				t.Errorf("GetOrLoad(gol) = %q, %v; want the reloaded v1", v, err)
			}
			m, err := GetMany(ctx, b, []string{"m1", "m2", "other", "plain"}, time.Minute, batch, Tags("t1"))
			if err != nil || m["m1"] != "v1" || m["m2"] != "v1" || m["other"] != "v0" || m["plain"] != "v0" {
				t.Errorf("GetMany = %v, %v; want m1, m2 reloaded (v1), other and plain kept (v0)", m, err)
			}
			if n := loads.Load(); n != 3 {
				t.Errorf("%d loads after the invalidation, want 3 (gol, m1, m2)", n)
			}
			// The reloaded entries carry the new token: hits again, in both processes.
			for _, c := range []*Cache{a, b} {
				for _, k := range []string{"gol", "m1", "m2"} {
					if v, err := Get[string](ctx, c, k); err != nil || v != "v1" {
						t.Errorf("Get(%s) after the reload = %q, %v; want v1", k, v, err)
					}
				}
			}
			// The invalidated Set entry was deleted by the first read that found it.
			if _, ok := raw(t, a.client, a.Key("set")); ok {
				t.Errorf("the invalidated entry is still in Redis")
			}
			// t2 still holds for "other".
			if err := b.InvalidateTag(ctx, "t2"); err != nil {
				t.Fatal(err)
			}
			if _, err := Get[string](ctx, b, "other"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(other) after InvalidateTag(t2) = %v, want ErrNotFound", err)
			}
			if v, err := Get[string](ctx, b, "plain"); err != nil || v != "v0" {
				t.Errorf("Get(plain) = %q, %v; an untagged entry must stay", v, err)
			}
		})
	}
}

// TestTagsInvalidArguments: empty tags and too many tags are ErrInvalidArgument.
func TestTagsInvalidArguments(t *testing.T) {
	c := newCache(t, redistest.Client(t), testConfig(t))
	ctx := context.Background()
	many := make([]string, maxTags+1)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	load := func(context.Context) (int, error) { return 1, nil }
	for name, err := range map[string]error{
		"InvalidateTag empty": c.InvalidateTag(ctx, ""),
		"Set empty tag":       c.Set(ctx, "k", 1, time.Minute, Tags("a", "")),
		"Set too many tags":   c.Set(ctx, "k", 1, time.Minute, Tags(many...)),
		"GetOrLoad empty tag": func() error { _, err := GetOrLoad(ctx, c, "k", time.Minute, load, Tags("")); return err }(),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestTagInvalidationDuringLoad: an InvalidateTag while a load runs invalidates the loaded
// value (the tokens are read before the load), so a value read from the source before the
// invalidation is not served after it.
func TestTagInvalidationDuringLoad(t *testing.T) {
	c := newCache(t, redistest.Client(t), testConfig(t))
	ctx := context.Background()
	if _, err := GetOrLoad(ctx, c, "k", time.Minute, func(context.Context) (string, error) {
		if err := c.InvalidateTag(ctx, "t"); err != nil {
			t.Error(err)
		}
		return "old", nil
	}, Tags("t")); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[string](ctx, c, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after an invalidation during the load = %v, want ErrNotFound", err)
	}
}

// TestTagsEvictedTagKey: a tag key lost (evicted, flushed) invalidates its entries rather
// than reviving them.
func TestTagsEvictedTagKey(t *testing.T) {
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	ctx := context.Background()
	if err := c.InvalidateTag(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", 1, time.Minute, Tags("t")); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, client.B().Del().Key(c.keys.tag("t")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	c.tagOwn.note(c.keys.tag("t"), "", true) // this process's copy is then read again
	if _, err := Get[int](ctx, c, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after the tag key was lost = %v, want ErrNotFound", err)
	}
}

// TestTagsFailSafe: an entry invalidated by its tag stays the last known value: served
// stale when its reload fails.
func TestTagsFailSafe(t *testing.T) {
	cfg := testConfig(t)
	cfg.FailSafe.Enabled = true
	c := newCache(t, redistest.Client(t), cfg)
	ctx := context.Background()
	if _, err := GetOrLoad(ctx, c, "k", time.Minute, func(context.Context) (int, error) { return 7, nil }, Tags("t")); err != nil {
		t.Fatal(err)
	}
	if err := c.InvalidateTag(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	var stale bool
	v, err := GetOrLoad(ctx, c, "k", time.Minute, func(context.Context) (int, error) { return 0, errSource }, Tags("t"), Stale(&stale))
	if err != nil || v != 7 || !stale {
		t.Errorf("GetOrLoad with the reload failing = %d, %v, stale %v; want the stale 7", v, err, stale)
	}
}

// TestTagsCluster: on a 3-master cluster, InvalidateTag on 100,000 tagged entries is one
// write (counted in the masters' command statistics), and every later read of those
// entries, from another process, reloads.
func TestTagsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster and writes 100,000 entries")
	}
	ctx := context.Background()
	const n, per = 100_000, 1000
	cfg := testConfig(t)
	a := newCache(t, redistest.ClusterClient(t), cfg)
	b := newCache(t, redistest.ClusterClient(t), cfg)
	var loads atomic.Int64
	var gen atomic.Int64
	batch := func(_ context.Context, keys []string) (map[string]int64, error) {
		loads.Add(int64(len(keys)))
		out := make(map[string]int64, len(keys))
		for _, k := range keys {
			out[k] = gen.Load()
		}
		return out, nil
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "e" + strconv.Itoa(i)
	}
	readAll := func(c *Cache, want int64) {
		t.Helper()
		for i := 0; i < n; i += per {
			m, err := GetMany(ctx, c, keys[i:i+per], time.Hour, batch, Tags("big"))
			if err != nil {
				t.Fatalf("GetMany: %v", err)
			}
			for _, k := range keys[i : i+per] {
				if m[k] != want {
					t.Fatalf("%s = %d, want %d", k, m[k], want)
				}
			}
		}
	}
	readAll(a, 0)
	if got := loads.Load(); got != n {
		t.Fatalf("%d loads writing the entries, want %d", got, n)
	}
	loads.Store(0)
	readAll(b, 0) // b's hits: its copy of the tag's token is warm
	if got := loads.Load(); got != 0 {
		t.Fatalf("%d loads reading the entries again, want 0", got)
	}
	before, _ := b.tagTokens(ctx, []string{"big"})
	writes := clusterWrites(t, a.client)
	gen.Store(1)
	if err := a.InvalidateTag(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if got := clusterWrites(t, a.client) - writes; got != 1 {
		t.Errorf("InvalidateTag on %d entries: %d write commands on the masters, want 1", n, got)
	}
	t.Logf("the other process saw the new token after %v", seenToken(t, b, "big", before[0]))
	readAll(b, 1)
	if got := loads.Load(); got != n {
		t.Errorf("%d of %d entries reloaded after InvalidateTag, want all", got, n)
	}
	// One by one too, through Get and GetOrLoad, on a sample.
	gen.Store(2)
	if err := b.InvalidateTag(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int64
	for i := 0; i < n; i += n / 200 {
		if _, err := Get[int64](ctx, a, keys[i]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) after the second InvalidateTag = %v, want ErrNotFound", keys[i], err)
		}
		v, err := GetOrLoad(ctx, a, keys[i+1], time.Hour, func(context.Context) (int64, error) { reloads.Add(1); return 2, nil }, Tags("big"))
		if err != nil || v != 2 {
			t.Fatalf("GetOrLoad(%s) = %d, %v; want the reloaded 2", keys[i+1], v, err)
		}
	}
	if got := reloads.Load(); got != 200 {
		t.Errorf("%d GetOrLoad reloads, want 200", got)
	}
}

// clusterWrites returns the number of write commands (SET, DEL, UNLINK, EVAL, EVALSHA,
// FCALL) the cluster's masters have executed.
func clusterWrites(t *testing.T, client rueidis.Client) int64 {
	t.Helper()
	var total int64
	for addr, node := range client.Nodes() {
		info, err := node.Do(context.Background(), node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatalf("INFO commandstats on %s: %v", addr, err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			switch name {
			case "cmdstat_set", "cmdstat_del", "cmdstat_unlink", "cmdstat_eval", "cmdstat_evalsha", "cmdstat_fcall":
			default:
				continue
			}
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				t.Fatalf("%s on %s: %q", name, addr, line)
			}
			total += v
		}
	}
	return total
}

// FuzzParseTagged: the envelope parser never panics on what Redis holds, and reads back
// what wrapTagged wrote.
func FuzzParseTagged(f *testing.F) {
	f.Add(string(wrapTagged([]string{"a", "b:c"}, []string{"", "TOKEN"}, []byte(`{"x":1}`))))
	f.Add(taggedPrefix + "1:1:a0:")
	f.Add(taggedPrefix + "99999999999:")
	f.Fuzz(func(t *testing.T, s string) {
		tags, tokens, raw, ok := parseTagged(s)
		if !ok {
			return
		}
		if len(tags) != len(tokens) || len(tags) == 0 || len(tags) > maxTags {
			t.Fatalf("parseTagged(%q): %d tags, %d tokens", s, len(tags), len(tokens))
		}
		if back := string(wrapTagged(tags, tokens, []byte(raw))); back != s {
			// Leading zeros in a length are accepted and written back without them.
			if _, _, raw2, ok := parseTagged(back); !ok || raw2 != raw {
				t.Fatalf("round trip of %q: %q", s, back)
			}
		}
	})
}

// TestTaggedHitsCostNoRoundTrip: a hit on a tagged entry sends Redis as many commands as a
// hit on an untagged one (its tags' tokens come from memory), with and without client-side
// caching of the entries.
func TestTaggedHitsCostNoRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	// commands counts the commands Redis has run, by name, but for the keepalive PINGs of
	// idle connections (rueidis sends one after a second without traffic, as a client-side
	// hit sends none), the handshake of a connection rueidis opens (HELLO and CLIENT
	// SETINFO, sent by no hit) and the INFO that asks.
	commands := func() map[string]int64 {
		info, err := client.Do(ctx, client.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int64{}
		for _, line := range strings.Split(info, "\n") {
			name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			name, found := strings.CutPrefix(name, "cmdstat_")
			if !ok || !found || handshake(name) {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
			c, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				t.Fatalf("INFO commandstats line %q: %v", line, err)
			}
			n[name] = c
		}
		return n
	}
	sent := func(before, after map[string]int64) (total int64, by string) {
		names := make([]string, 0, len(after))
		for name := range after {
			if d := after[name] - before[name]; d > 0 {
				total += d
				names = append(names, fmt.Sprintf("%s=%d", name, d))
			}
		}
		sort.Strings(names)
		return total, strings.Join(names, " ")
	}
	const hits = 1000
	for _, clientSide := range []bool{false, true} {
		cfg := testConfig(t)
		cfg.ClientSideCache.Enabled = clientSide
		cfg.ClientSideCache.Heartbeat = time.Hour - time.Second // no heartbeat during the count
		cfg.ClientSideCache.MaxStaleness = time.Hour
		c := newCache(t, client, cfg)
		count, by := map[bool]int64{}, map[bool]string{}
		for _, tagged := range []bool{false, true} {
			var opts []Option
			if tagged {
				opts = append(opts, Tags("a", "b"))
			}
			key := fmt.Sprintf("k%v", tagged)
			load := func(context.Context) (int, error) { return 1, nil }
			// Load, then hit until the hits' cost is steady: the load's own write invalidates
			// the copy of the miss in memory by a message that may arrive during the first
			// hits, and the next hit after it fetches the copy again.
			round := func() int64 {
				before := commands()
				for range 10 {
					if _, err := GetOrLoad(ctx, c, key, time.Hour, load, opts...); err != nil {
						t.Fatal(err)
					}
				}
				n, _ := sent(before, commands())
				return n
			}
			for last, i := round(), 0; ; i++ {
				n := round()
				if n == last {
					break
				}
				if i == 50 {
					t.Fatalf("client-side=%v tagged=%v: rounds of 10 hits still cost a varying number of commands (%d, then %d)", clientSide, tagged, last, n)
				}
				last = n
				time.Sleep(10 * time.Millisecond)
			}
			before := commands()
			for range hits {
				if _, err := GetOrLoad(ctx, c, key, time.Hour, load, opts...); err != nil {
					t.Fatal(err)
				}
			}
			count[tagged], by[tagged] = sent(before, commands())
		}
		t.Logf("client-side=%v: %d hits sent %d commands untagged (%s), %d tagged (%s)",
			clientSide, hits, count[false], by[false], count[true], by[true])
		if count[true] != count[false] {
			t.Errorf("client-side=%v: %d tagged hits sent %d commands (%s), %d untagged (%s); want as many",
				clientSide, hits, count[true], by[true], count[false], by[false])
		}
	}
}

// TestTagsSlidingAndEager: tagged entries are renewed by sliding expiration like untagged
// ones, and eager refresh reloads them with their tags; an invalidation still reaches them.
func TestTagsSlidingAndEager(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	t.Run("sliding", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.SlidingExpiration = true
		cfg.DefaultTTL = time.Hour
		c := newCache(t, client, cfg)
		if err := c.Set(ctx, "k", 1, time.Minute, Tags("t")); err != nil {
			t.Fatal(err)
		}
		if _, err := Get[int](ctx, c, "k"); err != nil {
			t.Fatal(err)
		}
		if left := pttl(t, client, c.Key("k")); left < time.Minute.Milliseconds() {
			t.Errorf("PTTL after a sliding read of a tagged entry = %dms, want renewed to about 1h", left)
		}
		m, err := GetMany(ctx, c, []string{"k"}, DefaultTTL, noBatchInt)
		if err != nil || m["k"] != 1 {
			t.Fatalf("GetMany = %v, %v", m, err)
		}
		if err := c.InvalidateTag(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if _, err := Get[int](ctx, c, "k"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after InvalidateTag = %v, want ErrNotFound", err)
		}
	})
	t.Run("eager", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.EagerRefresh = 0.5
		c := newCache(t, client, cfg)
		var gen atomic.Int64
		load := func(context.Context) (int64, error) { return gen.Add(1), nil }
		if _, err := GetOrLoad(ctx, c, "k", 400*time.Millisecond, load, Tags("t")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond) // past half the TTL: the next hit refreshes
		if v, err := GetOrLoad(ctx, c, "k", 400*time.Millisecond, load, Tags("t")); err != nil || v != 1 {
			t.Fatalf("hit past the refresh point = %d, %v; want the current 1", v, err)
		}
		// The refresh is counted when its load returns; its value is stored right after.
		waitFor(t, "the eager refresh stored", func() bool {
			v, err := Get[int64](ctx, c, "k")
			return gen.Load() == 2 && c.Stats().Refreshes == 1 && err == nil && v == 2
		})
		if err := c.InvalidateTag(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if v, err := GetOrLoad(ctx, c, "k", time.Minute, load, Tags("t")); err != nil || v != 3 {
			t.Errorf("after InvalidateTag = %d, %v; want the refreshed entry invalidated too (3)", v, err)
		}
	})
}

func noBatchInt(context.Context, []string) (map[string]int, error) { return nil, nil }

// handshake reports whether a command of INFO commandstats is one a connection sends when
// rueidis opens or keeps it, not one a cache read sends.
func handshake(name string) bool {
	switch {
	case name == "ping", name == "info", name == "hello", name == "auth", name == "select", name == "readonly":
		return true
	case strings.HasPrefix(name, "client|"), name == "client":
		return true
	}
	return false
}
