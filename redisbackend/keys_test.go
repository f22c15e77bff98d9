package redisbackend

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/coreops"
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
					d, err := lim.AllowN(ctx, k, now, 1)
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

var updateVectors = flag.Bool("update-vectors", false, "rewrite testdata/keys.json from the key schema")

// vectorSpec is a redstream.Spec in the vectors file's units.
type vectorSpec struct {
	Algorithm string  `json:"algorithm"`
	Capacity  float64 `json:"capacity,omitempty"`
	Rate      float64 `json:"rate,omitempty"`
	WindowUS  int64   `json:"window_us,omitempty"`
	Limit     int64   `json:"limit,omitempty"`
}

func (v vectorSpec) spec() redstream.Spec {
	return redstream.Spec{Algorithm: redstream.Algorithm(v.Algorithm), Capacity: v.Capacity, Rate: v.Rate,
		Window: time.Duration(v.WindowUS) * time.Microsecond, Limit: v.Limit}
}

// keyVector is one line of testdata/keys.json: a limiter (one spec, or a multi-limiter's
// specs) and a user key, and what every runtime must compute from them.
type keyVector struct {
	Specs          []vectorSpec `json:"specs"`
	Multi          bool         `json:"multi,omitempty"`
	JavaCompatible bool         `json:"java_compatible,omitempty"`
	Prefix         string       `json:"prefix"` // "" for the algorithm's default
	KeyHex         string       `json:"key_hex"`
	Key            string       `json:"key,omitempty"` // when valid UTF-8
	Ints           [][]int64    `json:"ints"`
	Fingerprints   []string     `json:"fingerprints"`
	RedisKeysHex   []string     `json:"redis_keys_hex"`
	RedisKeys      []string     `json:"redis_keys,omitempty"` // when valid UTF-8
}

// dedupVector is a deduplicator's name and its Redis keys.
type dedupVector struct {
	Strategy       string   `json:"strategy"`
	JavaCompatible bool     `json:"java_compatible,omitempty"`
	Prefix         string   `json:"prefix"`
	Name           string   `json:"name"`
	RedisKeys      []string `json:"redis_keys"`
}

type vectorFile struct {
	Comment  []string      `json:"comment"`
	Limiters []keyVector   `json:"limiters"`
	Dedup    []dedupVector `json:"deduplicators"`
}

// vectors computes the vectors file with the package's key schema and engines.
func vectors(t *testing.T) vectorFile {
	t.Helper()
	c := nopClient(t)
	sl := func(w time.Duration, l int64) vectorSpec { return vectorSpec{"sliding", 0, 0, w.Microseconds(), l} }
	win := func(a string, w time.Duration, l int64) vectorSpec { return vectorSpec{a, 0, 0, w.Microseconds(), l} }
	tb := func(a string, c, r float64) vectorSpec { return vectorSpec{a, c, r, 0, 0} }
	cases := []struct {
		specs  []vectorSpec
		multi  bool
		java   bool
		prefix string
		key    string
	}{
		{specs: []vectorSpec{sl(time.Minute, 10)}, key: "user:1"},
		{specs: []vectorSpec{sl(time.Minute, 2)}, key: "user:1"},
		{specs: []vectorSpec{tb("token-bucket", 10, 5)}, key: "user:1"},
		{specs: []vectorSpec{tb("token-bucket", 2.5, 3)}, key: "203.0.113.7"},
		{specs: []vectorSpec{tb("leaky-bucket", 10, 5)}, key: "user:1"},
		{specs: []vectorSpec{win("sliding-counter", time.Second, 100)}, key: "user:1"},
		{specs: []vectorSpec{win("fixed", time.Hour, 1000)}, key: "user:1"},
		{specs: []vectorSpec{sl(1500*time.Microsecond, 7)}, prefix: "api:v2", key: "tenant/42"},
		{specs: []vectorSpec{sl(time.Second, 5)}, key: "{tag}"},
		{specs: []vectorSpec{sl(time.Second, 5)}, key: "with space"},
		{specs: []vectorSpec{sl(time.Second, 5)}, key: "\x00\xff\x01"},
		{specs: []vectorSpec{sl(time.Second, 5)}, key: "ключ"},
		{specs: []vectorSpec{sl(time.Second, 5)}, key: "#hash"},
		{specs: []vectorSpec{sl(time.Second, 5)}, key: strings.Repeat("k", maxPlainTag+1)},
		{specs: []vectorSpec{sl(time.Second, 2), win("fixed", time.Minute, 3)}, multi: true, key: "user:1"},
		{specs: []vectorSpec{tb("token-bucket", 10, 1), tb("token-bucket", 10, 1)}, multi: true, key: "a b"},
		{specs: []vectorSpec{sl(time.Second, 100)}, java: true, key: "user:1"},
		{specs: []vectorSpec{tb("token-bucket", 100, 50)}, java: true, key: "user:1"},
		{specs: []vectorSpec{sl(time.Second, 100)}, java: true, prefix: "my:rl", key: "a{b}c"},
	}
	out := vectorFile{Comment: []string{
		"Redis keys of redstream's limiters and deduplicators, for every runtime that shares them.",
		"fingerprint = name + ('.' + decimal int) for each of ints.",
		"ints are the limit's integer parameters: for the buckets interval = round(1e6/rate) µs, tolerance =",
		"round(capacity*interval) µs (round half away from zero, float64), burst = tolerance div interval;",
		"for the windows window_us (the window truncated to whole µs) and limit.",
		"Single limit: <prefix>:{<tag>}:<fingerprint>; multi-limit i: <prefix>:{<tag>}:m<i>.<fingerprint>.",
		"tag = the key when plain (1..128 bytes of '!'..'~' without '{', '}', not starting with '#'),",
		"else '#' + 16 hex digits of MurmurHash3 x64 128 (seed 0, h1, big-endian), and '|' + key ends the key.",
		"java_compatible: the Java implementation's keys, <prefix>:{<key>} (and :seq) or <prefix>:{<key>}:tb.",
		"Default prefixes: streaming:rl for every limiter (single or multi, any algorithm; a java_compatible",
		"token bucket streaming:tb, the Java class's), deduplicators streaming:dedup.",
	}}
	for _, tc := range cases {
		v := keyVector{Specs: tc.specs, Multi: tc.multi, JavaCompatible: tc.java, Prefix: tc.prefix, KeyHex: hex.EncodeToString([]byte(tc.key))}
		if utf8.ValidString(tc.key) {
			v.Key = tc.key
		}
		var specs []redstream.Spec
		for _, s := range tc.specs {
			p, err := s.spec().Core()
			if err != nil {
				t.Fatal(err)
			}
			specs = append(specs, s.spec())
			v.Ints = append(v.Ints, coreops.Ints(p))
			v.Fingerprints = append(v.Fingerprints, fingerprint(p))
		}
		o := Options{KeyPrefix: tc.prefix, JavaCompatible: tc.java}
		var l *Limiter
		var err error
		if tc.multi {
			l, err = NewMultiLimiter(c, specs, o)
		} else {
			l, err = NewLimiter(c, specs[0], o)
		}
		if err != nil {
			t.Fatal(err)
		}
		valid := true
		for _, k := range l.Keys(tc.key) {
			v.RedisKeysHex = append(v.RedisKeysHex, hex.EncodeToString([]byte(k)))
			v.RedisKeys = append(v.RedisKeys, k)
			valid = valid && utf8.ValidString(k)
		}
		if !valid {
			v.RedisKeys = nil
		}
		out.Limiters = append(out.Limiters, v)
	}
	for _, tc := range []struct {
		strategy redstream.DedupStrategy
		java     bool
		prefix   string
		name     string
	}{
		{redstream.DedupSet, false, "", "dedup"},
		{redstream.DedupSet, true, "", "dedup"},
		{redstream.DedupWindowed, false, "", "dedup:orders"},
		{redstream.DedupWindowed, false, "svc", "orders"},
	} {
		d, err := NewDeduplicator(c, tc.name, redstream.DedupSpec{Strategy: tc.strategy}, DedupOptions{KeyPrefix: tc.prefix, JavaCompatible: tc.java})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		switch d := d.(type) {
		case *setDedup:
			keys = []string{d.Key()}
		case *windowDedup:
			keys = d.Keys()
		}
		out.Dedup = append(out.Dedup, dedupVector{string(tc.strategy), tc.java, tc.prefix, tc.name, keys})
	}
	return out
}

// TestKeyVectors: testdata/keys.json, the key schema's vectors for other runtimes, is what
// the package computes (go test -run TestKeyVectors -update-vectors rewrites it).
func TestKeyVectors(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vectors(t)); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	const file = "testdata/keys.json"
	if *updateVectors {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -run TestKeyVectors -update-vectors writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale or the key schema changed: a key format change breaks deployments; rewrite it with -update-vectors only on purpose", file)
	}
	// The file read back drives the engines to the same keys: what another runtime checks.
	var vf vectorFile
	if err := json.Unmarshal(want, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Limiters) < 15 {
		t.Fatalf("only %d limiter vectors", len(vf.Limiters))
	}
	for i, v := range vf.Limiters {
		key, _ := hex.DecodeString(v.KeyHex)
		for j, s := range v.Specs {
			p, err := s.spec().Core()
			if err != nil {
				t.Fatal(err)
			}
			if fp := fingerprint(p); fp != v.Fingerprints[j] {
				t.Errorf("vector %d spec %d: Fingerprint = %q, file %q", i, j, fp, v.Fingerprints[j])
			}
			want := s.Algorithm
			for _, x := range v.Ints[j] {
				want += "." + strconv.FormatInt(x, 10)
			}
			if want != v.Fingerprints[j] {
				t.Errorf("vector %d spec %d: fingerprint %q is not name.ints %q", i, j, v.Fingerprints[j], want)
			}
		}
		for _, k := range v.RedisKeysHex {
			b, _ := hex.DecodeString(k)
			if slotOf(string(b)) != slotOf(mustHex(t, v.RedisKeysHex[0])) {
				t.Errorf("vector %d: keys in different slots", i)
			}
			if !v.JavaCompatible && !bytes.Contains(b, key) {
				t.Errorf("vector %d: key %q does not contain the user key", i, b)
			}
		}
	}
}

func mustHex(t *testing.T, s string) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDifferentSpecsNeverShare: two limiters with default options whose specs differ, on
// the same user key, keep distinct state (the keys carry the fingerprint); Remaining is
// never negative. First the measured case (sliding windows of 10/min and 2/min at the
// server's TIME), then every algorithm, multi-limiters and batches at explicit times.
func TestDifferentSpecsNeverShare(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			user := uniq("user")
			ten := mustLimiter(t, c, redstream.SlidingWindow(time.Minute, 10), Options{})
			two := mustLimiter(t, c, redstream.SlidingWindow(time.Minute, 2), Options{})
			for i := 0; i < 3; i++ {
				if d, err := ten.AllowN(ctx, user, time.Time{}, 1); err != nil || !d.Allowed || d.Remaining != int64(9-i) {
					t.Fatalf("10/min #%d = %+v, %v", i, d, err)
				}
			}
			d, err := two.AllowN(ctx, user, time.Time{}, 1)
			if err != nil || !d.Allowed || d.Remaining != 1 {
				t.Fatalf("2/min after three decisions of 10/min = %+v, %v; want allowed, Remaining 1 (its own state)", d, err)
			}
			if ten.Keys(user)[0] == two.Keys(user)[0] {
				t.Fatalf("both limiters use %s", ten.Keys(user)[0])
			}
			pairs := [][2]redstream.Spec{
				{redstream.TokenBucket(10, 1), redstream.TokenBucket(2, 1)},
				{redstream.TokenBucket(3, 1), redstream.TokenBucket(3, 2)},
				{redstream.LeakyBucket(10, 1), redstream.LeakyBucket(2, 1)},
				{redstream.SlidingWindow(time.Minute, 10), redstream.SlidingWindow(time.Minute, 2)},
				{redstream.SlidingWindow(time.Minute, 3), redstream.SlidingWindow(time.Second, 3)},
				{redstream.SlidingCounter(time.Minute, 10), redstream.SlidingCounter(time.Minute, 2)},
				{redstream.FixedWindow(time.Minute, 10), redstream.FixedWindow(time.Minute, 2)},
			}
			user = uniq("user")     // explicit times from here: fresh keys
			prefix := uniq("share") // a user-set prefix keeps the fingerprint too
			for _, p := range pairs {
				for _, o := range []Options{{}, {KeyPrefix: prefix}} {
					a, b := mustLimiter(t, c, p[0], o), mustLimiter(t, c, p[1], o)
					for i := 0; i < 4; i++ {
						d, err := a.AllowN(ctx, user, t0, 1)
						if err != nil || d.Remaining < 0 {
							t.Fatalf("%v #%d = %+v, %v", p[0], i, d, err)
						}
					}
					d, err := b.AllowN(ctx, user, t0, 1)
					max := b.limit
					if err != nil || !d.Allowed || d.Remaining != max-1 {
						t.Errorf("%v (prefix %q) after four decisions of %v = %+v, %v; want allowed, Remaining %d", p[1], o.KeyPrefix, p[0], d, err, max-1)
					}
					ds, err := b.AllowBatch(ctx, []string{user, user + "x"}, t0, 1)
					if err != nil || ds[1].Remaining != max-1 || ds[0].Remaining < 0 {
						t.Errorf("%v batch = %+v, %v", p[1], ds, err)
					}
				}
				ma, err := NewMultiLimiter(c, []redstream.Spec{p[0], redstream.FixedWindow(time.Hour, 100)}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				mb, err := NewMultiLimiter(c, []redstream.Spec{p[1], redstream.FixedWindow(time.Hour, 100)}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 4; i++ {
					if d, err := ma.AllowN(ctx, user, t0, 1); err != nil || d.Remaining < 0 {
						t.Fatalf("multi %v #%d = %+v, %v", p[0], i, d, err)
					}
				}
				if d, err := mb.AllowN(ctx, user, t0, 1); err != nil || !d.Allowed || d.Remaining != mb.limit-1 {
					t.Errorf("multi %v after four of %v = %+v, %v; want allowed, Remaining %d", p[1], p[0], d, err, mb.limit-1)
				}
			}
		})
	}
}
