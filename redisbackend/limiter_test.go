package redisbackend

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// nopClient returns a client to a fresh miniredis, for tests that need a client but no data.

// batchLimiter is a limiter deciding many keys in one call, as redstream.AllowBatch finds it.
type batchLimiter interface {
	redstream.Limiter
	AllowBatch(ctx context.Context, keys []string, now time.Time, n int64) ([]redstream.Decision, error)
}

func nopClient(t testing.TB) rueidis.Client {
	t.Helper()
	c, _ := miniClient(t)
	return c
}

var t0 = time.UnixMicro(1767225600000000)

func TestNewLimiterErrors(t *testing.T) {
	c := nopClient(t)
	tests := []struct {
		name string
		spec redstream.Spec
		opts Options
	}{
		{"unknown algorithm", redstream.Spec{Algorithm: "nope"}, Options{}},
		{"zero capacity", redstream.TokenBucket(0, 1), Options{}},
		{"rate too high", redstream.TokenBucket(1, 2e6), Options{}},
		{"zero window", redstream.SlidingWindow(0, 1), Options{}},
		{"zero limit", redstream.FixedWindow(time.Second, 0), Options{}},
		{"brace in prefix", redstream.TokenBucket(1, 1), Options{KeyPrefix: "a{b"}},
		{"breaker error rate above 1", redstream.TokenBucket(1, 1), Options{Breaker: redstream.BreakerOptions{ErrorRate: 2}}},
		{"negative cool-down", redstream.TokenBucket(1, 1), Options{Breaker: redstream.BreakerOptions{CoolDown: -time.Second}}},
		{"negative margin", redstream.TokenBucket(1, 1), Options{ExpiryMargin: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewLimiter(c, tt.spec, tt.opts)
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
			if !strings.HasPrefix(err.Error(), "redisbackend: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
		})
	}
	if _, err := NewLimiter(nil, redstream.TokenBucket(1, 1), Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("nil client: err = %v, want ErrInvalidConfig", err)
	}
	if _, err := NewMultiLimiter(c, nil, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("no specs: err = %v, want ErrInvalidConfig", err)
	}
	if _, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(1, 1), {Algorithm: "x"}}, Options{}); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("bad second spec: err = %v, want ErrInvalidConfig", err)
	}
}

func mustLimiter(t testing.TB, c rueidis.Client, s redstream.Spec, o Options) *Limiter {
	t.Helper()
	l, err := NewLimiter(c, s, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// withPolicy wraps l in the failure policy p with fallback fb (nil: the in-process one).
func withPolicy(t testing.TB, l redstream.Limiter, p redstream.FailurePolicy, fb redstream.Limiter) redstream.Limiter {
	t.Helper()
	w, err := redstream.WithFailurePolicy(l, p, fb)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestDefaultPrefixes(t *testing.T) {
	c := nopClient(t)
	tests := []struct {
		spec   redstream.Spec
		prefix string
	}{
		{redstream.TokenBucket(1, 1), "streaming:rl"},
		{redstream.SlidingWindow(time.Second, 1), "streaming:rl"},
		{redstream.LeakyBucket(1, 1), "streaming:rl"},
		{redstream.SlidingCounter(time.Second, 1), "streaming:rl"},
		{redstream.FixedWindow(time.Second, 1), "streaming:rl"},
	}
	for _, tt := range tests {
		for _, blank := range []string{"", "  ", "\t"} {
			l := mustLimiter(t, c, tt.spec, Options{KeyPrefix: blank})
			if got := l.KeyPrefix(); got != tt.prefix {
				t.Errorf("%v with prefix %q: KeyPrefix() = %q, want %q", tt.spec, blank, got, tt.prefix)
			}
		}
	}
	m, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(1, 1)}, Options{})
	if err != nil || m.KeyPrefix() != DefaultKeyPrefix {
		t.Errorf("multi: KeyPrefix() = %q, %v; want %q", m.KeyPrefix(), err, DefaultKeyPrefix)
	}
	if got := mustLimiter(t, c, redstream.TokenBucket(1, 1), Options{JavaCompatible: true}).KeyPrefix(); got != "streaming:tb" {
		t.Errorf("JavaCompatible token bucket: KeyPrefix() = %q, want the Java class's streaming:tb", got)
	}
	if got, want := mustLimiter(t, c, redstream.SlidingWindow(time.Second, 1), Options{}).Keys("user:1")[0], "streaming:rl:{user:1}:sliding.1000000.1"; got != want {
		t.Errorf("Keys = %q, want %q", got, want)
	}
	if got, want := mustLimiter(t, c, redstream.SlidingWindow(time.Second, 1), Options{JavaCompatible: true}).Keys("user:1")[0], "streaming:rl:{user:1}"; got != want {
		t.Errorf("JavaCompatible: Keys = %q, want the Java layout %q", got, want)
	}
}

func TestBadInput(t *testing.T) {
	c := nopClient(t)
	ctx := context.Background()
	rsingle := mustLimiter(t, c, redstream.TokenBucket(5, 1), Options{})
	rmulti, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(5, 1), redstream.FixedWindow(time.Second, 3)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	single := withPolicy(t, rsingle, redstream.FailOpen, nil).(batchLimiter)
	multi := withPolicy(t, rmulti, redstream.FailOpen, nil).(batchLimiter)
	defer func(old int) { maxBulk = old }(maxBulk)
	maxBulk = 1 << 20
	tests := []struct {
		name string
		key  string
		now  time.Time
		n    int64
		want error
	}{
		{"empty key", "", t0, 1, redstream.ErrEmptyKey},
		{"zero cost", "k", t0, 0, redstream.ErrInvalidCost},
		{"negative cost", "k", t0, -1, redstream.ErrInvalidCost},
		{"cost above the limit", "k", t0, 6, redstream.ErrCostTooLarge},
		{"before the epoch", "k", time.UnixMicro(-1), 1, redstream.ErrInvalidTime},
		{"after MaxTime", "k", time.UnixMicro(1<<52 + 1), 1, redstream.ErrInvalidTime},
		{"key too large", strings.Repeat("k", 1<<20), t0, 1, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, l := range []batchLimiter{single, multi} {
				n := tt.n
				if l == multi && n == 6 {
					n = 4 // above the fixed window's 3
				}
				d, err := l.AllowN(ctx, tt.key, tt.now, n)
				if !errors.Is(err, tt.want) {
					t.Errorf("%v: err = %v, want %v (bad input is never subject to FailOpen)", l, err, tt.want)
				}
				if d.Allowed {
					t.Errorf("%v: bad input allowed", l)
				}
				if _, err := l.AllowBatch(ctx, []string{"ok", tt.key}, tt.now, n); !errors.Is(err, tt.want) {
					t.Errorf("%v: AllowBatch err = %v, want %v", l, err, tt.want)
				}
			}
		})
	}
	if err := rsingle.Reset(ctx, ""); !errors.Is(err, redstream.ErrEmptyKey) {
		t.Errorf("Reset(\"\") = %v, want ErrEmptyKey", err)
	}
}

// TestKeyOfOneMegabyte runs a 1 MB key on real Redis.
func TestKeyOfOneMegabyte(t *testing.T) {
	c := redistest.Client(t)
	l := mustLimiter(t, c, redstream.SlidingWindow(time.Minute, 2), Options{KeyPrefix: uniq("big")})
	key := strings.Repeat("\xff{}", (1<<20)/3)
	for i, want := range []bool{true, true, false} {
		d, err := l.AllowN(context.Background(), key, t0, 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("AllowAt #%d = %+v, %v; want Allowed %v", i, d, err, want)
		}
	}
}

// counting wraps a client and counts its round trips (Do and DoMulti calls).
type counting struct {
	rueidis.Client
	trips atomic.Int64
}

func (c *counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.trips.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *counting) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.trips.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

// commandCalls returns the calls per command from INFO commandstats.
func commandCalls(t *testing.T, c rueidis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
	}
	return out
}

// TestOneRoundTrip counts round trips with a wrapping client and commands with INFO
// commandstats on a dedicated server: one EVALSHA per decision, nothing else; one pipeline
// per batch.
func TestOneRoundTrip(t *testing.T) {
	s := redistest.NewServer(t)
	admin := redistest.NewClient(t, s.Addr)
	cc := &counting{Client: redistest.NewClient(t, s.Addr)}
	ctx := context.Background()
	for _, alg := range redstream.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			spec := redstream.Spec{Algorithm: alg, Capacity: 10, Rate: 10, Window: time.Second, Limit: 10}
			l := mustLimiter(t, cc, spec, Options{})
			if _, err := l.AllowN(ctx, "warm", time.Time{}, 1); err != nil { // loads the script
				t.Fatal(err)
			}
			if err := admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			cc.trips.Store(0)
			const n = 50
			for i := 0; i < n; i++ {
				if _, err := l.AllowN(ctx, "k"+strconv.Itoa(i%7), time.Time{}, 1); err != nil {
					t.Fatal(err)
				}
			}
			if got := cc.trips.Load(); got != n {
				t.Errorf("round trips = %d, want %d", got, n)
			}
			calls := commandCalls(t, admin)
			if calls["evalsha"] != n {
				t.Errorf("evalsha calls = %d, want %d (commandstats %v)", calls["evalsha"], n, calls)
			}
			// commandstats also counts the commands scripts call; of the commands a client
			// can send, only EVALSHA may appear.
			for _, cmd := range []string{"eval", "eval_ro", "evalsha_ro", "script|load", "get", "set"} {
				if calls[cmd] > 0 && (cmd != "get" && cmd != "set" || calls[cmd] > n) {
					t.Errorf("command %s called %d times, want none beyond the scripts' own", cmd, calls[cmd])
				}
			}
			cc.trips.Store(0)
			keys := make([]string, 200)
			for i := range keys {
				keys[i] = "b" + strconv.Itoa(i)
			}
			if _, err := l.AllowBatch(ctx, keys, time.Time{}, 1); err != nil {
				t.Fatal(err)
			}
			if got := cc.trips.Load(); got != 1 {
				t.Errorf("batch of %d keys: round trips = %d, want 1", len(keys), got)
			}
		})
	}
}

// TestScriptFlush: after SCRIPT FLUSH (or a restart) single calls and batches reload the
// script and still decide once per call.
func TestScriptFlush(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	l := mustLimiter(t, c, redstream.FixedWindow(time.Hour, 3), Options{KeyPrefix: uniq("flush")})
	for round := 0; round < 2; round++ {
		if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AllowN(ctx, "a", t0, 1); err != nil {
			t.Fatalf("after SCRIPT FLUSH: %v", err)
		}
		if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AllowBatch(ctx, []string{"a", "b"}, t0, 1); err != nil {
			t.Fatalf("batch after SCRIPT FLUSH: %v", err)
		}
	}
	for _, k := range []string{"a", "b"} {
		d, err := l.AllowN(ctx, k, t0, 1)
		if err != nil {
			t.Fatal(err)
		}
		// a: 2 + 2 decisions before, b: 2; the limit is 3.
		if want := k == "b"; d.Allowed != want {
			t.Errorf("key %s: Allowed = %v, want %v: a reloaded script must run exactly once", k, d.Allowed, want)
		}
	}
}

// TestScriptErrorNamesScript: a key holding something else fails with an error naming the
// script, and follows the failure policy.
func TestScriptErrorNamesScript(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	for _, alg := range redstream.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			spec := redstream.Spec{Algorithm: alg, Capacity: 10, Rate: 10, Window: time.Second, Limit: 10}
			l := mustLimiter(t, c, spec, Options{KeyPrefix: uniq("bad")})
			k := l.Keys("k")[0]
			if err := c.Do(ctx, c.B().Hset().Key(k).FieldValue().FieldValue("f", "v").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			_, err := l.AllowN(ctx, "k", time.Time{}, 1)
			if err == nil || !strings.Contains(err.Error(), scriptFor(alg).name) {
				t.Fatalf("err = %v, want one naming %s", err, scriptFor(alg).name)
			}
			open := withPolicy(t, mustLimiter(t, c, spec, Options{KeyPrefix: l.KeyPrefix()}), redstream.FailOpen, nil)
			if d, err := open.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
				t.Errorf("FailOpen on a script error = %+v, %v; want allowed", d, err)
			}
		})
	}
}

// TestRedisDown: with Redis unreachable, every policy answers without hanging past the
// context deadline.
func TestRedisDown(t *testing.T) {
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	spec := redstream.TokenBucket(2, 1)
	limiters := map[redstream.FailurePolicy]redstream.Limiter{
		redstream.FailClosed:   mustLimiter(t, c, spec, Options{}),
		redstream.FailOpen:     withPolicy(t, mustLimiter(t, c, spec, Options{}), redstream.FailOpen, nil),
		redstream.FailFallback: withPolicy(t, mustLimiter(t, c, spec, Options{}), redstream.FailFallback, nil),
	}
	if _, err := limiters[redstream.FailClosed].AllowN(context.Background(), "k", time.Time{}, 1); err != nil {
		t.Fatalf("with Redis up: %v", err)
	}
	s.Stop()
	for policy, l := range limiters {
		t.Run(policy.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			var ds []redstream.Decision
			var errs []error
			for i := 0; i < 3; i++ {
				d, err := l.AllowN(ctx, "k", time.Time{}, 1)
				ds, errs = append(ds, d), append(errs, err)
			}
			bd, berr := redstream.AllowBatch(ctx, l, []string{"x", "y"}, time.Time{}, 1)
			if el := time.Since(start); el > 10*time.Second {
				t.Errorf("calls took %v with a 300ms deadline", el)
			}
			switch policy {
			case redstream.FailClosed:
				for i, err := range errs {
					if err == nil || ds[i].Allowed {
						t.Errorf("call %d = %+v, %v; want an error and a denial", i, ds[i], err)
					}
				}
				if berr == nil || bd[0].Allowed {
					t.Errorf("batch = %+v, %v; want an error and denials", bd, berr)
				}
			case redstream.FailOpen:
				for i, err := range errs {
					if err != nil || !ds[i].Allowed {
						t.Errorf("call %d = %+v, %v; want allowed", i, ds[i], err)
					}
				}
				if berr != nil || !bd[0].Allowed || !bd[1].Allowed {
					t.Errorf("batch = %+v, %v; want all allowed", bd, berr)
				}
			case redstream.FailFallback:
				// The fallback (in-process, capacity 2) admits two of the three.
				for i, want := range []bool{true, true, false} {
					if errs[i] != nil || ds[i].Allowed != want {
						t.Errorf("call %d = %+v, %v; want the fallback's Allowed=%v", i, ds[i], errs[i], want)
					}
				}
				if berr != nil || !bd[0].Allowed {
					t.Errorf("batch = %+v, %v; want the fallback's decisions", bd, berr)
				}
			}
		})
	}
}

// TestServerClock decides with the Redis server's TIME from two clients and no client
// clock: together they get exactly the bucket's capacity.
func TestServerClock(t *testing.T) {
	addr := redistest.Addr(t)
	c1, c2 := redistest.NewClient(t, addr), redistest.NewClient(t, addr)
	ctx := context.Background()
	prefix := uniq("time")
	specs := []redstream.Spec{
		redstream.TokenBucket(5, 0.001), redstream.LeakyBucket(5, 0.001), redstream.SlidingWindow(time.Hour, 5),
		redstream.SlidingCounter(time.Hour, 5), redstream.FixedWindow(24*time.Hour, 5),
	}
	for _, spec := range specs {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			p := prefix + ":" + string(spec.Algorithm)
			l1 := mustLimiter(t, c1, spec, Options{KeyPrefix: p})
			l2 := mustLimiter(t, c2, spec, Options{KeyPrefix: p})
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for _, l := range []*Limiter{l1, l2, l1, l2} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 5; i++ {
						d, err := l.AllowN(ctx, "shared", time.Time{}, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			// The fixed window may straddle a day boundary between two calls; every other
			// algorithm admits exactly 5 of the 20.
			if got := allowed.Load(); got != 5 && !(spec.Algorithm == redstream.AlgorithmFixedWindow && got <= 10) {
				t.Errorf("allowed %d of 20 at the server's clock, want 5", got)
			}
			ds, err := l1.AllowBatch(ctx, []string{"shared", "fresh"}, time.Time{}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !ds[1].Allowed {
				t.Errorf("batch at the server's clock: a fresh key was denied: %+v", ds[1])
			}
		})
	}
	multi1, err := NewMultiLimiter(c1, specs, Options{KeyPrefix: prefix + ":m"})
	if err != nil {
		t.Fatal(err)
	}
	multi2, _ := NewMultiLimiter(c2, specs, Options{KeyPrefix: prefix + ":m"})
	got := 0
	for i := 0; i < 10; i++ {
		l := multi1
		if i%2 == 1 {
			l = multi2
		}
		d, err := l.AllowN(ctx, "shared", time.Time{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	if got != 5 {
		t.Errorf("multi at the server's clock: allowed %d of 10, want 5", got)
	}
}

// TestExpiry: keys carry a TTL of their remaining state plus the margin, so idle keys leave
// Redis.
func TestExpiry(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	for _, spec := range []redstream.Spec{
		redstream.TokenBucket(10, 10), redstream.LeakyBucket(10, 10), redstream.SlidingWindow(time.Second, 10),
		redstream.SlidingCounter(time.Second, 10), redstream.FixedWindow(time.Second, 10),
	} {
		l := mustLimiter(t, c, spec, Options{KeyPrefix: uniq("ttl"), ExpiryMargin: 500 * time.Millisecond})
		d, err := l.AllowN(ctx, "k", time.Time{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.Do(ctx, c.B().Pttl().Key(l.Keys("k")[0]).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		max := (d.ResetAfter+999*time.Microsecond)/time.Millisecond + 500
		if ttl <= 0 || ttl > int64(max) {
			t.Errorf("%v: PTTL = %dms, want in (0, %d] (ResetAfter %v + margin)", spec, ttl, max, d.ResetAfter)
		}
	}
}

// TestRedisHangs: while the server is stuck (DEBUG SLEEP), a decision returns at its
// context deadline, not after the server wakes up.
func TestRedisHangs(t *testing.T) {
	s := debugServer(t)
	c := redistest.NewClient(t, s.Addr)
	admin := redistest.NewClient(t, s.Addr)
	closed := mustLimiter(t, c, redstream.TokenBucket(2, 1), Options{})
	open := withPolicy(t, mustLimiter(t, c, redstream.TokenBucket(2, 1), Options{}), redstream.FailOpen, nil)
	ctx := context.Background()
	if _, err := closed.AllowN(ctx, "warm", time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() { slept <- admin.Do(ctx, admin.B().Arbitrary("DEBUG", "SLEEP").Args("3").Build()).Error() }()
	time.Sleep(100 * time.Millisecond) // let DEBUG SLEEP start
	for _, tc := range []struct {
		name string
		l    redstream.Limiter
	}{{"fail-closed", closed}, {"fail-open", open}} {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		d, err := tc.l.AllowN(cctx, "k", time.Time{}, 1)
		el := time.Since(start)
		cancel()
		if tc.l == closed && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: err = %v, want context.DeadlineExceeded", tc.name, err)
		}
		if tc.l == open && (err != nil || !d.Allowed) {
			t.Errorf("%s: %+v, %v; want allowed", tc.name, d, err)
		}
		// Generous bound: the server sleeps 3 s; returning before it wakes proves the
		// deadline was honoured.
		if el >= 2500*time.Millisecond {
			t.Errorf("%s: returned after %v, past the 200ms deadline and close to the server's wake-up", tc.name, el)
		}
	}
	if err := <-slept; err != nil {
		t.Logf("DEBUG SLEEP: %v", err)
	}
}

// debugServer returns a dedicated server that accepts DEBUG. Redis 7.0+ and Valkey refuse it
// unless started with --enable-debug-command, a directive older servers do not know (and
// refuse to start with), so the test asks DEBUG SLEEP 0 once on a plain server and restarts
// it with the directive only when DEBUG is refused.
func debugServer(t *testing.T) *redistest.Server {
	t.Helper()
	ctx := context.Background()
	probe := func(s *redistest.Server) error {
		c := redistest.NewClient(t, s.Addr)
		defer c.Close()
		return c.Do(ctx, c.B().Arbitrary("DEBUG", "SLEEP").Args("0").Build()).Error()
	}
	s := redistest.NewServer(t)
	err := probe(s)
	if err == nil {
		return s
	}
	t.Logf("DEBUG refused (%v): restarting with --enable-debug-command yes", err)
	s.Stop()
	s = redistest.NewServer(t, "--enable-debug-command", "yes")
	if err := probe(s); err != nil {
		t.Fatalf("DEBUG SLEEP 0 with --enable-debug-command yes: %v", err)
	}
	return s
}
