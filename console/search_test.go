package console_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// plantDeadLetters writes n dead letters of topic (pipelined, 5,000 per round trip), those
// at the indexes of planted with a body holding needle, and returns the planted ones' ids.
func plantDeadLetters(t testing.TB, c rueidis.Client, topic string, n int, planted map[int]bool, needle string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	key := streamwire.DeadLetterStreamName(topic)
	ids := map[string]bool{}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i := 0; i < n; i += 5000 {
		cmds := make(rueidis.Commands, 0, 5000)
		for k := i; k < min(n, i+5000); k++ {
			body := fmt.Sprintf(`{"order":%d,"note":"routine"}`, k)
			if planted[k] {
				body = fmt.Sprintf(`{"order":%d,"note":"%s"}`, k, needle)
			}
			cmds = append(cmds, c.B().Xadd().Key(key).Id("*").FieldValue().
				FieldValue("key", "k"+strconv.Itoa(k%97)).FieldValue("enc", "plain").FieldValue("body", body).FieldValue("ts", now).
				FieldValue("dl_id", "1-1").FieldValue("dl_group", "billing").FieldValue("dl_consumer", "c1").
				FieldValue("dl_deliveries", "3").FieldValue("dl_error", "timeout").FieldValue("dl_ts", now).Build())
		}
		for j, r := range c.DoMulti(ctx, cmds...) {
			id, err := r.ToString()
			if err != nil {
				t.Fatal(err)
			}
			if planted[i+j] {
				ids[id] = true
			}
		}
	}
	return ids
}

// searchEntries is how many dead letters TestDeadLetterSearch writes:
// REDSTREAM_SEARCH_ENTRIES, or 100,000 (a million takes about 250 MB of Redis memory).
func searchEntries(t *testing.T) int {
	if v := os.Getenv("REDSTREAM_SEARCH_ENTRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("REDSTREAM_SEARCH_ENTRIES=%q: want a number of at least 1000", v)
		}
		return n
	}
	return 100_000
}

// TestDeadLetterSearch: 12 dead letters planted at random places among many are found by a
// body search, page after page to the end, and nothing else is; the key filter and the time
// range narrow the same way. Each page's time is logged (its budget bounds it).
func TestDeadLetterSearch(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	topic := newTopic(t)
	n := searchEntries(t)
	planted := map[int]bool{}
	for len(planted) < 12 {
		planted[rand.IntN(n)] = true
	}
	start := time.Now()
	want := plantDeadLetters(t, c, topic, n, planted, "needle-7f3")
	t.Logf("wrote %d dead letters in %v", n, time.Since(start))
	web, _ := serve(t, console.Options{Client: c, Topics: []string{topic}, PageSize: 50})
	b := newBrowser(t, web.URL)
	rowRE := regexp.MustCompile(`name="id" value="([0-9]+-[0-9]+)"`)
	nextRE := regexp.MustCompile(`class="next" href="([^"]+)"`)
	walk := func(path string) (ids []string, pages int) {
		t.Helper()
		for ; path != ""; pages++ {
			if pages > n/1000+10 {
				t.Fatal("the search does not end")
			}
			began := time.Now()
			st, body := b.get(path)
			took := time.Since(began)
			if st != http.StatusOK {
				t.Fatalf("%s: %d\n%s", path, st, body)
			}
			scanned := regexp.MustCompile(`([0-9]+) dead letters read for this page`).FindStringSubmatch(body)
			if scanned == nil {
				t.Fatalf("a filtered page does not say how many it read:\n%s", body)
			}
			t.Logf("page %d: %v, %s read, %d found", pages+1, took, scanned[1], len(rowRE.FindAllString(body, -1)))
			for _, r := range rowRE.FindAllStringSubmatch(body, -1) {
				ids = append(ids, r[1])
			}
			path = ""
			if m := nextRE.FindStringSubmatch(body); m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		return ids, pages
	}
	got, pages := walk("/dlq" + q("t", topic, "body", "needle-7f3"))
	if len(got) != len(want) {
		t.Errorf("the body search found %d dead letters in %d pages, want the %d planted", len(got), pages, len(want))
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("%s was found but not planted", id)
		}
	}
	// One of 97 keys, and only the routine ones: nothing planted has the key and "routine".
	got, _ = walk("/dlq" + q("t", topic, "key", "k5", "body", "routine"))
	wantKey := 0
	for i := 0; i < n; i++ {
		if i%97 == 5 && !planted[i] {
			wantKey++
		}
	}
	if len(got) != wantKey {
		t.Errorf("key k5 with body routine: %d found, want %d", len(got), wantKey)
	}
	// A time range before the dead letters were written finds nothing, one around them all.
	before := start.Add(-time.Hour).UTC().Format("2006-01-02T15:04")
	got, _ = walk("/dlq" + q("t", topic, "body", "needle-7f3", "to", before))
	if len(got) != 0 {
		t.Errorf("a range that ends before every dead letter found %d", len(got))
	}
	around := start.Add(-time.Minute).UTC().Format("2006-01-02T15:04")
	after := time.Now().Add(time.Minute).UTC().Format("2006-01-02T15:04")
	if got, _ = walk("/dlq" + q("t", topic, "body", "needle-7f3", "from", around, "to", after)); len(got) != len(want) {
		t.Errorf("a range around every dead letter found %d, want %d", len(got), len(want))
	}
	if st, body := b.get("/dlq" + q("t", topic, "from", "yesterday")); st != http.StatusBadRequest || !strings.Contains(body, `parameter &#34;from&#34;`) {
		t.Errorf("a bad time: %d\n%s", st, body)
	}
}
