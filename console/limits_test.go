package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// testLimiters returns the limiters of the limits tests on c: "api", a Redis sliding
// window wrapped by metrics.Named; "login", a named Redis multi-limit; "local", an
// in-process token bucket.
func testLimiters(t *testing.T, c rueidis.Client) (map[string]redstream.Limiter, *redisbackend.Limiter, *redisbackend.Limiter) {
	t.Helper()
	prefix := newTopic(t)
	api, err := redisbackend.NewLimiter(c, redstream.SlidingWindow(time.Hour, 100), redisbackend.Options{KeyPrefix: prefix + ":api"})
	if err != nil {
		t.Fatal(err)
	}
	named, err := metrics.Named("api", api)
	if err != nil {
		t.Fatal(err)
	}
	var login *redisbackend.Limiter
	multi, err := redstream.Multi(func(specs []redstream.Spec) (redstream.Limiter, error) {
		l, err := redisbackend.NewMultiLimiter(c, specs, redisbackend.Options{KeyPrefix: prefix + ":login"})
		login = l
		return l, err
	}, redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(5, 0.01)},
		redstream.Rule{Name: "hourly", Spec: redstream.FixedWindow(time.Hour, 20)})
	if err != nil {
		t.Fatal(err)
	}
	local, err := memory.NewLimiter(redstream.TokenBucket(10, 1), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]redstream.Limiter{"api": named, "login": multi, "local": local}, api, login
}

var rowRE = regexp.MustCompile(`<tr(?: class="combined")? data-limit="(\d+)" data-available="(\d+)" data-allowed="(true|false)" data-remaining="(\d+)" data-retry-ms="(\d+)" data-reset-ms="(\d+)">`)

// stateRows returns the limit rows of a lookup page: limit, available, allowed (0|1),
// remaining, retry ms, reset ms.
func stateRows(t *testing.T, body string) [][6]int64 {
	t.Helper()
	var out [][6]int64
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		var r [6]int64
		for i, s := range m[1:] {
			switch s {
			case "true":
				r[i] = 1
			case "false":
				r[i] = 0
			default:
				r[i], _ = strconv.ParseInt(s, 10, 64)
			}
		}
		out = append(out, r)
	}
	return out
}

// TestLimitsPage: the limits page lists the configured limiters and shows a key's state as
// the engine peeks it, limit by limit; a lookup changes nothing; reset is a POST with the
// CSRF token, offered only for limiters that can reset and not in read-only mode.
func TestLimitsPage(t *testing.T) {
	c := redistest.Client(t)
	lims, api, login := testLimiters(t, c)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		if _, err := lims["api"].AllowN(ctx, "customer:ada", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := lims["login"].AllowN(ctx, "ada@example.com", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := serve(t, console.Options{Client: c, Limiters: lims})
	b := newBrowser(t, srv.URL)

	st, body := b.get("/limits")
	if st != http.StatusOK {
		t.Fatalf("GET /limits: %d\n%s", st, body)
	}
	mustContain(t, body, `id="limiters"`, ">api</a>", ">login</a>", ">local</a>", ">burst<", ">hourly<",
		"100 per 1h0m0s", "burst 5, 1 per 1m40s", "*redisbackend.Limiter", "*memory.Limiter", `id="nav-limits"`)

	if _, body := b.get("/limits" + q("l", "login")); !strings.Contains(body, `<option value="login" selected>`) {
		t.Errorf("/limits?l=login does not preselect login:\n%s", body)
	}
	st, body = b.get("/limits" + q("l", "api", "key", "customer:ada"))
	if st != http.StatusOK {
		t.Fatalf("lookup: %d\n%s", st, body)
	}
	rows := stateRows(t, body)
	want, err := api.PeekEach(ctx, "customer:ada", time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != 100 || rows[0][1] != 93 || rows[0][2] != 1 || rows[0][3] != want[0].Remaining || rows[0][3] != 92 {
		t.Fatalf("api rows %v; the engine peeks %+v (want 93 available, 92 after)", rows, want)
	}
	if d := time.Duration(rows[0][5])*time.Millisecond - want[0].ResetAfter; d < -5*time.Second || d > 5*time.Second {
		t.Errorf("reset shown %dms, engine %v", rows[0][5], want[0].ResetAfter)
	}
	mustContain(t, body, `id="reset"`, "Redis key: <span class=\"id\">")
	if strings.Contains(body, `id="no-state"`) {
		t.Errorf("a key with stored state is reported as having none:\n%s", body)
	}
	// A key the application never used: the page says that no state is stored under it.
	_, body = b.get("/limits" + q("l", "api", "key", "customer:nobody"))
	mustContain(t, body, `id="no-state"`, "No state is stored under this Redis key", api.Keys("customer:nobody")[0])

	// The multi-limit: one row per limit and the request's row.
	_, body = b.get("/limits" + q("l", "login", "key", "ada@example.com", "n", "2"))
	rows = stateRows(t, body)
	each, err := login.PeekEach(ctx, "ada@example.com", time.Time{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][1] != 2 || rows[0][3] != each[0].Remaining || rows[1][1] != 17 || rows[1][3] != 15 ||
		rows[2][1] != 2 || rows[2][3] != 0 || rows[2][2] != 1 {
		t.Fatalf("login rows %v; engine %+v", rows, each)
	}
	// A lookup changes nothing: the state is what it was.
	for i := 0; i < 3; i++ {
		b.get("/limits" + q("l", "login", "key", "ada@example.com"))
	}
	again, err := login.PeekEach(ctx, "ada@example.com", time.Time{}, 2)
	if err != nil || again[0].Remaining != each[0].Remaining || again[1].Remaining != each[1].Remaining {
		t.Fatalf("after lookups the engine peeks %+v (%v), before %+v", again, err, each)
	}
	// The in-process limiter has no reset.
	_, body = b.get("/limits" + q("l", "local", "key", "x"))
	if strings.Contains(body, `id="no-state"`) {
		t.Error("the memory limiter, which has no Redis keys, is said to store nothing in Redis")
	}
	if strings.Contains(body, `id="reset"`) {
		t.Error("the memory limiter offers reset")
	}
	if rows := stateRows(t, body); len(rows) != 1 || rows[0][1] != 10 {
		t.Errorf("local rows %v, want 10 available", rows)
	}

	// Reset: refused without the token, done with it.
	form := url.Values{"l": {"api"}, "key": {"customer:ada"}, "enc": {"text"}}
	if st, body := b.post("/limits/reset", form); st != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("reset without the token: %d\n%s", st, body)
	}
	form.Set("csrf", b.token("/limits"+q("l", "api", "key", "customer:ada")))
	st, body = b.post("/limits/reset", form)
	if st != http.StatusOK || !strings.Contains(body, `id="notice"`) || !strings.HasPrefix(b.seeOther, "/limits?") {
		t.Fatalf("reset: %d, 303 to %q\n%s", st, b.seeOther, body)
	}
	mustContain(t, body, `id="no-state"`) // the state was just deleted
	if rows := stateRows(t, body); len(rows) != 1 || rows[0][1] != 100 {
		t.Fatalf("after reset rows %v, want 100 available", rows)
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(api.Keys("customer:ada")...).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("after reset %d keys exist (%v)", n, err)
	}
	if st, _ := b.get("/limits/reset" + q("l", "api", "key", "customer:ada")); st != http.StatusMethodNotAllowed {
		t.Errorf("GET /limits/reset: %d, want 405", st)
	}

	// Read-only: no reset, and a POST is refused.
	ro, _ := serve(t, console.Options{Client: c, Limiters: lims, ReadOnly: true})
	rb := newBrowser(t, ro.URL)
	_, body = rb.get("/limits" + q("l", "api", "key", "customer:ada"))
	if strings.Contains(body, `id="reset"`) || len(stateRows(t, body)) != 1 {
		t.Errorf("read-only lookup offers reset or shows no state:\n%s", body)
	}
	if st, _ := rb.post("/limits/reset", form); st != http.StatusForbidden {
		t.Errorf("read-only reset: %d, want 403", st)
	}
}

// TestLimitsHostileKeys: keys are hostile input: markup is escaped, binary keys round-trip
// as hex, oversized and malformed parameters are 400 with the reason, and an unknown
// limiter is 404.
func TestLimitsHostileKeys(t *testing.T) {
	c := redistest.Client(t)
	lims, api, _ := testLimiters(t, c)
	ctx := context.Background()
	srv, _ := serve(t, console.Options{Client: c, Limiters: lims})
	b := newBrowser(t, srv.URL)

	script := `<script>alert("x")</script>`
	if _, err := lims["api"].AllowN(ctx, script, time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	st, body := b.get("/limits" + q("l", "api", "key", script))
	if st != http.StatusOK || strings.Contains(body, script) || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("markup key: %d, escaped? %v", st, !strings.Contains(body, script))
	}
	if rows := stateRows(t, body); len(rows) != 1 || rows[0][1] != 99 {
		t.Errorf("markup key rows %v, want 99 available", rows)
	}

	binary := "\x00\xff{tag}\n"
	for i := 0; i < 2; i++ {
		if _, err := api.AllowN(ctx, binary, time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	st, body = b.get("/limits" + q("l", "api", "key", "00ff 7b7461677d0a", "enc", "hex"))
	if st != http.StatusOK {
		t.Fatalf("hex key: %d\n%s", st, body)
	}
	if rows := stateRows(t, body); len(rows) != 1 || rows[0][1] != 98 {
		t.Errorf("binary key rows %v, want 98 available", rows)
	}
	mustContain(t, body, `value="00ff7b7461677d0a"`, `\x00\xff{tag}\n`)
	// Typed as text, a key that is not printable goes back into the form as hex.
	_, body = b.get("/limits" + q("l", "api", "key", binary))
	mustContain(t, body, `value="00ff7b7461677d0a"`)

	long := strings.Repeat("k", console.MaxKeyBytes+1)
	for _, tc := range []struct {
		name  string
		query string
		code  int
		want  string
	}{
		{"key too long", q("l", "api", "key", long), 400, "longer than 8192"},
		{"hex too long", q("l", "api", "key", strings.Repeat("ab", console.MaxKeyBytes+1), "enc", "hex"), 400, "longer than 8192"},
		{"not hex", q("l", "api", "key", "zz", "enc", "hex"), 400, "not hexadecimal"},
		{"bad encoding", q("l", "api", "key", "k", "enc", "base64"), 400, "neither text nor hex"},
		{"bad cost", q("l", "api", "key", "k", "n", "-3"), 400, "not a cost"},
		{"cost above the limit", q("l", "api", "key", "k", "n", "101"), 400, "cost"},
		{"no limiter", q("key", "k"), 400, "which limiter"},
		{"unknown limiter", q("l", "nope<b>", "key", "k"), 404, "no limiter &#34;nope&lt;b&gt;&#34;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := b.get("/limits" + tc.query)
			if st != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%d, want %d with %q:\n%.2000s", st, tc.code, tc.want, body)
			}
		})
	}
}

// TestLimitsConfigErrors: a limiter the console cannot inspect is an error of New.
func TestLimitsConfigErrors(t *testing.T) {
	c := redistest.Client(t)
	_, err := console.New(console.Options{Client: c, Limiters: map[string]redstream.Limiter{"x": opaque{}}})
	if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), `Limiters["x"]`) {
		t.Fatalf("New with an opaque limiter: %v", err)
	}
	_, err = console.New(console.Options{Client: c, Limiters: map[string]redstream.Limiter{"": opaque{}}})
	if !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Fatalf("New with an empty name: %v", err)
	}
	srv, _ := serve(t, console.Options{Client: c})
	st, body := newBrowser(t, srv.URL).get("/limits")
	if st != http.StatusOK || !strings.Contains(body, `id="no-limiters"`) || strings.Contains(body, `id="nav-limits"`) {
		t.Fatalf("limits page without limiters: %d\n%s", st, body)
	}
}

// opaque is a limiter that is no Peeker and wraps none.
type opaque struct{}

func (opaque) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return redstream.Decision{}, nil
}

// TestLimitsMostDenied: the limits page lists a Redis limiter's keys denied from memory,
// most denied first, each linking to its lookup (a binary key as hex), and nothing for an
// engine without local denials.
func TestLimitsMostDenied(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := fmt.Sprintf("cl-denied-%d", time.Now().UnixNano())
	hot, err := redisbackend.NewLimiter(c, redstream.TokenBucket(1, 0.001), redisbackend.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for key, n := range map[string]int{"ada@example.com": 6, "bob@example.com": 3, "\x00bin": 2, "calm": 1} {
		for range n {
			if _, err := hot.AllowN(ctx, key, time.Time{}, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	mem, err := memory.NewLimiter(redstream.TokenBucket(1, 0.001), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := serve(t, console.Options{Client: c, Limiters: map[string]redstream.Limiter{"login": hot, "mem": mem}})
	st, body := newBrowser(t, srv.URL).get("/limits")
	if st != http.StatusOK {
		t.Fatalf("GET /limits: %d\n%s", st, body)
	}
	i := strings.Index(body, `data-limiter="login"`)
	if i < 0 || strings.Contains(body, `data-limiter="mem"`) {
		t.Fatalf("the most denied keys are not listed for login alone:\n%s", body)
	}
	table := body[i : i+strings.Index(body[i:], "</table>")]
	ada, bob, bin := strings.Index(table, ">ada@example.com</a>"), strings.Index(table, ">bob@example.com</a>"), strings.Index(table, ">0062696e</a>")
	if ada < 0 || bob < ada || bin < bob || strings.Contains(table, "calm") {
		t.Errorf("want ada (5 denials), bob (2), the binary key (1) in that order, and not calm:\n%s", table)
	}
	mustContain(t, table, `<td class="n">5</td>`, `href="/limits?enc=text&amp;key=ada%40example.com&amp;l=login"`, `href="/limits?enc=hex&amp;key=0062696e&amp;l=login"`)
}
