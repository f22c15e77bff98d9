package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httplimit"
	"github.com/redstream-go/redstream/internal/failure"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// sfItem is one member of an RFC 9651 list whose items are Strings with Integer parameters,
// the shape of both RateLimit fields.
type sfItem struct {
	name   string
	params map[string]int64
	keys   []string // parameter keys in order
}

// parseSFList parses a field value as such a list, strictly: sf-string items, parameters
// ";key=integer" with lowercase keys, members separated by OWS "," OWS, no empty member.
func parseSFList(v string) ([]sfItem, error) {
	var items []sfItem
	i := 0
	for {
		if i >= len(v) || v[i] != '"' {
			return nil, fmt.Errorf("at %d: want a string item in %q", i, v)
		}
		i++
		var name strings.Builder
		for {
			if i >= len(v) {
				return nil, fmt.Errorf("unterminated string in %q", v)
			}
			c := v[i]
			if c == '\\' {
				if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
					return nil, fmt.Errorf("bad escape at %d in %q", i, v)
				}
				name.WriteByte(v[i+1])
				i += 2
				continue
			}
			if c == '"' {
				i++
				break
			}
			if c < 0x20 || c > 0x7e {
				return nil, fmt.Errorf("byte %#x in a string in %q", c, v)
			}
			name.WriteByte(c)
			i++
		}
		it := sfItem{name: name.String(), params: map[string]int64{}}
		for i < len(v) && v[i] == ';' {
			i++
			start := i
			for i < len(v) && (v[i] >= 'a' && v[i] <= 'z' || v[i] >= '0' && v[i] <= '9' || v[i] == '_' || v[i] == '-' || v[i] == '.' || v[i] == '*') {
				i++
			}
			key := v[start:i]
			if key == "" || key[0] < 'a' || key[0] > 'z' || i >= len(v) || v[i] != '=' {
				return nil, fmt.Errorf("bad parameter at %d in %q", start, v)
			}
			i++
			start = i
			if i < len(v) && v[i] == '-' {
				i++
			}
			for i < len(v) && v[i] >= '0' && v[i] <= '9' {
				i++
			}
			if i-start > 15 {
				return nil, fmt.Errorf("integer too long at %d in %q", start, v)
			}
			n, err := strconv.ParseInt(v[start:i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad integer at %d in %q", start, v)
			}
			if _, dup := it.params[key]; dup {
				return nil, fmt.Errorf("repeated parameter %q in %q", key, v)
			}
			it.params[key] = n
			it.keys = append(it.keys, key)
		}
		items = append(items, it)
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i == len(v) {
			return items, nil
		}
		if v[i] != ',' {
			return nil, fmt.Errorf("at %d: want ',' in %q", i, v)
		}
		i++
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i == len(v) {
			return nil, fmt.Errorf("trailing comma in %q", v)
		}
	}
}

// checkDraftSyntax checks h's RateLimit fields against the draft: RateLimit-Policy items
// carry q > 0 and optionally w > 0; RateLimit items carry r >= 0 and t >= 0 and name a
// policy of RateLimit-Policy; both lists name each policy once. It returns the names of
// the RateLimit items in order.
func checkDraftSyntax(t *testing.T, h http.Header) []string {
	t.Helper()
	pol, err := parseSFList(strings.Join(h.Values("RateLimit-Policy"), ", "))
	if err != nil {
		t.Fatalf("RateLimit-Policy: %v", err)
	}
	rl, err := parseSFList(strings.Join(h.Values("RateLimit"), ", "))
	if err != nil {
		t.Fatalf("RateLimit: %v", err)
	}
	policies := map[string]bool{}
	for _, p := range pol {
		if policies[p.name] {
			t.Errorf("RateLimit-Policy names %q twice", p.name)
		}
		policies[p.name] = true
		if q, ok := p.params["q"]; !ok || q <= 0 || p.keys[0] != "q" {
			t.Errorf("policy %q: q = %d (present %v), want a positive quota first", p.name, q, ok)
		}
		if w, ok := p.params["w"]; ok && w <= 0 {
			t.Errorf("policy %q: w = %d, want > 0", p.name, w)
		}
	}
	var names []string
	seen := map[string]bool{}
	for _, it := range rl {
		r, okR := it.params["r"]
		tt, okT := it.params["t"]
		if !okR || !okT || r < 0 || tt < 0 {
			t.Errorf("RateLimit item %q: r=%d (%v) t=%d (%v), want both >= 0", it.name, r, okR, tt, okT)
		}
		if !policies[it.name] {
			t.Errorf("RateLimit item %q names no policy of RateLimit-Policy %v", it.name, h.Values("RateLimit-Policy"))
		}
		if seen[it.name] {
			t.Errorf("RateLimit names %q twice", it.name)
		}
		seen[it.name] = true
		names = append(names, it.name)
	}
	return names
}

// TestStackedMiddlewares: two (and three) stacked middlewares each add their item to both
// fields, outer first, in one field line each; a denial by the inner one keeps the outer
// one's items and adds its own with Retry-After; a denial by the outer one stops before the
// inner one, whose items are then absent.
func TestStackedMiddlewares(t *testing.T) {
	clk := newClock(time.Unix(1_800_000_000, 0))
	newMW := func(name string, limit int64, window time.Duration) *httplimit.Middleware {
		t.Helper()
		mem, err := memory.NewLimiter(redstream.FixedWindow(window, limit), clk.opts())
		if err != nil {
			t.Fatal(err)
		}
		named, _ := metrics.Named(name, mem)
		m, err := httplimit.New(httplimit.Options{Limiter: named, Key: byUser})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	perIP := newMW("stack-ip", 5, time.Hour)
	perUser := newMW("stack-user", 2, time.Minute)
	h := perIP.Wrap(perUser.Wrap(okHandler))
	polBoth := `"stack-ip";q=5;w=3600, "stack-user";q=2;w=60`
	for i, w := range []want{
		{200, polBoth, `"stack-ip";r=4;t=3600, "stack-user";r=1;t=60`, ""},
		{200, polBoth, `"stack-ip";r=3;t=3600, "stack-user";r=0;t=60`, ""},
		// The inner limit denies: both items, the inner one's Retry-After.
		{429, polBoth, `"stack-ip";r=2;t=3600, "stack-user";r=0;t=60`, "60"},
	} {
		rec := get(t, h, "alice")
		check(t, i, rec, w)
		if names := checkDraftSyntax(t, rec.Header()); fmt.Sprint(names) != "[stack-ip stack-user]" {
			t.Errorf("request %d: RateLimit items %v, want outer first", i, names)
		}
		if n := len(rec.Header().Values("RateLimit")); n != 1 {
			t.Errorf("request %d: %d RateLimit field lines, want 1", i, n)
		}
	}
	clk.add(time.Minute)
	for range 2 {
		get(t, h, "alice")
	}
	// The outer limit is spent: it denies before the inner one runs.
	rec := get(t, h, "alice")
	check(t, 9, rec, want{429, `"stack-ip";q=5;w=3600`, `"stack-ip";r=0;t=3540`, "3540"})
	checkDraftSyntax(t, rec.Header())

	// Three deep, with a multi-limit in the middle (one minute into the hour, 28860 s
	// into the day).
	multi, err := redstream.Multi(func(s []redstream.Spec) (redstream.Limiter, error) {
		return memory.NewMultiLimiter(s, clk.opts())
	},
		redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(10, 1)},
		redstream.Rule{Name: "daily", Spec: redstream.FixedWindow(24*time.Hour, 1000)},
	)
	if err != nil {
		t.Fatal(err)
	}
	mid, _ := httplimit.New(httplimit.Options{Limiter: multi, Key: byUser})
	inner := newMW("stack-inner", 3, time.Second)
	h3 := newMW("stack-outer", 100, time.Hour).Wrap(mid.Wrap(inner.Wrap(okHandler)))
	rec = get(t, h3, "bob")
	check(t, 10, rec, want{200,
		`"stack-outer";q=100;w=3600, "burst";q=10;w=10, "daily";q=1000;w=86400, "stack-inner";q=3;w=1`,
		`"stack-outer";r=99;t=3540, "burst";r=9;t=57540, "stack-inner";r=2;t=1`, ""})
	if names := checkDraftSyntax(t, rec.Header()); fmt.Sprint(names) != "[stack-outer burst stack-inner]" {
		t.Errorf("three deep: RateLimit items %v", names)
	}

	// A field line written before the middleware (a proxy's, say) is kept, and the list
	// goes on after it.
	pre := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"edge";q=50`)
		w.Header().Set("RateLimit", `"edge";r=49;t=1`)
		newMW("stack-after-edge", 1, time.Hour).Wrap(okHandler).ServeHTTP(w, r)
	})
	rec = get(t, pre, "carol")
	check(t, 11, rec, want{200, `"edge";q=50, "stack-after-edge";q=1;w=3600`, `"edge";r=49;t=1, "stack-after-edge";r=0;t=3540`, ""})
	checkDraftSyntax(t, rec.Header())
}

func TestParseSFList(t *testing.T) {
	for _, bad := range []string{``, `api;q=1`, `"a";q=1,`, `"a";Q=1`, `"a";q=x`, `"a";q=1;q=2`, `"a" "b"`, `"a\x"`, `"a`} {
		if _, err := parseSFList(bad); err == nil {
			t.Errorf("parseSFList(%q) accepted", bad)
		}
	}
	items, err := parseSFList(`"a";q=1;w=2,  "b\"c";r=0`)
	if err != nil || len(items) != 2 || items[1].name != `b"c` || items[0].params["w"] != 2 {
		t.Errorf("parseSFList = %+v, %v", items, err)
	}
}

// TestFailurePolicyCountedOnce: behind the middleware, a failing backend's decisions are
// answered by the limiter's own failure policy and counted once per request in
// redis_streaming_rl_fallback_total, however Named and WithFailurePolicy are stacked; the
// middleware applies no policy of its own (fail-closed errors are 503, counted as errors).
func TestFailurePolicyCountedOnce(t *testing.T) {
	down := fmt.Errorf("redis down")
	fallback := func(name string) uint64 {
		return metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_fallback_total", "name", name, "reason", string(failure.Error))).Get()
	}
	errs := func(name string) uint64 {
		return metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_errors_total", "name", name)).Get()
	}
	for _, tc := range []struct {
		name   string
		build  func(name string) redstream.Limiter
		status int
	}{
		{"Named outside fail-open", func(n string) redstream.Limiter {
			p, _ := redstream.WithFailurePolicy(&fakeLimiter{err: down}, redstream.FailOpen, nil)
			l, _ := metrics.Named(n, p)
			return l
		}, 200},
		{"Named inside fail-open", func(n string) redstream.Limiter {
			l, _ := metrics.Named(n, &fakeLimiter{err: down})
			p, _ := redstream.WithFailurePolicy(l, redstream.FailOpen, nil)
			return p
		}, 200},
		{"fail-closed", func(n string) redstream.Limiter {
			l, _ := metrics.Named(n, &fakeLimiter{err: down})
			return l
		}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "policy-count-" + strings.ReplaceAll(tc.name, " ", "-")
			m, err := httplimit.New(httplimit.Options{Limiter: tc.build(name), Key: byUser})
			if err != nil {
				t.Fatal(err)
			}
			h := m.Wrap(okHandler)
			fb0, e0 := fallback(name), errs(name)
			for i := range 3 {
				if rec := get(t, h, "u"); rec.Code != tc.status {
					t.Fatalf("request %d: status %d, want %d", i, rec.Code, tc.status)
				}
			}
			wantFB, wantErr := uint64(3), uint64(3)
			if tc.status == 503 {
				wantFB = 0
			}
			if got := fallback(name) - fb0; got != wantFB {
				t.Errorf("fallback_total +%d, want +%d", got, wantFB)
			}
			if got := errs(name) - e0; got != wantErr {
				t.Errorf("errors_total +%d, want +%d", got, wantErr)
			}
		})
	}
}

// TestHungRedisServesFallback: a real Redis limiter behind the middleware, Redis hung
// (SIGSTOP): with FailFallback (a nil fallback: an in-process limiter of the same spec)
// every request is answered within about the engine's 100ms timeout, and at once once its
// breaker is open, with the fallback's RateLimit fields; the fallbacks are counted.
func TestHungRedisServesFallback(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Hour, 1000), redisbackend.Options{KeyPrefix: "httplimit-hung"})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := redstream.WithFailurePolicy(rl, redstream.FailFallback, nil)
	if err != nil {
		t.Fatal(err)
	}
	named, _ := metrics.Named("hung-api", fb)
	m, err := httplimit.New(httplimit.Options{Limiter: named, Key: byUser})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(okHandler)
	if rec := get(t, h, "u"); rec.Code != 200 {
		t.Fatalf("healthy: status %d", rec.Code)
	}
	pid := serverPIDOf(t, client)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	before := metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_fallback_total", "name", "hung-api", "reason", string(failure.BreakerOpen))).Get()
	var slowest, last, lastStall time.Duration
	meter := redistest.NewStallMeter(t)
	for i := range 20 {
		var rec *httptest.ResponseRecorder
		took, stall := meter.Time(func() { rec = get(t, h, "u") })
		slowest, last, lastStall = max(slowest, took), took, stall
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("RateLimit"), `"hung-api";r=`) {
			t.Fatalf("request %d with Redis hung: %d %v", i, rec.Code, rec.Header())
		}
	}
	t.Logf("20 requests with Redis hung: slowest %v, last %v", slowest.Round(time.Microsecond), last.Round(time.Microsecond))
	if slowest > time.Second || last > 50*time.Millisecond+lastStall {
		t.Errorf("slowest %v, last %v (the process stalled %v meanwhile): want about the 100ms timeout, then immediate", slowest, last, lastStall)
	}
	after := metrics.RateLimit.GetOrCreateCounter(metrics.Name("redis_streaming_rl_fallback_total", "name", "hung-api", "reason", string(failure.BreakerOpen))).Get()
	if after-before < 10 {
		t.Errorf("breaker_open fallbacks +%d, want most of the 20", after-before)
	}
}

// serverPIDOf returns the process id of the redis-server behind client.
func serverPIDOf(t *testing.T, client rueidis.Client) int {
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
