package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// The Java implementation's Redis scripts, reconstructed from its documentation:
// RedisSlidingWindowRateLimiter prunes the scores <= now - window, counts, and below the
// limit adds the member "<now>:<seq>" (seq from INCRBY on the ":seq" key) and PEXPIREs the
// window; RedisTokenBucketRateLimiter refills a hash {tokens, ts} at rate per second for the
// milliseconds elapsed (a new key starts full), takes one token if there is one, writes the
// hash back and PEXPIREs max(2000 ms, two full refills). Times are the Java client's
// milliseconds. The tests run these with EVAL as a Java process would.
const (
	javaSlidingScript = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
local count = redis.call('ZCARD', KEYS[1])
if count < tonumber(ARGV[3]) then
  local seq = redis.call('INCRBY', KEYS[2], 1)
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1] .. ':' .. seq)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
return 0`
	javaTokenScript = `
local capacity, rate, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(v[1]), tonumber(v[2])
if tokens == nil then tokens = capacity; ts = now end
local delta = math.max(0, now - ts)
tokens = math.min(capacity, tokens + delta * rate / 1000.0)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return allowed`
)

// javaLimiter runs the Java implementation's scripts on c.
type javaLimiter struct {
	c      rueidis.Client
	prefix string
}

func (j javaLimiter) sliding(t *testing.T, key string, nowMs, windowMs, limit int64) bool {
	t.Helper()
	k := j.prefix + ":{" + key + "}"
	v, err := j.c.Do(context.Background(), j.c.B().Eval().Script(javaSlidingScript).Numkeys(2).Key(k, k+":seq").
		Arg(strconv.FormatInt(nowMs, 10), strconv.FormatInt(windowMs, 10), strconv.FormatInt(limit, 10)).Build()).AsInt64()
	if err != nil {
		t.Fatalf("Java sliding window: %v", err)
	}
	return v == 1
}

func (j javaLimiter) token(t *testing.T, key string, capacity, rate float64, nowMs int64) bool {
	t.Helper()
	ttl := max(2000, 2*int64(math.Ceil(capacity/rate*1000)))
	v, err := j.c.Do(context.Background(), j.c.B().Eval().Script(javaTokenScript).Numkeys(1).Key(j.prefix+":{"+key+"}:tb").
		Arg(strconv.FormatFloat(capacity, 'g', -1, 64), strconv.FormatFloat(rate, 'g', -1, 64), strconv.FormatInt(nowMs, 10), strconv.FormatInt(ttl, 10)).Build()).AsInt64()
	if err != nil {
		t.Fatalf("Java token bucket: %v", err)
	}
	return v == 1
}

// snapshot returns a key's type, contents and whether it has a TTL (DUMP, which miniredis
// lacks, in readable form).
func snapshot(t *testing.T, c rueidis.Client, k string) string {
	t.Helper()
	typ, _ := do(t, c, c.B().Type().Key(k).Build()).ToString()
	var v any
	switch typ {
	case "string":
		v, _ = do(t, c, c.B().Get().Key(k).Build()).ToString()
	case "hash":
		v, _ = do(t, c, c.B().Hgetall().Key(k).Build()).AsStrMap()
	case "zset":
		v, _ = do(t, c, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).ToAny()
	case "set":
		v, _ = do(t, c, c.B().Smembers().Key(k).Build()).AsStrSlice()
	case "list":
		v, _ = do(t, c, c.B().Lrange().Key(k).Start(0).Stop(-1).Build()).AsStrSlice()
	}
	ttl, _ := do(t, c, c.B().Pttl().Key(k).Build()).AsInt64()
	return fmt.Sprintf("%s %v ttl=%v", typ, v, ttl > 0)
}

func do(t *testing.T, c rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	r := c.Do(context.Background(), cmd)
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return r
}

// javaBackends are the real servers: the Java layout is proven where it runs.
var javaBackends = backends[1:]

// TestJavaSlidingWindowShared: a Java process and a JavaCompatible limiter take turns on
// one key (the Java side writes with its own script, exactly its layout); every decision of
// both is the shared limit's, and each side reads what the other wrote.
func TestJavaSlidingWindowShared(t *testing.T) {
	for _, b := range javaBackends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			prefix := uniq("jrl")
			const windowMs, limit = 1000, 5
			l := mustLimiter(t, c, redstream.SlidingWindow(windowMs*time.Millisecond, limit), Options{KeyPrefix: prefix, JavaCompatible: true})
			java := javaLimiter{c, prefix}

			// The Java side admitted two requests before the Go side starts.
			t0 := int64(1767225600000)
			for _, at := range []int64{t0, t0 + 10} {
				if !java.sliding(t, "user:1", at, windowMs, limit) {
					t.Fatal("Java denied a request of an empty window")
				}
			}
			d, err := l.AllowN(ctx, "user:1", time.UnixMilli(t0+20).Add(700*time.Microsecond), 1)
			if err != nil || !d.Allowed || d.Remaining != 2 || d.Limit != limit {
				t.Fatalf("Go after two Java admissions = %+v, %v; want allowed, Remaining 2", d, err)
			}
			if want := time.Duration(windowMs)*time.Millisecond - 700*time.Microsecond; d.ResetAfter != want {
				t.Errorf("ResetAfter = %v, want %v", d.ResetAfter, want)
			}
			members := do(t, c, c.B().Zrange().Key(prefix+":{user:1}").Min("0").Max("-1").Build())
			ms, _ := members.AsStrSlice()
			if len(ms) != 3 || ms[2] != strconv.FormatInt(t0+20, 10)+":3" {
				t.Fatalf("members after Go's admission %v, want the Java form <ms>:<seq> with seq 3", ms)
			}
			for i := 0; i < 2; i++ {
				if !java.sliding(t, "user:1", t0+30, windowMs, limit) {
					t.Fatalf("Java request %d denied with %d of %d used", i, 3+i, limit)
				}
			}
			if java.sliding(t, "user:1", t0+40, windowMs, limit) {
				t.Fatal("Java admitted a sixth request: it did not count Go's")
			}
			d, err = l.AllowN(ctx, "user:1", time.UnixMilli(t0+50), 1)
			if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != 950*time.Millisecond {
				t.Fatalf("Go on a full window = %+v, %v; want denied, RetryAfter 950ms (the first Java entry leaves)", d, err)
			}
			d, err = l.AllowN(ctx, "user:1", time.UnixMilli(t0+50).Add(d.RetryAfter), 1)
			if err != nil || !d.Allowed {
				t.Fatalf("Go at RetryAfter = %+v, %v; want allowed", d, err)
			}
			if pttl := do(t, c, c.B().Pttl().Key(prefix+":{user:1}:seq").Build()); func() bool { v, _ := pttl.AsInt64(); return v <= 0 || v > windowMs }() {
				t.Errorf("seq key PTTL %v, want in (0, window]", pttl)
			}
		})
	}
}

// TestJavaSlidingWindowRandom interleaves Java and Go decisions at random times against the
// shared limit's model (admitted times in (now - window, now], at most limit).
func TestJavaSlidingWindowRandom(t *testing.T) {
	for _, b := range javaBackends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			for trial := 0; trial < 4; trial++ {
				prefix := uniq("jrlr")
				windowMs, limit := int64(50+rng.IntN(500)), int64(1+rng.IntN(6))
				l := mustLimiter(t, c, redstream.SlidingWindow(time.Duration(windowMs)*time.Millisecond, limit), Options{KeyPrefix: prefix, JavaCompatible: true})
				java := javaLimiter{c, prefix}
				var admitted []int64
				now := int64(1767225600000) + rng.Int64N(1e6)
				for step := 0; step < 150; step++ {
					now += []int64{0, 1, rng.Int64N(windowMs / 4), windowMs, rng.Int64N(2 * windowMs)}[rng.IntN(5)]
					live := admitted[:0]
					for _, a := range admitted {
						if a > now-windowMs {
							live = append(live, a)
						}
					}
					admitted = live
					want := int64(len(admitted)) < limit
					var got bool
					side := "Java"
					if rng.IntN(2) == 0 {
						got = java.sliding(t, "k", now, windowMs, limit)
					} else {
						side = "Go"
						d, err := l.AllowN(ctx, "k", time.UnixMilli(now).Add(time.Duration(rng.IntN(1000))*time.Microsecond), 1)
						if err != nil {
							t.Fatalf("step %d: %v", step, err)
						}
						got = d.Allowed
						if rem := limit - int64(len(admitted)) - map[bool]int64{true: 1, false: 0}[want]; d.Remaining != max(rem, 0) {
							t.Fatalf("step %d: Go Remaining %d, want %d", step, d.Remaining, rem)
						}
					}
					if got != want {
						t.Fatalf("trial %d step %d (%s, window %dms, limit %d, %d live): allowed %v, want %v", trial, step, side, windowMs, limit, len(admitted), got, want)
					}
					if got {
						admitted = append(admitted, now)
					}
				}
			}
		})
	}
}

// TestJavaTokenBucketShared: Java and Go take turns on one token bucket hash.
func TestJavaTokenBucketShared(t *testing.T) {
	for _, b := range javaBackends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			prefix := uniq("jtb")
			const capacity, rate = 3.0, 2.0 // one token per 500 ms
			l := mustLimiter(t, c, redstream.TokenBucket(capacity, rate), Options{KeyPrefix: prefix, JavaCompatible: true})
			java := javaLimiter{c, prefix}
			key := prefix + ":{user:1}:tb"
			t0 := int64(1767225600000)
			if !java.token(t, "user:1", capacity, rate, t0) || !java.token(t, "user:1", capacity, rate, t0) {
				t.Fatal("Java denied a full bucket")
			}
			d, err := l.AllowN(ctx, "user:1", time.UnixMilli(t0+100), 1)
			// 1 token + 100 ms * 2/s = 1.2: admitted, 0.2 left.
			if err != nil || !d.Allowed || d.Remaining != 0 || d.Limit != 3 {
				t.Fatalf("Go after two Java admissions = %+v, %v; want allowed, Remaining 0, Limit 3", d, err)
			}
			if d.ResetAfter != 1400*time.Millisecond {
				t.Errorf("ResetAfter = %v, want 1.4s (2.8 tokens at 2/s)", d.ResetAfter)
			}
			h, _ := do(t, c, c.B().Hgetall().Key(key).Build()).AsStrMap()
			if tok, _ := strconv.ParseFloat(h["tokens"], 64); math.Abs(tok-0.2) > 1e-9 || h["ts"] != strconv.FormatInt(t0+100, 10) {
				t.Fatalf("hash after Go's admission %v, want tokens 0.2, ts %d", h, t0+100)
			}
			if ttl, _ := do(t, c, c.B().Pttl().Key(key).Build()).AsInt64(); ttl <= 0 || ttl > 3000 {
				t.Errorf("PTTL %d, want max(2000, two full refills = 3000)", ttl)
			}
			if java.token(t, "user:1", capacity, rate, t0+200) {
				t.Fatal("Java admitted with 0.4 tokens: it did not read Go's write")
			}
			d, err = l.AllowN(ctx, "user:1", time.UnixMilli(t0+200), 1)
			if err != nil || d.Allowed || d.RetryAfter != 300*time.Millisecond {
				t.Fatalf("Go with 0.4 tokens = %+v, %v; want denied, RetryAfter 300ms", d, err)
			}
			if !java.token(t, "user:1", capacity, rate, t0+500) {
				t.Fatal("Java denied at 1.0 tokens")
			}
		})
	}
}

// javaTokenModel is the token bucket hash as both sides compute it, bit for bit: the Java
// side writes after every request, the Go side only after an admission.
type javaTokenModel struct {
	tokens, capacity, rate float64
	ts                     int64
	set                    bool
}

func (m *javaTokenModel) step(now int64, java bool) bool {
	tokens, ts := m.tokens, m.ts
	if !m.set {
		tokens, ts = m.capacity, now
	}
	if now > ts {
		tokens = tokens + float64(now-ts)*m.rate/1000
		ts = now
	}
	tokens = math.Min(m.capacity, tokens)
	ok := tokens >= 1
	if ok {
		tokens--
	}
	if ok || java {
		m.tokens, m.ts, m.set = tokens, ts, true
		if java {
			m.ts = now
		}
	}
	return ok
}

// TestJavaTokenBucketRandom interleaves Java and Go decisions against the model.
func TestJavaTokenBucketRandom(t *testing.T) {
	for _, b := range javaBackends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(3, 4))
			for trial := 0; trial < 4; trial++ {
				prefix := uniq("jtbr")
				capacity := []float64{1, 2.5, 5, 10}[trial]
				rate := []float64{0.5, 3, 7, 100}[rng.IntN(4)]
				l := mustLimiter(t, c, redstream.TokenBucket(capacity, rate), Options{KeyPrefix: prefix, JavaCompatible: true})
				java := javaLimiter{c, prefix}
				m := &javaTokenModel{capacity: capacity, rate: rate}
				now := int64(1767225600000) + rng.Int64N(1e6)
				per := int64(1000 / rate)
				for step := 0; step < 150; step++ {
					now += []int64{0, 1, rng.Int64N(per + 1), per, 3 * per}[rng.IntN(5)]
					isJava := rng.IntN(2) == 0
					want := m.step(now, isJava)
					var got bool
					if isJava {
						got = java.token(t, "k", capacity, rate, now)
					} else {
						d, err := l.AllowN(ctx, "k", time.UnixMilli(now), 1)
						if err != nil {
							t.Fatalf("step %d: %v", step, err)
						}
						got = d.Allowed
						if d.Remaining != int64(m.tokens) && want {
							t.Fatalf("step %d: Remaining %d, want %d", step, d.Remaining, int64(m.tokens))
						}
					}
					if got != want {
						t.Fatalf("trial %d step %d (Java %v, capacity %g, rate %g): allowed %v, want %v", trial, step, isJava, capacity, rate, got, want)
					}
				}
			}
		})
	}
}

// TestJavaSetDedupShared: the Java setDedup's set at the bare name is the Go set
// deduplicator's state with JavaCompatible, both ways.
func TestJavaSetDedupShared(t *testing.T) {
	for _, b := range javaBackends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			name := uniq("dedup")
			do(t, c, c.B().Sadd().Key(name).Member("msg-1", "msg-2").Build()) // RSet.add, as Java does
			d, err := NewDeduplicator(c, name, redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{JavaCompatible: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				e   string
				dup bool
			}{{"msg-1", true}, {"msg-2", true}, {"msg-3", false}, {"msg-3", true}} {
				if got, err := d.CheckAndMark(ctx, tc.e); err != nil || got != tc.dup {
					t.Errorf("CheckAndMark(%s) = %v, %v; want %v", tc.e, got, err, tc.dup)
				}
			}
			// Read back as Java does: RSet.contains and RSet.size.
			if ok, _ := do(t, c, c.B().Sismember().Key(name).Member("msg-3").Build()).AsBool(); !ok {
				t.Error("Java's contains(msg-3) is false after Go marked it")
			}
			if n, _ := do(t, c, c.B().Scard().Key(name).Build()).AsInt64(); n != 3 {
				t.Errorf("Java's size() = %d, want 3", n)
			}
			if n, err := d.UniqueCount(ctx); err != nil || n != 3 {
				t.Errorf("UniqueCount = %d, %v; want 3", n, err)
			}
			// Without the option the Go deduplicator never touches the Java set.
			own, err := NewDeduplicator(c, name, redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if dup, err := own.CheckAndMark(ctx, "msg-1"); err != nil || dup {
				t.Errorf("default options: CheckAndMark(msg-1) = %v, %v; want new (disjoint state)", dup, err)
			}
			if n, _ := do(t, c, c.B().Scard().Key(name).Build()).AsInt64(); n != 3 {
				t.Errorf("Java set size %d after a default-options deduplicator ran, want 3", n)
			}
			// A Java key of another type is a clear error, not a WRONGTYPE from deep inside.
			other := uniq("dedup-str")
			do(t, c, c.B().Set().Key(other).Value("x").Build())
			od, _ := NewDeduplicator(c, other, redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{JavaCompatible: true})
			if _, err := od.CheckAndMark(ctx, "e"); !errors.Is(err, ErrForeignState) || !strings.Contains(err.Error(), other) {
				t.Errorf("set dedup on a string key: err = %v, want ErrForeignState naming %s", err, other)
			}
		})
	}
}

// TestJavaKeysUntouchedByDefault: Java state at the Java keys (default prefixes) is left
// byte for byte as it was by limiters with default options, which decide on their own keys.
func TestJavaKeysUntouchedByDefault(t *testing.T) {
	for _, b := range javaBackends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			user := uniq("user")
			java := javaLimiter{c, DefaultKeyPrefix}
			javaTB := javaLimiter{c, javaTokenBucketPrefix}
			now := time.Now().UnixMilli()
			for i := 0; i < 3; i++ {
				java.sliding(t, user, now, 60000, 3)
				javaTB.token(t, user, 3, 1, now)
			}
			keys := []string{DefaultKeyPrefix + ":{" + user + "}", DefaultKeyPrefix + ":{" + user + "}:seq", javaTokenBucketPrefix + ":{" + user + "}:tb"}
			dump := func() []string {
				var out []string
				for _, k := range keys {
					out = append(out, snapshot(t, c, k))
				}
				return out
			}
			before := dump()
			for _, spec := range []redstream.Spec{redstream.SlidingWindow(time.Minute, 3), redstream.TokenBucket(3, 1)} {
				l := mustLimiter(t, c, spec, Options{})
				for i := 0; i < 3; i++ {
					d, err := l.AllowN(ctx, user, time.Time{}, 1)
					if err != nil || !d.Allowed {
						t.Fatalf("%v default options, request %d = %+v, %v; want allowed (own state, not Java's full window)", spec, i, d, err)
					}
				}
				if strings.Contains(strings.Join(keys, " "), l.Keys(user)[0]) {
					t.Errorf("%v default key %s is a Java key", spec, l.Keys(user)[0])
				}
			}
			after := dump()
			for i := range keys {
				if before[i] != after[i] || strings.HasPrefix(before[i], "none") {
					t.Errorf("Java key %s changed (or is empty)", keys[i])
				}
			}
		})
	}
}

// TestForeignState: every script meets keys it did not write (other types, another
// algorithm's value, the Java layout where JavaCompatible is off and redstream's where it is
// on) with ErrForeignState naming the key and what it holds, leaves the key as it was, and
// the failure policy applies.
func TestForeignState(t *testing.T) {
	type foreign struct {
		name  string
		write func(c rueidis.Client, k string) rueidis.Completed
		holds string
	}
	str := func(v string) foreign {
		return foreign{"string " + v, func(c rueidis.Client, k string) rueidis.Completed { return c.B().Set().Key(k).Value(v).Build() }, "a string \"" + v + "\""}
	}
	hash := foreign{"hash", func(c rueidis.Client, k string) rueidis.Completed {
		return c.B().Hset().Key(k).FieldValue().FieldValue("tokens", "2.5").FieldValue("ts", "1767225600000").Build()
	}, "a hash with fields"}
	javaZset := foreign{"Java sliding window", func(c rueidis.Client, k string) rueidis.Completed {
		return c.B().Zadd().Key(k).ScoreMember().ScoreMember(1767225600000, "1767225600000:1").Build()
	}, `member "1767225600000:1"`}
	ownZset := foreign{"redstream sliding log", func(c rueidis.Client, k string) rueidis.Completed {
		return c.B().Zadd().Key(k).ScoreMember().ScoreMember(1767225600000000, "3").Build()
	}, `member "3"`}
	list := foreign{"list", func(c rueidis.Client, k string) rueidis.Completed { return c.B().Rpush().Key(k).Element("a").Build() }, "a list"}
	bin := str("\x00\xff\"\\")
	bin.holds = `a string "\x00\xff\"\\"`
	cases := []struct {
		spec     redstream.Spec
		java     bool
		foreigns []foreign
	}{
		{redstream.TokenBucket(10, 10), false, []foreign{str("12:3"), hash, javaZset, list, bin}},
		{redstream.LeakyBucket(10, 10), false, []foreign{str("x"), hash}},
		{redstream.SlidingWindow(time.Second, 10), false, []foreign{str("5"), hash, javaZset, list}},
		{redstream.SlidingCounter(time.Second, 10), false, []foreign{str("12:3"), str("12"), hash, ownZset}},
		{redstream.FixedWindow(time.Second, 10), false, []foreign{str("12"), str("1:2:3"), hash, javaZset}},
		{redstream.SlidingWindow(time.Second, 10), true, []foreign{ownZset, str("5"), hash}},
		{redstream.TokenBucket(10, 10), true, []foreign{str("12"), ownZset, foreign{"hash of text", func(c rueidis.Client, k string) rueidis.Completed {
			return c.B().Hset().Key(k).FieldValue().FieldValue("tokens", "many").FieldValue("ts", "x").Build()
		}, `a hash with fields`}}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			for _, tc := range cases {
				for _, f := range tc.foreigns {
					t.Run(fmt.Sprintf("%v/java=%v/%s", tc.spec, tc.java, f.name), func(t *testing.T) {
						prefix := uniq("foreign")
						l := mustLimiter(t, c, tc.spec, Options{KeyPrefix: prefix, JavaCompatible: tc.java})
						k := l.Keys("k")[0]
						do(t, c, f.write(c, k))
						before := snapshot(t, c, k)
						d, err := l.AllowN(ctx, "k", t0, 1)
						if !errors.Is(err, ErrForeignState) || d.Allowed {
							t.Fatalf("AllowAt = %+v, %v; want denied with ErrForeignState", d, err)
						}
						t.Log(err)
						for _, want := range []string{"foreign state", strconv.Quote(k)[1 : len(k)+1], f.holds} {
							if !strings.Contains(err.Error(), want) {
								t.Errorf("error %q does not contain %q", err, want)
							}
						}
						if after := snapshot(t, c, k); after != before {
							t.Errorf("foreign key changed: %s, was %s", after, before)
						}
						if _, err := l.AllowBatch(ctx, []string{"k", "other"}, t0, 1); !errors.Is(err, ErrForeignState) {
							t.Errorf("AllowBatch: err = %v, want ErrForeignState", err)
						}
						if _, err := l.PeekN(ctx, "k", t0, 1); tc.java && !errors.Is(err, errors.ErrUnsupported) || !tc.java && !errors.Is(err, ErrForeignState) {
							t.Errorf("PeekN: err = %v, want ErrForeignState (ErrUnsupported with JavaCompatible)", err)
						}
						if after := snapshot(t, c, k); after != before {
							t.Errorf("foreign key changed by peek: %s, was %s", after, before)
						}
						open, err := redstream.WithFailurePolicy(mustLimiter(t, c, tc.spec, Options{KeyPrefix: prefix, JavaCompatible: tc.java}), redstream.FailOpen, nil)
						if err != nil {
							t.Fatal(err)
						}
						if d, err := open.AllowN(ctx, "k", t0, 1); err != nil || !d.Allowed {
							t.Errorf("FailOpen on foreign state = %+v, %v; want admitted", d, err)
						}
					})
				}
			}
			t.Run("dedup", func(t *testing.T) {
				name := uniq("foreign-dedup")
				w, err := newWindowDeduplicator(c, name, time.Minute, DedupOptions{})
				if err != nil {
					t.Fatal(err)
				}
				bl, err := newBloomDeduplicator(c, name, redstream.DedupSpec{Insertions: 100, FPRate: 0.01}, DedupOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, tc := range []struct {
					what string
					key  string
					cmd  rueidis.Completed
					call func() error
				}{
					{"window set", w.Keys()[0], c.B().Set().Key(w.Keys()[0]).Value("x").Build(), func() error { _, err := w.CheckAndMarkAt(ctx, "e", t0); return err }},
					{"window check", w.Keys()[0], c.B().Set().Key(w.Keys()[0]).Value("x").Build(), func() error { _, err := w.IsDuplicateAt(ctx, "e", t0); return err }},
					{"window mark", w.Keys()[1], c.B().Set().Key(w.Keys()[1]).Value("soon").Build(), func() error { _, err := w.CheckAndMarkAt(ctx, "e", t0); return err }},
					{"window count", w.Keys()[1], c.B().Set().Key(w.Keys()[1]).Value("inf").Build(), func() error { _, err := w.UniqueCountAt(ctx, t0); return err }},
					{"bloom add", bl.Keys()[0], c.B().Hset().Key(bl.Keys()[0]).FieldValue().FieldValue("f", "v").Build(), func() error { _, err := bl.CheckAndMark(ctx, "e"); return err }},
					{"bloom exists", bl.Keys()[0], c.B().Hset().Key(bl.Keys()[0]).FieldValue().FieldValue("f", "v").Build(), func() error { _, err := bl.IsDuplicate(ctx, "e"); return err }},
					{"bloom count", bl.Keys()[0], c.B().Hset().Key(bl.Keys()[0]).FieldValue().FieldValue("f", "v").Build(), func() error { _, err := bl.Count(ctx); return err }},
				} {
					c.Do(ctx, c.B().Del().Key(w.Keys()...).Build())
					c.Do(ctx, c.B().Del().Key(bl.Keys()...).Build())
					do(t, c, tc.cmd)
					before := snapshot(t, c, tc.key)
					if err := tc.call(); !errors.Is(err, ErrForeignState) || !strings.Contains(err.Error(), tc.key) {
						t.Errorf("%s: err = %v, want ErrForeignState naming %s", tc.what, err, tc.key)
					}
					if after := snapshot(t, c, tc.key); after != before {
						t.Errorf("%s: foreign key changed: %s, was %s", tc.what, after, before)
					}
				}
			})
			t.Run("multi", func(t *testing.T) {
				prefix := uniq("foreign-multi")
				m, err := NewMultiLimiter(c, []redstream.Spec{redstream.FixedWindow(time.Second, 5), redstream.SlidingWindow(time.Second, 5)}, Options{KeyPrefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				ks := m.Keys("k")
				do(t, c, c.B().Set().Key(ks[1]).Value("1:2").Build())
				if _, err := m.AllowN(ctx, "k", t0, 1); !errors.Is(err, ErrForeignState) || !strings.Contains(err.Error(), ks[1]) {
					t.Fatalf("multi: err = %v, want ErrForeignState naming %s", err, ks[1])
				}
				if n, _ := do(t, c, c.B().Exists().Key(ks[0]).Build()).AsInt64(); n != 0 {
					t.Error("multi wrote the first limit's state although the second is foreign")
				}
			})
		})
	}
}

// TestJavaCompatibleErrors: what has no Java layout is a configuration error, never a silent
// fallback to redstream's keys.
func TestJavaCompatibleErrors(t *testing.T) {
	c := nopClient(t)
	for _, spec := range []redstream.Spec{redstream.LeakyBucket(1, 1), redstream.SlidingCounter(time.Second, 1),
		redstream.FixedWindow(time.Second, 1), redstream.SlidingWindow(1500*time.Microsecond, 1)} {
		if _, err := NewLimiter(c, spec, Options{JavaCompatible: true}); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%v JavaCompatible: err = %v, want ErrInvalidConfig", spec, err)
		}
	}
	if _, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(1, 1)}, Options{JavaCompatible: true}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("multi JavaCompatible: err = %v, want ErrInvalidConfig", err)
	}
	for _, s := range []redstream.DedupStrategy{redstream.DedupWindowed, redstream.DedupBloom} {
		if _, err := NewDeduplicator(c, "d", redstream.DedupSpec{Strategy: s}, DedupOptions{JavaCompatible: true}); !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("%s dedup JavaCompatible: err = %v, want ErrInvalidConfig", s, err)
		}
	}
	if _, err := NewDeduplicator(c, "d", redstream.DedupSpec{Strategy: redstream.DedupSet}, DedupOptions{JavaCompatible: true, KeyPrefix: "p"}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("set dedup JavaCompatible with a KeyPrefix: err = %v, want ErrInvalidConfig", err)
	}
	l := mustLimiter(t, c, redstream.SlidingWindow(time.Second, 1), Options{JavaCompatible: true})
	if _, err := l.AllowN(context.Background(), "}x", t0, 1); err == nil || !strings.Contains(err.Error(), "hash tag") {
		t.Errorf("Java sliding window key starting with '}': err = %v, want the hash-tag error", err)
	}
}

// TestJavaOddKeysOnCluster: Java-layout keys with braces stay in one slot per user key on
// the real cluster (single decisions and batches).
func TestJavaOddKeysOnCluster(t *testing.T) {
	c := backends[2].client(t)
	ctx := context.Background()
	prefix := uniq("jodd")
	keys := []string{"user:1", "a{b}c", "{tag}", "x}{y", "{", "with space", "\x00\xff", strings.Repeat("k", 300)}
	for _, spec := range []redstream.Spec{redstream.SlidingWindow(time.Second, 2), redstream.TokenBucket(2, 1)} {
		l := mustLimiter(t, c, spec, Options{KeyPrefix: prefix + ":" + string(spec.Algorithm), JavaCompatible: true})
		for _, k := range keys {
			for i, want := range []bool{true, true, false} {
				d, err := l.AllowN(ctx, k, t0, 1)
				if err != nil || d.Allowed != want {
					t.Fatalf("%v %q #%d = %+v, %v; want allowed %v", spec, k, i, d, err, want)
				}
			}
		}
		ds, err := l.AllowBatch(ctx, keys, t0, 1)
		if err != nil {
			t.Fatalf("%v AllowBatch: %v", spec, err)
		}
		for i, d := range ds {
			if d.Allowed {
				t.Errorf("%v AllowBatch: %q allowed a third time", spec, keys[i])
			}
		}
	}
}

// fuzzSpecs are the limiters FuzzForeignState writes foreign values under: the five
// algorithms, then the two Java layouts.
var fuzzSpecs = []struct {
	spec redstream.Spec
	java bool
}{
	{redstream.TokenBucket(10, 10), false}, {redstream.LeakyBucket(10, 10), false},
	{redstream.SlidingWindow(time.Second, 10), false}, {redstream.SlidingCounter(time.Second, 10), false},
	{redstream.FixedWindow(time.Second, 10), false},
	{redstream.SlidingWindow(time.Second, 10), true}, {redstream.TokenBucket(10, 10), true},
}

// FuzzForeignState writes arbitrary values at a limiter's key (a string, a sorted-set member
// and score, a hash's tokens and ts) on a real redis-server and decides: the answer is a
// sane decision (Remaining, RetryAfter, ResetAfter >= 0, no RetryAfter when admitted) or
// ErrForeignState, never another script error.
func FuzzForeignState(f *testing.F) {
	for i := range fuzzSpecs {
		for _, v := range []string{"12:3", "1e308", "nan", "inf", "-5", "99999999999999999999:1", "1:2:3", "", "\x00", "1767225600000:1", "0x10", "5"} {
			f.Add(uint8(i), uint8(0), v, 1767225600000.0)
			f.Add(uint8(i), uint8(1), v, 1767225600000000.0)
			f.Add(uint8(i), uint8(2), v, -1.0)
		}
	}
	c := redistest.Client(f)
	f.Fuzz(func(t *testing.T, which, kind uint8, v string, score float64) {
		s := fuzzSpecs[int(which)%len(fuzzSpecs)]
		l := mustLimiter(t, c, s.spec, Options{KeyPrefix: uniq("fuzz"), JavaCompatible: s.java})
		k := l.Keys("k")[0]
		ctx := context.Background()
		var cmd rueidis.Completed
		switch kind % 3 {
		case 0:
			cmd = c.B().Set().Key(k).Value(v).Build()
		case 1:
			if math.IsNaN(score) {
				score = 0
			}
			cmd = c.B().Zadd().Key(k).ScoreMember().ScoreMember(score, v).Build()
		default:
			cmd = c.B().Hset().Key(k).FieldValue().FieldValue("tokens", v).FieldValue("ts", strconv.FormatFloat(score, 'g', -1, 64)).Build()
		}
		if err := c.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			d, err := l.AllowN(ctx, "k", t0.Add(time.Duration(i)*time.Millisecond), 1)
			if err != nil {
				if !errors.Is(err, ErrForeignState) {
					t.Fatalf("%v java=%v on %q (score %g): %v, want a decision or ErrForeignState", s.spec, s.java, v, score, err)
				}
				return
			}
			if d.Remaining < 0 || d.RetryAfter < 0 || d.ResetAfter < 0 || d.Delay < 0 || d.Allowed && d.RetryAfter != 0 {
				t.Fatalf("%v java=%v on %q (score %g): %+v", s.spec, s.java, v, score, d)
			}
		}
	})
}
