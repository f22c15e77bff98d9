package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// TestHistoryPage: the history page draws what the minute keys hold, one polyline per kind
// with a point per minute, totals for all groups and per group, a group's own counts when
// one is chosen; fields the consumers do not write are ignored, and a bad range is refused.
func TestHistoryPage(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	topic := newTopic(t)
	now := time.Now().Unix() / 60
	for m, fields := range map[int64][]string{
		now:      {"processed|billing", "7", "failed|billing", "2", "processed|audit", "5", "bogus", "9", "dead|x|y", "1"},
		now - 30: {"processed|billing", "3", "retried|billing", "1", "dead|billing", "1", "failed|audit", "-4"},
	} {
		if err := c.Do(ctx, c.B().Arbitrary("HSET").Keys(streamwire.HistoryKey(topic, m)).Args(fields...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	web, _ := serve(t, console.Options{Client: c, Topics: []string{topic}})
	b := newBrowser(t, web.URL)
	st, body := b.get("/history" + q("t", topic, "hours", "1"))
	if st != http.StatusOK {
		t.Fatalf("GET /history: %d\n%s", st, body)
	}
	series := regexp.MustCompile(`<polyline class="series" data-kind="([a-z]+)" data-total="([0-9]+)"[^>]* points="([^"]*)"`).FindAllStringSubmatch(body, -1)
	got := map[string]string{}
	for _, s := range series {
		got[s[1]] = s[2]
		if n := len(strings.Fields(s[3])); n != 60 {
			t.Errorf("%s: %d points, want one per minute (60)", s[1], n)
		}
	}
	// processed: 7+5+3; failed: 2 (the negative count is not one consumers write); dead: 1
	// (billing's; "dead|x|y" is group "x|y", counted: a group name may hold '|').
	if want := map[string]string{"processed": "15", "failed": "2", "retried": "1", "dead": "2"}; len(got) != 4 ||
		got["processed"] != want["processed"] || got["failed"] != want["failed"] || got["retried"] != want["retried"] || got["dead"] != want["dead"] {
		t.Errorf("series totals %v, want %v", got, want)
	}
	mustContain(t, body, `>billing</a></td><td class="n">10</td><td class="n">2</td><td class="n">1</td><td class="n">1</td>`,
		`>audit</a></td><td class="n">5</td>`)
	_, body = b.get("/history" + q("t", topic, "hours", "1", "g", "audit"))
	if !strings.Contains(body, `data-kind="processed" data-total="5"`) || !strings.Contains(body, `data-kind="failed" data-total="0"`) {
		t.Errorf("the audit group's page does not show its own counts:\n%s", body)
	}
	if _, body := b.get("/history" + q("t", newTopic(t))); !strings.Contains(body, `id="no-history"`) {
		t.Errorf("an empty history is not said:\n%s", body)
	}
	for _, bad := range []string{"0", "25", "x"} {
		if st, _ := b.get("/history" + q("t", topic, "hours", bad)); st != http.StatusBadRequest {
			t.Errorf("hours=%s: %d, want 400", bad, st)
		}
	}
}
