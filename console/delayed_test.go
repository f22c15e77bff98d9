package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestDelayedPage: a topic's scheduled messages are listed in due order with their key and
// decoded body (gzip too); one is cancelled and never reaches the stream; one is delivered
// now and is in the stream at once, with no consumer running; a read-only console lists them
// without actions; bad actions are refused without changing anything.
func TestDelayedPage(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	topic := newTopic(t)
	p, err := stream.NewProducer(c, stream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	type order struct {
		N    int    `json:"n"`
		Note string `json:"note"`
	}
	var ids []string
	for i, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
		msg := stream.NewMessage(order{N: i, Note: strings.Repeat("x", 10*i)})
		msg.Key = "order-" + string(rune('a'+i))
		opts := []stream.SendOption{stream.WithDelay(d)}
		if i == 2 {
			opts = append(opts, stream.WithGzip())
		}
		id, err := p.Send(ctx, topic, msg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	web, _ := serve(t, console.Options{Client: c, Topics: []string{topic}})
	b := newBrowser(t, web.URL)
	st, body := b.get("/delayed" + q("t", topic))
	if st != http.StatusOK {
		t.Fatalf("GET /delayed: %d\n%s", st, body)
	}
	mustContain(t, body, "3 messages scheduled", "order-a", "order-b", "order-c", `&#34;n&#34;:2,&#34;note&#34;:&#34;xxxxxxxxxxxxxxxxxxxx&#34;}`)
	rows := regexp.MustCompile(`name="id" value="([0-9a-f]+)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != 3 || rows[0][1] != ids[1] || rows[1][1] != ids[2] || rows[2][1] != ids[0] {
		t.Fatalf("rows %v, want the ids in due order %s %s %s", rows, ids[1], ids[2], ids[0])
	}
	tok := b.token("/delayed" + q("t", topic))
	same := []string{"Sec-Fetch-Site", "same-origin", "Origin", web.URL}

	// Refused: an unknown action, a bad id, no selection; nothing changes.
	for name, form := range map[string]url.Values{
		"unknown action": {"t": {topic}, "op": {"drop"}, "id": {ids[0]}, "csrf": {tok}},
		"bad id":         {"t": {topic}, "op": {"cancel"}, "id": {"../x"}, "csrf": {tok}},
		"nothing chosen": {"t": {topic}, "op": {"cancel"}, "csrf": {tok}},
	} {
		if st, body := b.post("/delayed/action", form, same...); st != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400\n%s", name, st, body)
		}
	}
	if n, err := p.Scheduled(ctx, topic); err != nil || n != 3 {
		t.Fatalf("refused actions changed the schedule: %d, %v", n, err)
	}

	// Cancel the first due; deliver the next now.
	st, body = b.post("/delayed/action", url.Values{"t": {topic}, "op": {"cancel"}, "id": {ids[1]}, "csrf": {tok}}, same...)
	if st != http.StatusOK || !strings.Contains(body, "1 of 1 selected scheduled messages cancelled") || strings.Contains(body, ids[1]) {
		t.Fatalf("cancel: %d\n%s", st, body)
	}
	st, body = b.post("/delayed/action", url.Values{"t": {topic}, "op": {"now"}, "id": {ids[2]}, "csrf": {tok}}, same...)
	if st != http.StatusOK || !strings.Contains(body, "1 of 1 selected scheduled messages delivered now") || !strings.Contains(body, "1 message scheduled") {
		t.Fatalf("deliver now: %d\n%s", st, body)
	}
	es, err := c.Do(ctx, c.B().Xrange().Key(topic).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(es) != 1 || es[0].FieldValues["key"] != "order-c" {
		t.Fatalf("the stream holds %v (%v), want the message delivered now alone", es, err)
	}
	if n, err := p.Scheduled(ctx, topic); err != nil || n != 1 {
		t.Fatalf("%d scheduled (%v), want 1 left", n, err)
	}
	// Cancelling again what is gone changes nothing and says so.
	st, body = b.post("/delayed/action", url.Values{"t": {topic}, "op": {"cancel"}, "id": {ids[1], ids[2]}, "csrf": {tok}}, same...)
	if st != http.StatusOK || !strings.Contains(body, "0 of 2 selected scheduled messages cancelled") {
		t.Fatalf("cancel of gone messages: %d\n%s", st, body)
	}

	ro, _ := serve(t, console.Options{Client: c, Topics: []string{topic}, ReadOnly: true})
	st, body = newBrowser(t, ro.URL).get("/delayed" + q("t", topic))
	if st != http.StatusOK || strings.Contains(body, "deliver-now") || strings.Contains(body, `name="csrf"`) || !strings.Contains(body, "order-a") {
		t.Fatalf("read-only page: %d\n%s", st, body)
	}
	if st, _ := b.get("/delayed" + q("t", topic, "offset", "-1")); st != http.StatusBadRequest {
		t.Errorf("a negative offset: %d, want 400", st)
	}
}
