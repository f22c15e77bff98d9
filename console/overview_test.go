package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestOverview: the first page sums up every listed topic (length, groups' consumers and
// pending entries, the slowest group's lag, scheduled messages, dead letters) with totals,
// and shows the server's facts; on a server whose eviction policy can delete keys it warns.
func TestOverview(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	a, b := newTopic(t), newTopic(t)
	for i := 0; i < 5; i++ {
		xadd(t, c, a, "body", fmt.Sprintf(`{"i":%d}`, i))
	}
	xadd(t, c, b, "body", "{}")
	for _, g := range []string{"billing", "audit"} {
		if err := c.Do(ctx, c.B().XgroupCreate().Key(a).Group(g).Id("0").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// billing's consumer holds 3 entries (pending, lag 2); audit has read nothing (lag 5).
	if err := c.Do(ctx, c.B().Xreadgroup().Group("billing", "c1").Count(3).Streams().Key(a).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewProducer(c, stream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := p.Send(ctx, b, stream.NewMessage(map[string]int{"x": 1}), stream.WithDelay(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	addDeadLetter(t, c, b, "g", "boom")
	web, _ := serve(t, console.Options{Client: c, Topics: []string{a, b}})
	br := newBrowser(t, web.URL)

	st, body := br.get("/")
	if st != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", st, body)
	}
	row := func(name string) string {
		i := strings.Index(body, ">"+name+"</a>")
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", name, body)
		}
		end := strings.Index(body[i:], "</tr>")
		return body[i : i+end]
	}
	cells := func(s string) []string {
		var out []string
		for _, part := range strings.Split(s, `<td class="n">`)[1:] {
			v, _, _ := strings.Cut(part, "</td>")
			out = append(out, v)
		}
		return out
	}
	// Columns: length, groups, consumers, pending, lag, delayed, dead letters.
	if got, want := strings.Join(cells(row(a)), ","), "5,2,1,3,5,0,0"; got != want {
		t.Errorf("%s: cells %s, want %s", a, got, want)
	}
	gotB := cells(row(b))
	if len(gotB) != 7 || gotB[0] != "1" || !strings.Contains(gotB[5], `href="/delayed?t=`) || !strings.Contains(gotB[5], ">2</a>") || !strings.Contains(gotB[6], ">1</a>") {
		t.Errorf("%s: cells %q, want length 1, 2 delayed, 1 dead letter", b, gotB)
	}
	i := strings.Index(body, `id="totals"`)
	if i < 0 {
		t.Fatalf("no totals row:\n%s", body)
	}
	totals := body[i : i+strings.Index(body[i:], "</tr>")]
	if got, want := strings.Join(cells(totals), ","), "6,1,3,5 (largest),2,1"; got != want {
		t.Errorf("totals: %s, want %s", got, want)
	}
	mustContain(t, body, "eviction policy <code>noeviction</code>", " clients · ")
	if strings.Contains(body, "eviction-warning") {
		t.Errorf("a warning about eviction under noeviction:\n%s", body)
	}

	if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "allkeys-lru").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, body = br.get("/")
	mustContain(t, body, `id="eviction-warning"`, "<code>allkeys-lru</code>", "maxmemory-policy noeviction")
}

// TestRefresh: ?refresh=N reloads a page every N seconds (clamped to 2..3600), and the
// overview offers it; pages without it, and error pages, never reload.
func TestRefresh(t *testing.T) {
	web, _ := serve(t, console.Options{Topics: []string{newTopic(t)}})
	b := newBrowser(t, web.URL)
	_, body := b.get("/")
	if strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, `href="/?refresh=5"`) {
		t.Errorf("the overview reloads unasked, or does not offer to:\n%s", body)
	}
	for param, want := range map[string]string{"5": `content="5"`, "1": `content="2"`, "99999": `content="3600"`} {
		if _, body := b.get("/?refresh=" + param); !strings.Contains(body, `<meta http-equiv="refresh" `+want+`>`) {
			t.Errorf("refresh=%s: no %s", param, want)
		}
	}
	if _, body := b.get("/?refresh=x"); strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("refresh=x reloads")
	}
	if st, body := b.get("/topic?refresh=5"); st != http.StatusBadRequest || strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("an error page reloads: %d", st)
	}
}

// TestDiscoveryCached: ten requests in a row cost one discovery (one SCAN per node), not one
// each.
func TestDiscoveryCached(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	xadd(t, c, newTopic(t), "body", "{}")
	scans := func() int64 {
		info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_scan:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	web, _ := serve(t, console.Options{Client: c})
	b := newBrowser(t, web.URL)
	before := scans()
	for range 10 {
		if st, _ := b.get("/"); st != http.StatusOK {
			t.Fatalf("GET /: %d", st)
		}
	}
	if n := scans() - before; n != 1 {
		t.Errorf("10 overview requests ran %d SCANs, want 1 (one discovery)", n)
	}
}
