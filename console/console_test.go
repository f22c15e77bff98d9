package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		// rueidis closes connections dropped by a cluster topology refresh 5 s later, from a
		// goroutine of its own.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

var topicSeq atomic.Int64

// newTopic returns a topic name unique to the test run.
func newTopic(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("ct-%d-%d-%s", os.Getpid(), topicSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "-"))
}

// addDeadLetter writes a dead letter of topic as the consumers write them (the wire
// contract: the original fields plus dl_*), and returns its id.
func addDeadLetter(t *testing.T, c rueidis.Client, topic, group, errText string, fields ...string) string {
	t.Helper()
	fv := append([]string{}, fields...)
	if len(fields) == 0 {
		fv = append(fv, "key", "k", "enc", "plain", "body", `{"n":1}`, "ts", "1")
	}
	fv = append(fv, "dl_id", "1-1", "dl_group", group, "dl_consumer", "c1", "dl_deliveries", "3",
		"dl_error", errText, "dl_ts", strconv.FormatInt(time.Now().UnixMilli(), 10))
	id, err := c.Do(context.Background(), c.B().Arbitrary("XADD").Keys(streamwire.DeadLetterStreamName(topic)).
		Args("*").Args(fv...).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func xadd(t *testing.T, c rueidis.Client, key string, fv ...string) string {
	t.Helper()
	id, err := c.Do(context.Background(), c.B().Arbitrary("XADD").Keys(key).Args("*").Args(fv...).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func xlen(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// browser is an HTTP client with a cookie jar, as a browser keeps the CSRF cookie.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
	// seeOther is the Location of the last POST's 303 answer, which post followed with a
	// GET as a browser does ("" when it answered otherwise).
	seeOther string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(req *http.Request) (int, string) {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

// post sends form to path, with the headers a same-origin browser form sends.
func (b *browser) post(path string, form url.Values, hdr ...string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.seeOther = ""
	if resp.StatusCode == http.StatusSeeOther {
		b.seeOther = resp.Header.Get("Location")
		if !strings.HasPrefix(b.seeOther, "/") {
			b.t.Fatalf("POST %s: 303 to %q, want a path of the console", path, b.seeOther)
		}
		return b.get(b.seeOther)
	}
	return resp.StatusCode, string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token loads path and returns the CSRF token of its forms.
func (b *browser) token(path string) string {
	b.t.Helper()
	st, body := b.get(path)
	m := csrfRE.FindStringSubmatch(body)
	if st != http.StatusOK || m == nil {
		b.t.Fatalf("GET %s: %d, no CSRF token in\n%s", path, st, body)
	}
	return m[1]
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}

// serve starts a console over o (Client defaults to the shared server).
func serve(t *testing.T, o console.Options) (*httptest.Server, rueidis.Client) {
	t.Helper()
	if o.Client == nil {
		o.Client = redistest.Client(t)
	}
	con, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mount := strings.TrimRight(o.Prefix, "/") + "/"
	mux.Handle(mount, con)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, o.Client
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q:\n%s", w, body)
		}
	}
}

func TestTopicsAndTopicPage(t *testing.T) {
	c := redistest.Client(t)
	topic, orphan := newTopic(t), newTopic(t)
	tagged := "{" + newTopic(t) + "}"
	for i := 0; i < 5; i++ {
		xadd(t, c, topic, "key", "k", "enc", "plain", "body", fmt.Sprintf(`{"i":%d}`, i), "ts", "1")
	}
	xadd(t, c, tagged, "body", "{}")
	if err := c.Do(context.Background(), c.B().XgroupCreate().Key(topic).Group("billing").Id("0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	addDeadLetter(t, c, topic, "billing", "boom")
	addDeadLetter(t, c, tagged, "g", "boom")
	addDeadLetter(t, c, orphan, "g", "boom") // only the dead letters remain
	srv, _ := serve(t, console.Options{Stream: stream.Config{Trim: stream.TrimConfig{MaxLen: 777}}, PageSize: console.MaxPageSize})
	b := newBrowser(t, srv.URL)

	st, body := b.get("/")
	if st != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", st, body)
	}
	mustContain(t, body, ">"+topic+"</a>", ">"+tagged+"</a>", ">"+orphan+"</a>", "only dead letters remain")
	for _, dlq := range []string{streamwire.DeadLetterStreamName(topic), streamwire.DeadLetterStreamName(tagged)} {
		if strings.Contains(body, ">"+dlq+"</a>") {
			t.Errorf("dead-letter stream %s listed as a topic", dlq)
		}
	}

	st, body = b.get("/topic" + q("t", topic))
	if st != http.StatusOK {
		t.Fatalf("topic page: %d\n%s", st, body)
	}
	mustContain(t, body, "<tr><th>length</th><td>5</td></tr>", ">billing</a>", "keeps about 777 entries", `{&#34;i&#34;:0}`, `{&#34;i&#34;:4}`)

	st, body = b.get("/topic" + q("t", orphan))
	if st != http.StatusOK || !strings.Contains(body, "only its dead letters remain") {
		t.Fatalf("orphan topic page: %d\n%s", st, body)
	}
	if st, body = b.get("/topic" + q("t", newTopic(t))); st != http.StatusNotFound {
		t.Fatalf("unknown topic: %d, want 404\n%s", st, body)
	}
	if st, _ = b.get("/topic"); st != http.StatusBadRequest {
		t.Fatalf("missing t: %d, want 400", st)
	}
	if st, _ = b.get("/no-such-page"); st != http.StatusNotFound {
		t.Fatalf("unknown page: %d, want 404", st)
	}
}

func TestTopicsPagination(t *testing.T) {
	c := redistest.Client(t)
	var topics []string
	for i := 0; i < 7; i++ {
		tp := newTopic(t)
		xadd(t, c, tp, "body", "{}")
		topics = append(topics, tp)
	}
	srv, _ := serve(t, console.Options{Topics: topics, PageSize: 3})
	b := newBrowser(t, srv.URL)
	seen := map[string]bool{}
	path := "/"
	nextRE := regexp.MustCompile(`class="next" href="([^"]+)"`)
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		st, body := b.get(path)
		if st != http.StatusOK {
			t.Fatalf("%s: %d", path, st)
		}
		n := 0
		for _, tp := range topics {
			if strings.Contains(body, ">"+tp+"</a>") {
				if seen[tp] {
					t.Errorf("%s on two pages", tp)
				}
				seen[tp] = true
				n++
			}
		}
		if n > 3 {
			t.Fatalf("page of %d topics, PageSize 3", n)
		}
		m := nextRE.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if len(seen) != len(topics) {
		t.Fatalf("saw %d of %d topics", len(seen), len(topics))
	}
}

func TestGroupPage(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	topic := newTopic(t)
	for i := 0; i < 7; i++ {
		xadd(t, c, topic, "body", "{}")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Do(ctx, c.B().XgroupCreate().Key(topic).Group("g").Id("0").Build()).Error())
	must(c.Do(ctx, c.B().Xreadgroup().Group("g", "busy").Count(7).Streams().Key(topic).Id(">").Build()).Error())
	must(c.Do(ctx, c.B().XgroupCreateconsumer().Key(topic).Group("g").Consumer("gone-worker").Build()).Error())
	cfg := stream.Config{BlockTimeout: 100 * time.Millisecond, ConsumerTimeout: time.Second}
	srv, _ := serve(t, console.Options{Stream: cfg, PageSize: 3})
	b := newBrowser(t, srv.URL)

	st, body := b.get("/group" + q("t", topic, "g", "g"))
	if st != http.StatusOK {
		t.Fatalf("%d\n%s", st, body)
	}
	mustContain(t, body, "<tr><th>pending</th><td>7</td></tr>", "<td>busy</td><td class=\"n\">7</td>", "owns pending entries",
		"<td>gone-worker</td>", "kept; removed if idle")
	time.Sleep(1100 * time.Millisecond)
	_, body = b.get("/group" + q("t", topic, "g", "g"))
	if !regexp.MustCompile(`<tr class="removable"><td>gone-worker</td>`).MatchString(body) || !strings.Contains(body, "will be removed") {
		t.Errorf("gone-worker, idle past ConsumerTimeout with nothing pending, is not marked:\n%s", body)
	}
	if regexp.MustCompile(`<tr class="removable"><td>busy</td>`).MatchString(body) {
		t.Error("busy, which owns pending entries, is marked for removal")
	}

	// The pending list, 3 at a time, by id.
	idRE := regexp.MustCompile(`<tr><td class="id">([0-9]+-[0-9]+)</td>`)
	var ids []string
	path := "/group" + q("t", topic, "g", "g")
	for pages := 0; path != ""; pages++ {
		if pages > 4 {
			t.Fatal("pagination does not end")
		}
		_, body := b.get(path)
		got := idRE.FindAllStringSubmatch(body, -1)
		if len(got) > 3 {
			t.Fatalf("%d pending entries on a page of 3", len(got))
		}
		for _, m := range got {
			ids = append(ids, m[1])
		}
		path = ""
		if m := regexp.MustCompile(`class="next" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(ids) != 7 {
		t.Fatalf("walked %d pending entries, want 7: %v", len(ids), ids)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("entry %s twice", ids[i])
		}
	}
	// n above PageSize is clamped.
	_, body = b.get("/group" + q("t", topic, "g", "g", "n", "100000"))
	if n := len(idRE.FindAllString(body, -1)); n != 3 {
		t.Fatalf("n=100000 showed %d entries, want PageSize 3", n)
	}
	if st, _ := b.get("/group" + q("t", topic, "g", "nope")); st != http.StatusNotFound {
		t.Fatalf("unknown group: %d, want 404", st)
	}
	if st, _ := b.get("/group" + q("t", topic, "g", "g", "after", "x<y")); st != http.StatusBadRequest {
		t.Fatalf("bad after: %d, want 400", st)
	}
}

func TestDeadLetterFilterAndPagination(t *testing.T) {
	c := redistest.Client(t)
	topic := newTopic(t)
	want := map[string]bool{}
	for i := 0; i < 40; i++ {
		group, errText := "a", "Timeout calling billing"
		if i%2 == 1 {
			group = "b"
		}
		if i%3 == 0 {
			errText = "card declined"
		}
		id := addDeadLetter(t, c, topic, group, errText)
		if group == "a" && strings.Contains(strings.ToLower(errText), "timeout") {
			want[id] = true
		}
	}
	srv, _ := serve(t, console.Options{PageSize: 4})
	b := newBrowser(t, srv.URL)
	rowRE := regexp.MustCompile(`name="id" value="([0-9]+-[0-9]+)"`)
	walk := func(path string) []string {
		t.Helper()
		var ids []string
		for pages := 0; path != ""; pages++ {
			if pages > 40 {
				t.Fatal("pagination does not end")
			}
			st, body := b.get(path)
			if st != http.StatusOK {
				t.Fatalf("%s: %d\n%s", path, st, body)
			}
			rows := rowRE.FindAllStringSubmatch(body, -1)
			if len(rows) > 4 {
				t.Fatalf("%d rows on a page of 4", len(rows))
			}
			for _, r := range rows {
				ids = append(ids, r[1])
			}
			path = ""
			if m := regexp.MustCompile(`class="next" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		return ids
	}
	if all := walk("/dlq" + q("t", topic)); len(all) != 40 {
		t.Fatalf("walked %d dead letters, want 40", len(all))
	}
	got := walk("/dlq" + q("t", topic, "group", "a", "q", "TIMEOUT"))
	if len(got) != len(want) {
		t.Fatalf("filter found %d, want %d", len(got), len(want))
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("%s does not match the filter", id)
		}
	}
	st, body := b.get("/dlq" + q("t", topic, "group", "zzz"))
	if st != http.StatusOK || rowRE.MatchString(body) || !strings.Contains(body, "no dead letters match") {
		t.Fatalf("no match: %d\n%s", st, body)
	}
}

func TestHostileEntries(t *testing.T) {
	c := redistest.Client(t)
	topic := newTopic(t) + `<script>alert("t")</script>`
	hostile := `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	big := strings.Repeat("x", 5000)
	id := addDeadLetter(t, c, topic, hostile, "error "+hostile,
		"key", hostile, "enc", "plain", "body", `{"html":"`+strings.ReplaceAll(hostile, `"`, `\"`)+`"}`,
		hostile, "value "+hostile, "big", big)
	srv, _ := serve(t, console.Options{MaxBodyBytes: 1000})
	b := newBrowser(t, srv.URL)
	for _, path := range []string{"/", "/topic" + q("t", topic), "/dlq" + q("t", topic), "/dlq/entry" + q("t", topic, "id", id),
		"/dlq/purge" + q("t", topic), "/dlq" + q("t", topic, "q", hostile, "group", hostile)} {
		st, body := b.get(path)
		if st != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, st, body)
		}
		for _, raw := range []string{"<script>alert", "<img src=x"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: unescaped %q in the page", path, raw)
			}
		}
	}
	_, body := b.get("/dlq/entry" + q("t", topic, "id", id))
	mustContain(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;", "4000 more bytes not shown")
	if strings.Contains(body, big) {
		t.Error("a 5000-byte field shown whole with MaxBodyBytes 1000")
	}
	// An entry of 5000 fields shows a bounded page.
	var many []string
	for i := 0; i < 5000; i++ {
		many = append(many, fmt.Sprintf("f%04d", i), strings.Repeat("v", 900))
	}
	wide := addDeadLetter(t, c, topic, "g", "e", many...)
	st, body := b.get("/dlq/entry" + q("t", topic, "id", wide))
	if st != http.StatusOK || !strings.Contains(body, "4800 more fields not shown") || len(body) > 300<<10 {
		t.Fatalf("5000-field entry: %d, %d bytes; want the first 200 fields within 300 KiB", st, len(body))
	}
	// A gzip body is decoded; a broken one is reported, not shown as garbage or a 500.
	enc, zbody, err := streamwire.EncodeBody([]byte(`{"zipped":true}`), true)
	if err != nil || enc != streamwire.EncGzip {
		t.Fatal(enc, err)
	}
	gz := addDeadLetter(t, c, topic, "g", "e", "enc", enc, "body", zbody)
	_, body = b.get("/dlq/entry" + q("t", topic, "id", gz))
	mustContain(t, body, "&#34;zipped&#34;: true", "decoded from gzip")
	bad := addDeadLetter(t, c, topic, "g", "e", "enc", "gzip", "body", "!!not base64")
	st, body = b.get("/dlq/entry" + q("t", topic, "id", bad))
	if st != http.StatusOK || !strings.Contains(body, "cannot decode the body") {
		t.Fatalf("broken gzip body: %d\n%s", st, body)
	}
	if st, _ := b.get("/dlq/entry" + q("t", topic, "id", "<x>")); st != http.StatusBadRequest {
		t.Fatalf("bad id: %d, want 400", st)
	}
	if st, _ := b.get("/dlq/entry" + q("t", topic, "id", "1-1")); st != http.StatusNotFound {
		t.Fatalf("missing dead letter: %d, want 404", st)
	}
	if st, _ := b.get("/dlq" + q("t", "bad}name")); st != http.StatusBadRequest {
		t.Fatalf("invalid topic: %d, want 400", st)
	}
}

func TestActions(t *testing.T) {
	c := redistest.Client(t)
	topic := newTopic(t)
	dlq := streamwire.DeadLetterStreamName(topic)
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = addDeadLetter(t, c, topic, "billing", "boom "+strconv.Itoa(i))
	}
	srv, _ := serve(t, console.Options{})
	b := newBrowser(t, srv.URL)
	tok := b.token("/dlq" + q("t", topic))
	origin := "Origin"

	// GET never changes state: not on the action paths, not with action-like parameters.
	for _, path := range []string{"/dlq/replay" + q("t", topic, "id", ids[0]), "/dlq/delete" + q("t", topic, "id", ids[0]),
		"/dlq/purge" + q("t", topic, "confirm", topic, "csrf", tok), "/dlq/entry" + q("t", topic, "id", ids[0], "csrf", tok)} {
		b.get(path)
	}
	if n := xlen(t, c, dlq); n != 6 {
		t.Fatalf("GET requests changed the dead letters: %d, want 6", n)
	}
	if st, _ := b.get("/dlq/replay" + q("t", topic, "id", ids[0])); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET /dlq/replay: %d, want 405", st)
	}

	// Refused POSTs change nothing.
	refused := []struct {
		name string
		form url.Values
		hdr  []string
	}{
		{"no token", url.Values{"t": {topic}, "id": {ids[0]}}, nil},
		{"wrong token", url.Values{"t": {topic}, "id": {ids[0]}, "csrf": {tok + "x"}}, nil},
		{"other console's token", url.Values{"t": {topic}, "id": {ids[0]}, "csrf": {"AAAA"}}, nil},
		{"cross-site", url.Values{"t": {topic}, "id": {ids[0]}, "csrf": {tok}}, []string{"Sec-Fetch-Site", "cross-site"}},
		{"foreign origin", url.Values{"t": {topic}, "id": {ids[0]}, "csrf": {tok}}, []string{origin, "https://evil.example"}},
	}
	for _, r := range refused {
		for _, action := range []string{"/dlq/replay", "/dlq/delete"} {
			if st, body := b.post(action, r.form, r.hdr...); st != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403\n%s", r.name, action, st, body)
			}
		}
	}
	// A token without its cookie (another browser) is refused too.
	other := newBrowser(t, srv.URL)
	if st, _ := other.post("/dlq/delete", url.Values{"t": {topic}, "id": {ids[0]}, "csrf": {tok}}); st != http.StatusForbidden {
		t.Errorf("token without its cookie: %d, want 403", st)
	}
	if n := xlen(t, c, dlq); n != 6 {
		t.Fatalf("refused POSTs changed the dead letters: %d, want 6", n)
	}

	// Replay one, with the headers a same-origin form sends.
	st, body := b.post("/dlq/replay", url.Values{"t": {topic}, "id": {ids[0]}, "csrf": {tok}}, "Sec-Fetch-Site", "same-origin", origin, srv.URL)
	if st != http.StatusOK || !strings.Contains(body, "dead letter "+ids[0]+" replayed as entry") {
		t.Fatalf("replay: %d\n%s", st, body)
	}
	if n := xlen(t, c, topic); n != 1 {
		t.Fatalf("topic has %d entries after one replay", n)
	}
	// POST-redirect-GET: the action answered 303; reloading its result page shows the
	// result again and replays nothing more.
	if b.seeOther == "" || !strings.HasPrefix(b.seeOther, "/result?r=") {
		t.Fatalf("replay answered without a 303 to its result page (Location %q)", b.seeOther)
	}
	if st, again := b.get(b.seeOther); st != http.StatusOK || again != body {
		t.Errorf("reloaded result page: %d, same page %v", st, again == body)
	}
	if n := xlen(t, c, topic); n != 1 {
		t.Fatalf("reloading the result page replayed again: %d entries", n)
	}
	if st, _ := b.get("/result?r=unknown"); st != http.StatusNotFound {
		t.Errorf("unknown result token: %d, want 404", st)
	}
	// Replay a selection (one of which is gone already).
	st, body = b.post("/dlq/replay", url.Values{"t": {topic}, "id": {ids[1], ids[2], ids[0]}, "csrf": {tok}})
	if st != http.StatusOK || strings.Count(body, "replayed as entry") != 2 || !strings.Contains(body, "not found") {
		t.Fatalf("replay selection: %d\n%s", st, body)
	}
	// Delete a selection.
	st, body = b.post("/dlq/delete", url.Values{"t": {topic}, "id": {ids[3], ids[4]}, "csrf": {tok}})
	if st != http.StatusOK || !strings.Contains(body, "2 of 2 selected dead letters deleted") {
		t.Fatalf("delete: %d\n%s", st, body)
	}
	if n := xlen(t, c, dlq); n != 1 {
		t.Fatalf("%d dead letters left, want 1", n)
	}
	// Bad forms.
	for _, f := range []url.Values{
		{"t": {topic}, "csrf": {tok}},
		{"t": {topic}, "id": {"'; DROP"}, "csrf": {tok}},
		{"t": {"bad}topic"}, "id": {ids[5]}, "csrf": {tok}},
	} {
		if st, _ := b.post("/dlq/delete", f); st != http.StatusBadRequest {
			t.Errorf("form %v: %d, want 400", f, st)
		}
	}
	// Replay all: what is left (ids[5]), then nothing.
	st, body = b.post("/dlq/replay-all", url.Values{"t": {topic}, "csrf": {tok}})
	if st != http.StatusOK || !strings.Contains(body, "1 dead letters replayed") {
		t.Fatalf("replay all: %d\n%s", st, body)
	}
	if n := xlen(t, c, dlq); n != 0 {
		t.Fatalf("%d dead letters after replay all", n)
	}
	if st, _ := b.post("/dlq/replay-all", url.Values{"t": {topic}}); st != http.StatusForbidden {
		t.Fatalf("replay all without the token: %d, want 403", st)
	}
	if st, _ := b.get("/dlq/replay-all" + q("t", topic)); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET replay all: %d, want 405", st)
	}
	addDeadLetter(t, c, topic, "billing", "again")
	// Purge asks for the topic's name.
	if st, _ := b.get("/dlq/purge" + q("t", topic)); st != http.StatusOK {
		t.Fatalf("purge page: %d", st)
	}
	if st, _ := b.post("/dlq/purge", url.Values{"t": {topic}, "confirm": {"yes"}, "csrf": {tok}}); st != http.StatusBadRequest {
		t.Fatalf("unconfirmed purge: %d, want 400", st)
	}
	if n := xlen(t, c, dlq); n != 1 {
		t.Fatalf("unconfirmed purge changed the dead letters: %d", n)
	}
	st, body = b.post("/dlq/purge", url.Values{"t": {topic}, "confirm": {topic}, "csrf": {tok}})
	if st != http.StatusOK || !strings.Contains(body, "1 dead letters purged") {
		t.Fatalf("purge: %d\n%s", st, body)
	}
	if n := xlen(t, c, dlq); n != 0 {
		t.Fatalf("%d dead letters after purge", n)
	}
}

func TestReadOnly(t *testing.T) {
	c := redistest.Client(t)
	topic := newTopic(t)
	id := addDeadLetter(t, c, topic, "g", "boom")
	secret := []byte("0123456789abcdef0123")
	rw, _ := serve(t, console.Options{Secret: secret})
	ro, _ := serve(t, console.Options{Secret: secret, ReadOnly: true})
	tok := newBrowser(t, rw.URL).token("/dlq" + q("t", topic))
	b := newBrowser(t, ro.URL)
	for _, path := range []string{"/", "/dlq" + q("t", topic), "/dlq/entry" + q("t", topic, "id", id)} {
		st, body := b.get(path)
		if st != http.StatusOK {
			t.Fatalf("%s: %d", path, st)
		}
		if strings.Contains(body, `method="post"`) || strings.Contains(body, `name="csrf"`) {
			t.Errorf("%s: read-only page offers an action:\n%s", path, body)
		}
		mustContain(t, body, "read-only")
	}
	if st, _ := b.get("/dlq/purge" + q("t", topic)); st != http.StatusForbidden {
		t.Fatalf("read-only purge page: %d, want 403", st)
	}
	for _, action := range []string{"/dlq/replay", "/dlq/delete", "/dlq/purge", "/dlq/replay-all"} {
		st, _ := b.post(action, url.Values{"t": {topic}, "id": {id}, "confirm": {topic}, "csrf": {tok}})
		if st != http.StatusForbidden {
			t.Errorf("read-only %s: %d, want 403", action, st)
		}
	}
	if n := xlen(t, c, streamwire.DeadLetterStreamName(topic)); n != 1 {
		t.Fatalf("read-only console changed the dead letters: %d", n)
	}
}

func TestPrefix(t *testing.T) {
	c := redistest.Client(t)
	topic := newTopic(t)
	id := addDeadLetter(t, c, topic, "g", "boom")
	srv, _ := serve(t, console.Options{Prefix: "/ops/streams/", Topics: []string{topic}})
	b := newBrowser(t, srv.URL)
	st, body := b.get("/ops/streams/")
	if st != http.StatusOK {
		t.Fatalf("%d\n%s", st, body)
	}
	mustContain(t, body, `href="/ops/streams/static/console.css"`, `href="/ops/streams/dlq?t=`+url.QueryEscape(topic)+`"`)
	if st, _ := b.get("/ops/streams"); st != http.StatusFound && st != http.StatusTemporaryRedirect && st != http.StatusMovedPermanently {
		t.Fatalf("prefix without slash: %d, want a redirect", st)
	}
	if st, _ := b.get("/ops/streamsX/"); st != http.StatusNotFound {
		t.Fatalf("outside the prefix: %d, want 404", st)
	}
	tok := b.token("/ops/streams/dlq" + q("t", topic))
	st, body = b.post("/ops/streams/dlq/delete", url.Values{"t": {topic}, "id": {id}, "csrf": {tok}})
	if st != http.StatusOK || !strings.Contains(body, "1 of 1") || !strings.Contains(body, `href="/ops/streams/dlq?t=`) {
		t.Fatalf("delete under a prefix: %d\n%s", st, body)
	}
	if st, _ := b.get("/ops/streams/static/console.js"); st != http.StatusOK {
		t.Fatal("script not served")
	}
}

func TestSecurityHeaders(t *testing.T) {
	srv, _ := serve(t, console.Options{Topics: []string{"x"}})
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for h, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-store",
	} {
		if got := resp.Header.Get(h); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	var csrf *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "redstream_console_csrf" {
			csrf = ck
		}
	}
	if csrf == nil || !csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Fatalf("CSRF cookie %+v, want HttpOnly, SameSite=Strict", csrf)
	}
}

func TestNewOptions(t *testing.T) {
	c := redistest.Client(t)
	for _, tc := range []struct {
		name string
		o    console.Options
	}{
		{"nil client", console.Options{}},
		{"short secret", console.Options{Client: c, Secret: []byte("short")}},
		{"page size", console.Options{Client: c, PageSize: console.MaxPageSize + 1}},
		{"negative page size", console.Options{Client: c, PageSize: -1}},
		{"max topics", console.Options{Client: c, MaxTopics: console.MaxMaxTopics + 1}},
		{"negative timeout", console.Options{Client: c, Timeout: -time.Second}},
		{"negative body", console.Options{Client: c, MaxBodyBytes: -1}},
		{"prefix", console.Options{Client: c, Prefix: "ops"}},
		{"prefix quote", console.Options{Client: c, Prefix: `/a"b`}},
		{"topic", console.Options{Client: c, Topics: []string{"bad}"}}},
		{"stream config", console.Options{Client: c, Stream: stream.Config{ReadCount: -1}}},
		{"trusted origin", console.Options{Client: c, TrustedOrigins: []string{"not a url"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := console.New(tc.o)
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Fatalf("got %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

// TestHungServer: with Redis stopped (SIGSTOP), every page answers within the per-call
// timeout with an error page, not a hang.
func TestHungServer(t *testing.T) {
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	topic := newTopic(t)
	id := addDeadLetter(t, c, topic, "g", "boom")
	xadd(t, c, topic, "body", "{}")
	lims, _, _ := testLimiters(t, c)
	srv, _ := serve(t, console.Options{Client: c, Timeout: 300 * time.Millisecond, Limiters: lims})
	b := newBrowser(t, srv.URL)
	tok := b.token("/dlq" + q("t", topic))
	info, err := c.Do(context.Background(), c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`process_id:(\d+)`).FindStringSubmatch(info)
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	check := func(name string, f func() (int, string)) {
		t.Helper()
		start := time.Now()
		st, body := f()
		took := time.Since(start)
		if st != http.StatusGatewayTimeout && st != http.StatusBadGateway {
			t.Errorf("%s: %d, want 504 or 502\n%s", name, st, body)
		}
		if took > 5*time.Second {
			t.Errorf("%s took %v with a 300ms timeout per call", name, took)
		}
		t.Logf("%s: %d after %v", name, st, took.Round(time.Millisecond))
	}
	check("topics", func() (int, string) { return b.get("/") })
	check("topic", func() (int, string) { return b.get("/topic" + q("t", topic)) })
	check("dlq", func() (int, string) { return b.get("/dlq" + q("t", topic)) })
	check("entry", func() (int, string) { return b.get("/dlq/entry" + q("t", topic, "id", id)) })
	check("group", func() (int, string) { return b.get("/group" + q("t", topic, "g", "g")) })
	check("delete", func() (int, string) {
		return b.post("/dlq/delete", url.Values{"t": {topic}, "id": {id}, "csrf": {tok}})
	})
	check("rate-limit key lookup", func() (int, string) { return b.get("/limits" + q("l", "login", "key", "ada")) })
	check("rate-limit key reset", func() (int, string) {
		return b.post("/limits/reset", url.Values{"l": {"api"}, "key": {"ada"}, "csrf": {tok}})
	})
	check("dead-letter search", func() (int, string) { return b.get("/dlq" + q("t", topic, "body", "needle")) })
	check("entries", func() (int, string) { return b.get("/entries" + q("t", topic)) })
	check("entries search", func() (int, string) { return b.get("/entries" + q("t", topic, "key", "k")) })
	check("scheduled messages", func() (int, string) { return b.get("/delayed" + q("t", topic)) })
	check("scheduled message delivered now", func() (int, string) {
		return b.post("/delayed/action", url.Values{"op": {"now"}, "t": {topic}, "id": {"0123456789abcdef01234567"}, "csrf": {tok}})
	})
	check("history", func() (int, string) { return b.get("/history" + q("t", topic)) })
}

// TestClusterDiscovery: on a 3-master cluster, SCAN on every master finds topics in every
// slot range, and the dead-letter pages and actions work.
func TestClusterDiscovery(t *testing.T) {
	c := redistest.ClusterClient(t)
	var topics []string
	masters := map[string]bool{}
	for i := 0; i < 30; i++ {
		tp := newTopic(t)
		xadd(t, c, tp, "body", "{}")
		topics = append(topics, tp)
	}
	id := addDeadLetter(t, c, topics[0], "g", "boom")
	orphan := newTopic(t)
	addDeadLetter(t, c, orphan, "g", "boom")
	for addr, node := range c.Nodes() {
		role, err := node.Do(context.Background(), node.B().Role().Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := role[0].ToString(); r != "master" {
			continue
		}
		keys, err := node.Do(context.Background(), node.B().Keys().Pattern("ct-*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			masters[addr] = true
		}
	}
	if len(masters) < 3 {
		t.Fatalf("the fixture's topics live on %d masters, want 3", len(masters))
	}
	srv, _ := serve(t, console.Options{Client: c, MaxTopics: console.MaxMaxTopics})
	b := newBrowser(t, srv.URL)
	seen := 0
	path := "/"
	for pages := 0; path != ""; pages++ {
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		st, body := b.get(path)
		if st != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, st, body)
		}
		for _, tp := range append(topics, orphan) {
			if strings.Contains(body, ">"+tp+"</a>") {
				seen++
			}
		}
		path = ""
		if m := regexp.MustCompile(`class="next" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if seen != len(topics)+1 {
		t.Fatalf("found %d of %d topics on the cluster", seen, len(topics)+1)
	}
	st, body := b.get("/dlq/entry" + q("t", topics[0], "id", id))
	if st != http.StatusOK {
		t.Fatalf("entry on the cluster: %d\n%s", st, body)
	}
	tok := b.token("/dlq" + q("t", topics[0]))
	st, body = b.post("/dlq/replay", url.Values{"t": {topics[0]}, "id": {id}, "csrf": {tok}})
	if st != http.StatusOK || !strings.Contains(body, "replayed as entry") {
		t.Fatalf("replay on the cluster: %d\n%s", st, body)
	}
	if n := xlen(t, c, topics[0]); n != 2 {
		t.Fatalf("topic has %d entries after the replay, want 2", n)
	}
}

// TestConcurrentReplay: two operators (two consoles, as two replicas of the application)
// replay the same dead letters at once; each is replayed exactly once.
func TestConcurrentReplay(t *testing.T) {
	c := redistest.Client(t)
	topic := newTopic(t)
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, addDeadLetter(t, c, topic, "g", "boom"))
	}
	s1, _ := serve(t, console.Options{})
	s2, _ := serve(t, console.Options{})
	browsers := []*browser{newBrowser(t, s1.URL), newBrowser(t, s2.URL)}
	toks := []string{browsers[0].token("/dlq" + q("t", topic)), browsers[1].token("/dlq" + q("t", topic))}
	bodies := make([]string, 2)
	var wg sync.WaitGroup
	for i := range browsers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, bodies[i] = browsers[i].post("/dlq/replay", url.Values{"t": {topic}, "id": ids, "csrf": {toks[i]}})
		}()
	}
	wg.Wait()
	replayed := strings.Count(bodies[0], "replayed as entry") + strings.Count(bodies[1], "replayed as entry")
	if replayed != 20 {
		t.Fatalf("%d replays reported for 20 dead letters", replayed)
	}
	if n := xlen(t, c, topic); n != 20 {
		t.Fatalf("topic has %d entries, want 20 (each dead letter once)", n)
	}
	if n := xlen(t, c, streamwire.DeadLetterStreamName(topic)); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
}

// TestKilledServer: with Redis gone, pages answer 502 or 504 at once, and work again when
// it is back.
func TestKilledServer(t *testing.T) {
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	topic := newTopic(t)
	addDeadLetter(t, c, topic, "g", "boom")
	srv, _ := serve(t, console.Options{Client: c, Timeout: time.Second})
	b := newBrowser(t, srv.URL)
	s.Stop()
	for _, path := range []string{"/", "/dlq" + q("t", topic), "/topic" + q("t", topic)} {
		start := time.Now()
		st, body := b.get(path)
		if st != http.StatusBadGateway && st != http.StatusGatewayTimeout {
			t.Errorf("%s with Redis killed: %d, want 502 or 504\n%s", path, st, body)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s took %v with a 1s timeout per call", path, took)
		}
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	xadd(t, c, topic, "body", "{}") // the restarted server lost its data
	waitFor(t, 15*time.Second, "the console to work again", func() bool {
		st, _ := b.get("/topic" + q("t", topic))
		return st == http.StatusOK
	})
}
