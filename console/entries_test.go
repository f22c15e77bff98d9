package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
)

// TestEntriesSearch: a topic's entries are listed in id order, page after page, and searched
// by body and key: 5 entries planted among 20,000 are found, and nothing else.
func TestEntriesSearch(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	topic := newTopic(t)
	const n = 20_000
	want, byKey := map[string]bool{}, 0
	for i := 0; i < n; i += 5000 {
		cmds := make(rueidis.Commands, 0, 5000)
		for k := i; k < i+5000; k++ {
			body := fmt.Sprintf(`{"order":%d}`, k)
			if k%4001 == 17 {
				body = fmt.Sprintf(`{"order":%d,"flag":"needle-e9"}`, k)
			}
			cmds = append(cmds, c.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("key", "k"+strconv.Itoa(k%97)).
				FieldValue("enc", "plain").FieldValue("body", body).Build())
		}
		for j, r := range c.DoMulti(ctx, cmds...) {
			id, err := r.ToString()
			if err != nil {
				t.Fatal(err)
			}
			if (i+j)%4001 == 17 {
				want[id] = true
			}
			if (i+j)%97 == 3 {
				byKey++
			}
		}
	}
	web, _ := serve(t, console.Options{Client: c, Topics: []string{topic}, PageSize: console.MaxPageSize})
	b := newBrowser(t, web.URL)
	rowRE := regexp.MustCompile(`<td class="id">([0-9]+-[0-9]+)</td>`)
	nextRE := regexp.MustCompile(`class="next" href="([^"]+)"`)
	walk := func(path string) []string {
		t.Helper()
		var ids []string
		for pages := 0; path != ""; pages++ {
			if pages > n/console.MaxPageSize+20 {
				t.Fatal("the listing does not end")
			}
			st, body := b.get(path)
			if st != http.StatusOK {
				t.Fatalf("%s: %d\n%s", path, st, body)
			}
			for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
				ids = append(ids, m[1])
			}
			path = ""
			if m := nextRE.FindStringSubmatch(body); m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		return ids
	}
	all := walk("/entries" + q("t", topic))
	if len(all) != n {
		t.Fatalf("listed %d entries, want %d", len(all), n)
	}
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("entry %s listed twice", all[i])
		}
	}
	got := walk("/entries" + q("t", topic, "body", "needle-e9"))
	if len(got) != len(want) {
		t.Fatalf("the body search found %d, want the %d planted", len(got), len(want))
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("%s found but not planted", id)
		}
	}
	if got := walk("/entries" + q("t", topic, "key", "k3")); len(got) != byKey {
		t.Errorf("key k3: %d entries, want %d", len(got), byKey)
	}
	// An id range: from the 100th entry to the 199th, 100 entries, whatever the time range.
	if got := walk("/entries" + q("t", topic, "from-id", all[99], "to-id", all[198])); len(got) != 100 || got[0] != all[99] || got[99] != all[198] {
		t.Errorf("the id range found %d entries (%v .. %v), want the 100 from %s to %s", len(got), first(got), last(got), all[99], all[198])
	}
	if st, _ := b.get("/entries" + q("t", topic, "from-id", "x-1")); st != http.StatusBadRequest {
		t.Errorf("a bad id: %d, want 400", st)
	}
	if st, _ := b.get("/entries" + q("t", topic, "to", "not a time")); st != http.StatusBadRequest {
		t.Errorf("a bad time: %d, want 400", st)
	}
	st, body := b.get("/topic" + q("t", topic))
	if st != http.StatusOK || !strings.Contains(body, `id="entries-link"`) {
		t.Errorf("the topic page does not link its entries: %d", st)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}
