package redisbackend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// oddKeys are user keys that break naive hash tags.
var oddKeys = []string{
	"user:1", "{", "}", "{}", "}{", "a{b}c", "{tag}", "x}{y", "with space", "\x00\xff\x01", "ключ",
	"#hash", strings.Repeat("k", maxPlainTag), strings.Repeat("k", maxPlainTag+1), strings.Repeat("{}", 1000),
}

// sw is a limit for key roles.
var sw, _ = redstream.SlidingWindow(time.Minute, 10).Core()

func TestRedisKeySameSlot(t *testing.T) {
	roles := []string{"", specRole(sw), limitRole(0, sw), limitRole(1, sw), limitRole(12, sw), roleWindow, roleWindowMark, roleSet}
	for _, u := range oddKeys {
		t.Run(shortName(u), func(t *testing.T) {
			want := slotOf(redisKey("p", u, ""))
			for _, r := range roles {
				k := redisKey("p", u, r)
				if got := slotOf(k); got != want {
					t.Errorf("slotOf(%q) = %d, want %d (the slot of the role-less key)", k, got, want)
				}
				if !strings.HasPrefix(k, "p:{") {
					t.Errorf("key %q does not start with the prefix and the tag", k)
				}
			}
		})
	}
}

func TestRedisKeyReadable(t *testing.T) {
	tests := []struct{ prefix, user, role, want string }{
		{"streaming:rl", "user:1", "", "streaming:rl:{user:1}"},
		{"streaming:tb", "203.0.113.7", "", "streaming:tb:{203.0.113.7}"},
		{"streaming:ml", "user:1", limitRole(1, sw), "streaming:ml:{user:1}:m1.sliding.60000000.10"},
		{"streaming:rl", "user:1", specRole(sw), "streaming:rl:{user:1}:sliding.60000000.10"},
		{"p", "{tag}", "", "p:{#" + hashTag("{tag}")[1:] + "}|{tag}"},
		{"p", "a b", roleSet, "p:{" + hashTag("a b") + "}:set|a b"},
	}
	for _, tt := range tests {
		if got := redisKey(tt.prefix, tt.user, tt.role); got != tt.want {
			t.Errorf("redisKey(%q, %q, %q) = %q, want %q", tt.prefix, tt.user, tt.role, got, tt.want)
		}
	}
	if h := hashTag("x"); len(h) != 17 || h[0] != '#' {
		t.Errorf("hashTag = %q, want # and 16 hex digits", h)
	}
}

func TestRedisKeyDistinct(t *testing.T) {
	seen := map[string]string{}
	users := append([]string{"a", "a:m1", "a|b", "#a", "a/1", "a/1/0"}, oddKeys...)
	for _, u := range users {
		for _, r := range []string{"", specRole(sw), limitRole(0, sw), limitRole(1, sw), roleWindow, roleWindowMark, roleSet} {
			k := redisKey("p", u, r)
			id := u + "\x00" + r
			if prev, ok := seen[k]; ok && prev != id {
				t.Errorf("key %q built for both %q and %q", k, prev, id)
			}
			seen[k] = id
		}
	}
	// Bloom shards of different names, shard counts and shard numbers never collide.
	for _, name := range []string{"a", "a/1", "a/1/0", "{x}"} {
		for _, shards := range []int{1, 2, 3} {
			role := bloomRole(3, 100, shards)
			for i := 0; i < shards; i++ {
				k := bloomShardKey("p", name, role, shards, i)
				id := name + "\x00" + role + "\x00" + string(rune('0'+i))
				if prev, ok := seen[k]; ok && prev != id {
					t.Errorf("bloom key %q built for both %q and %q", k, prev, id)
				}
				seen[k] = id
			}
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"a{b", "a}b", "{x}"} {
		if _, err := NewLimiter(nopClient(t), redstream.TokenBucket(1, 1), Options{KeyPrefix: p}); err == nil {
			t.Errorf("prefix %q accepted, want an error", p)
		}
	}
}

// TestSlotOf checks slotOf against the real cluster's CLUSTER KEYSLOT.
func TestSlotOf(t *testing.T) {
	c := redistest.ClusterClient(t)
	ctx := context.Background()
	for _, k := range append([]string{"123456789", "foo{bar}zap", "{}x", "a{}b{c}"}, oddKeys[:12]...) {
		got, err := c.Do(ctx, c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if want := slotOf(k); int64(want) != got {
			t.Errorf("slotOf(%q) = %d, CLUSTER KEYSLOT = %d", k, want, got)
		}
	}
}

// TestOddKeysOnCluster runs every engine with user keys that break naive hash tags on the
// real cluster, where a cross-slot script would fail (rueidis refuses it).
func TestOddKeysOnCluster(t *testing.T) {
	c := redistest.ClusterClient(t)
	ctx := context.Background()
	now := time.UnixMicro(1767225600000000)
	big := strings.Repeat("{x}", (1<<20)/3) // 1 MB of braces
	keys := append(append([]string(nil), oddKeys...), big)
	specs := []redstream.Spec{
		redstream.TokenBucket(2, 1), redstream.LeakyBucket(2, 1), redstream.SlidingWindow(time.Second, 2),
		redstream.SlidingCounter(time.Second, 2), redstream.FixedWindow(time.Second, 2),
	}
	prefix := uniq("odd")
	multi, err := NewMultiLimiter(c, specs, Options{KeyPrefix: prefix + ":multi"})
	if err != nil {
		t.Fatal(err)
	}
	limiters := []*Limiter{multi}
	for _, s := range specs {
		limiters = append(limiters, mustLimiter(t, c, s, Options{KeyPrefix: prefix + ":" + string(s.Algorithm)}))
	}
	{
		for _, lim := range limiters {
			for _, k := range keys {
				for i, want := range []bool{true, true, false} {
					d, err := lim.AllowAt(ctx, k, now)
					if err != nil {
						t.Fatalf("%v AllowAt(%s) #%d: %v", lim.Specs(), shortName(k), i, err)
					}
					if d.Allowed != want {
						t.Errorf("%v AllowAt(%s) #%d: Allowed = %v, want %v", lim.Specs(), shortName(k), i, d.Allowed, want)
					}
				}
			}
			ds, err := lim.AllowBatch(ctx, keys, now, 1)
			if err != nil {
				t.Fatalf("AllowBatch: %v", err)
			}
			for i, d := range ds {
				if d.Allowed {
					t.Errorf("%v AllowBatch: key %s allowed a third time", lim.Specs(), shortName(keys[i]))
				}
			}
		}
	}
	for _, name := range keys {
		for _, s := range []redstream.DedupSpec{{Strategy: redstream.DedupSet}, {Strategy: redstream.DedupWindowed},
			{Strategy: redstream.DedupBloom, Insertions: 100, FPRate: 0.01, Shards: 3}} {
			d, err := NewDeduplicator(c, name, s, DedupOptions{KeyPrefix: prefix + ":dd"})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{false, true} {
				got, err := d.CheckAndMark(ctx, big)
				if err != nil || got != want {
					t.Errorf("%s %s: CheckAndMark #%d = %v, %v; want %v", s.Strategy, shortName(name), i, got, err, want)
				}
			}
		}
	}
}

func shortName(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}
