package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httplimit"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type fakeLimiter struct {
	d      redstream.Decision
	err    error
	policy redstream.FailurePolicy
}

func (f *fakeLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return f.d, f.err
}

// reporting is a fakeLimiter that reports a failure policy.
type reporting struct{ fakeLimiter }

func (r *reporting) FailurePolicy() redstream.FailurePolicy { return r.policy }

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

func byUser(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }

func get(t *testing.T, h http.Handler, user string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

type want struct {
	status     int
	policy     string
	ratelimit  string
	retryAfter string
}

func check(t *testing.T, i int, rec *httptest.ResponseRecorder, w want) {
	t.Helper()
	h := rec.Header()
	if rec.Code != w.status || h.Get("RateLimit-Policy") != w.policy || h.Get("RateLimit") != w.ratelimit || h.Get("Retry-After") != w.retryAfter {
		t.Errorf("request %d: status %d, RateLimit-Policy %q, RateLimit %q, Retry-After %q; want %d, %q, %q, %q",
			i, rec.Code, h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"),
			w.status, w.policy, w.ratelimit, w.retryAfter)
	}
}

// clock is a settable clock for memory engines.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time)            { c.ns.Store(t.UnixNano()) }
func newClock(t time.Time) *clock           { c := &clock{}; c.set(t); return c }
func (c *clock) opts() memory.Options       { return memory.Options{Clock: c.now} }
func (c *clock) add(d time.Duration) *clock { c.ns.Add(int64(d)); return c }

func TestHeadersNamedSingle(t *testing.T) {
	clk := newClock(time.Unix(1_800_000_000, 0)) // aligned to a minute
	mem, err := memory.NewLimiter(redstream.FixedWindow(time.Minute, 3), clk.opts())
	if err != nil {
		t.Fatal(err)
	}
	named, _ := metrics.Named("api", mem)
	m, err := httplimit.New(httplimit.Options{Limiter: named, Key: byUser})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(okHandler)
	pol := `"api";q=3;w=60`
	for i, w := range []want{
		{200, pol, `"api";r=2;t=60`, ""},
		{200, pol, `"api";r=1;t=60`, ""},
		{200, pol, `"api";r=0;t=60`, ""},
		{429, pol, `"api";r=0;t=60`, "60"},
	} {
		check(t, i, get(t, h, "alice"), w)
	}
	clk.add(59*time.Second + 500*time.Millisecond)
	check(t, 4, get(t, h, "alice"), want{429, pol, `"api";r=0;t=1`, "1"})
	check(t, 5, get(t, h, "bob"), want{200, pol, `"api";r=2;t=1`, ""})
	clk.add(time.Second)
	check(t, 6, get(t, h, "alice"), want{200, pol, `"api";r=2;t=60`, ""})
}

func TestHeadersMulti(t *testing.T) {
	clk := newClock(time.Unix(1_800_000_000, 0))
	multi, err := redstream.Multi(func(s []redstream.Spec) (redstream.Limiter, error) {
		return memory.NewMultiLimiter(s, clk.opts())
	},
		redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(2, 1)},
		redstream.Rule{Name: "hourly", Spec: redstream.FixedWindow(time.Hour, 100)},
	)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := httplimit.New(httplimit.Options{Limiter: multi, Key: byUser})
	h := m.Wrap(okHandler)
	pol := `"burst";q=2;w=2, "hourly";q=100;w=3600`
	check(t, 0, get(t, h, "u"), want{200, pol, `"burst";r=1;t=3600`, ""})
	check(t, 1, get(t, h, "u"), want{200, pol, `"burst";r=0;t=3600`, ""})
	check(t, 2, get(t, h, "u"), want{429, pol, `"burst";r=0;t=3600`, "1"})
}

func TestHeadersExplicitAndFromDecision(t *testing.T) {
	f := &fakeLimiter{d: redstream.Decision{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 1500 * time.Millisecond}}
	m, _ := httplimit.New(httplimit.Options{Limiter: f, Key: byUser})
	check(t, 0, get(t, m.Wrap(okHandler), "u"), want{200, `"default";q=10`, `"default";r=4;t=2`, ""})

	m, err := httplimit.New(httplimit.Options{Limiter: f, Key: byUser,
		Policies: []httplimit.Policy{{Name: `we"ird`, Quota: 10, Window: 90 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	check(t, 1, get(t, m.Wrap(okHandler), "u"), want{200, `"we\"ird";q=10;w=90`, `"we\"ird";r=4;t=2`, ""})
}

func TestErrors(t *testing.T) {
	down := errors.New("redis down")
	tests := []struct {
		name    string
		limiter redstream.Limiter
		key     httplimit.KeyFunc
		cost    func(*http.Request) int64
		status  int
		wantErr error
	}{
		{"key error", &fakeLimiter{}, func(*http.Request) (string, error) { return "", errors.New("no user") }, nil, 400, httplimit.ErrKey},
		{"empty key", &fakeLimiter{}, byUser, nil, 400, httplimit.ErrKey},
		{"missing header", &fakeLimiter{}, httplimit.ByHeader("X-User"), nil, 400, httplimit.ErrKey},
		{"limiter's empty key", &fakeLimiter{err: redstream.ErrEmptyKey}, byUser, nil, 400, httplimit.ErrLimiter},
		{"limiter error fails closed", &fakeLimiter{err: down}, httplimit.ByHeader("X-User"), nil, 503, httplimit.ErrLimiter},
		{"bad input is not a backend failure", &reporting{fakeLimiter{err: redstream.ErrInvalidCost, policy: redstream.FailOpen}}, httplimit.ByHeader("X-User"), nil, 500, httplimit.ErrLimiter},
		// The policy is applied inside the limiter (WithFailurePolicy), once; an error
		// that reaches the middleware is not admitted by a second policy of its own.
		{"error reaching the middleware is 503 whatever the limiter reports", &reporting{fakeLimiter{err: down, policy: redstream.FailOpen}}, httplimit.ByHeader("X-User"), nil, 503, httplimit.ErrLimiter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user := "u"
			if tt.name == "empty key" || tt.name == "missing header" {
				user = ""
			}
			m, err := httplimit.New(httplimit.Options{Limiter: tt.limiter, Key: tt.key, Cost: tt.cost})
			if err != nil {
				t.Fatal(err)
			}
			if rec := get(t, m.Wrap(okHandler), user); rec.Code != tt.status {
				t.Errorf("default handler: status %d, want %d", rec.Code, tt.status)
			}
			var got error
			m, _ = httplimit.New(httplimit.Options{Limiter: tt.limiter, Key: tt.key, Cost: tt.cost,
				OnError: func(w http.ResponseWriter, r *http.Request, err error) { got = err; w.WriteHeader(418) }})
			rec := get(t, m.Wrap(okHandler), user)
			if tt.wantErr != nil && (!errors.Is(got, tt.wantErr) || rec.Code != 418) {
				t.Errorf("OnError got %v (status %d), want %v", got, rec.Code, tt.wantErr)
			}
		})
	}
	t.Run("fail-open wrapper admits without headers", func(t *testing.T) {
		open, _ := redstream.WithFailurePolicy(&fakeLimiter{err: down}, redstream.FailOpen, nil)
		m, _ := httplimit.New(httplimit.Options{Limiter: open, Key: byUser})
		check(t, 0, get(t, m.Wrap(okHandler), "u"), want{200, "", "", ""})
	})
	t.Run("fallback wrapper answers with the fallback's decision and headers", func(t *testing.T) {
		clk := newClock(time.Unix(1_800_000_000, 0)) // aligned to an hour
		mem, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 1), clk.opts())
		fb, err := redstream.WithFailurePolicy(&fakeLimiter{err: down}, redstream.FailFallback, mem)
		if err != nil {
			t.Fatal(err)
		}
		named, _ := metrics.Named("fb-api", fb)
		m, _ := httplimit.New(httplimit.Options{Limiter: named, Key: byUser,
			Policies: []httplimit.Policy{{Name: "fb-api", Quota: 1, Window: time.Hour}}})
		h := m.Wrap(okHandler)
		check(t, 0, get(t, h, "u"), want{200, `"fb-api";q=1;w=3600`, `"fb-api";r=0;t=3600`, ""})
		check(t, 1, get(t, h, "u"), want{429, `"fb-api";q=1;w=3600`, `"fb-api";r=0;t=3600`, "3600"})
	})
	t.Run("cost", func(t *testing.T) {
		mem, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 10), memory.Options{})
		m, _ := httplimit.New(httplimit.Options{Limiter: mem, Key: byUser, Cost: func(*http.Request) int64 { return 4 }})
		h := m.Wrap(okHandler)
		codes := []int{get(t, h, "u").Code, get(t, h, "u").Code, get(t, h, "u").Code}
		if fmt.Sprint(codes) != "[200 200 429]" {
			t.Errorf("codes = %v, want [200 200 429]", codes)
		}
		m, _ = httplimit.New(httplimit.Options{Limiter: mem, Key: byUser, Cost: func(*http.Request) int64 { return 0 }})
		if c := get(t, m.Wrap(okHandler), "u").Code; c != 500 {
			t.Errorf("cost 0: status %d, want 500", c)
		}
	})
}

func TestNewBadInput(t *testing.T) {
	l := &fakeLimiter{}
	tests := map[string]httplimit.Options{
		"nil limiter":  {Key: byUser},
		"nil key":      {Limiter: l},
		"empty policy": {Limiter: l, Key: byUser, Policies: []httplimit.Policy{{Quota: 1}}},
		"zero quota":   {Limiter: l, Key: byUser, Policies: []httplimit.Policy{{Name: "a"}}},
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := httplimit.New(o); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("New() error = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestOnDenied(t *testing.T) {
	f := &fakeLimiter{d: redstream.Decision{Limit: 5, RetryAfter: 2500 * time.Millisecond, ResetAfter: 10 * time.Second}}
	m, _ := httplimit.New(httplimit.Options{Limiter: f, Key: byUser,
		OnDenied: func(w http.ResponseWriter, r *http.Request, d redstream.Decision) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"retry_after_ms":%d}`, d.RetryAfter.Milliseconds())
		}})
	rec := get(t, m.Wrap(okHandler), "u")
	check(t, 0, rec, want{429, `"default";q=5`, `"default";r=0;t=10`, "3"})
	if rec.Body.String() != `{"retry_after_ms":2500}` {
		t.Errorf("body = %s", rec.Body)
	}
}

func TestKeyFuncs(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	if k, err := httplimit.ByRemoteIP(r); k != "192.0.2.7" || err != nil {
		t.Errorf("ByRemoteIP = %q, %v", k, err)
	}
	r.RemoteAddr = "[2001:db8::1]:80"
	if k, _ := httplimit.ByRemoteIP(r); k != "2001:db8::1" {
		t.Errorf("ByRemoteIP(v6) = %q", k)
	}
	r.RemoteAddr = ""
	if _, err := httplimit.ByRemoteIP(r); err == nil {
		t.Errorf("ByRemoteIP without RemoteAddr: no error")
	}
	if _, err := httplimit.ByHeader("X-Api-Key")(r); err == nil {
		t.Errorf("ByHeader without the header: no error")
	}
	r.Header.Set("X-Api-Key", "k1")
	if k, _ := httplimit.ByHeader("X-Api-Key")(r); k != "k1" {
		t.Errorf("ByHeader = %q", k)
	}
}

// TestServerRedis runs the middleware in a real HTTP server on a real Redis limiter shared
// by concurrent clients: exactly the limit is admitted per window, every response carries
// the headers, and every 429 carries Retry-After.
func TestServerRedis(t *testing.T) {
	client := redistest.Client(t)
	prefix := fmt.Sprintf("httplimit-test:%d", time.Now().UnixNano())
	rl, err := redisbackend.NewLimiter(client, redstream.FixedWindow(time.Hour, 25), redisbackend.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	named, _ := metrics.Named("redis-api", rl)
	m, err := httplimit.New(httplimit.Options{Limiter: named, Key: httplimit.ByRemoteIP})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Wrap(okHandler))
	defer srv.Close()
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("RateLimit-Policy") != `"redis-api";q=25;w=3600` || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"redis-api";r=`) {
					t.Errorf("headers: %v", resp.Header)
				}
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
					if resp.Header.Get("Retry-After") == "" {
						t.Errorf("429 without Retry-After")
					}
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	srv.Client().CloseIdleConnections()
	if ok.Load() != 25 || limited.Load() != 55 {
		t.Errorf("200s = %d, 429s = %d; want 25, 55", ok.Load(), limited.Load())
	}
}
