package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/stream/periodic"
)

// TestSchedulesPage: the schedules page lists the periodic schedules registered on the
// server, with their state, and pauses, resumes and removes them (POST-redirect-GET, the
// CSRF token required); a read-only console shows no actions and refuses them.
func TestSchedulesPage(t *testing.T) {
	srv, c := serve(t, console.Options{})
	ctx := context.Background()
	s, err := periodic.New(c, periodic.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	topic := newTopic(t)
	for _, sc := range []periodic.Schedule{
		{Name: "report", Topic: topic, Cron: "0 3 * * *", TimeZone: "Europe/Paris"},
		{Name: "beat", Topic: topic, Every: time.Minute, Missed: periodic.MissedAll, MaxCatchUp: 5},
	} {
		if err := s.Add(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, srv.URL)
	st, body := b.get("/periodic")
	if st != http.StatusOK {
		t.Fatalf("GET /periodic: %d\n%s", st, body)
	}
	mustContain(t, body, `data-topic="`+topic+`" data-name="report" data-paused="false"`, `data-name="beat" data-paused="false"`,
		"<code>0 3 * * * (Europe/Paris)</code>", "<code>every 1m0s</code>", "all (up to 5)", `id="nav-periodic"`)

	tok := b.token("/periodic")
	act := func(op, name string) (int, string) {
		return b.post("/periodic/action", url.Values{"csrf": {tok}, "op": {op}, "t": {topic}, "name": {name}})
	}
	if st, body = act("pause", "report"); st != http.StatusOK || !strings.Contains(body, `data-name="report" data-paused="true"`) ||
		!strings.Contains(body, "paused.") {
		t.Fatalf("pause: %d\n%s", st, body)
	}
	if !strings.HasPrefix(b.seeOther, "/periodic?") {
		t.Fatalf("pause answered 303 to %q, want the schedules page", b.seeOther)
	}
	if infos, err := s.List(ctx, topic); err != nil || len(infos) != 2 || !infos[1].Paused || infos[1].Name != "report" {
		t.Fatalf("after pause: %+v, %v", infos, err)
	}
	if st, body = act("resume", "report"); st != http.StatusOK || !strings.Contains(body, `data-name="report" data-paused="false"`) {
		t.Fatalf("resume: %d\n%s", st, body)
	}
	if st, body = act("remove", "beat"); st != http.StatusOK || strings.Contains(body, `data-name="beat"`) {
		t.Fatalf("remove: %d\n%s", st, body)
	}
	if st, body = act("remove", "beat"); st != http.StatusNotFound || !strings.Contains(body, "no schedule") {
		t.Fatalf("remove of a removed schedule: %d, want 404\n%s", st, body)
	}
	if st, _ = act("explode", "report"); st != http.StatusBadRequest {
		t.Fatalf("unknown op: %d, want 400", st)
	}
	if st, _ = act("pause", ""); st != http.StatusBadRequest {
		t.Fatalf("no name: %d, want 400", st)
	}
	if st, _ = b.post("/periodic/action", url.Values{"op": {"remove"}, "t": {topic}, "name": {"report"}}); st != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d, want 403", st)
	}
	if st, _ = b.get("/periodic/action"); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET of the action: %d, want 405", st)
	}
	if infos, err := s.List(ctx, topic); err != nil || len(infos) != 1 || infos[0].Name != "report" || infos[0].Paused {
		t.Fatalf("at the end: %+v, %v", infos, err)
	}

	ro, _ := serve(t, console.Options{ReadOnly: true, Client: c})
	rb := newBrowser(t, ro.URL)
	st, body = rb.get("/periodic")
	if st != http.StatusOK || !strings.Contains(body, `data-name="report"`) || strings.Contains(body, "/periodic/action") {
		t.Fatalf("read-only schedules page: %d\n%s", st, body)
	}
	if st, _ = rb.post("/periodic/action", url.Values{"op": {"remove"}, "t": {topic}, "name": {"report"}}); st != http.StatusForbidden {
		t.Fatalf("read-only remove: %d, want 403", st)
	}
}
