package console

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// TestSearchBudget: a search whose time budget is spent after every read stops after one
// chunk with a cursor, and going on from each cursor finds every match exactly once.
func TestSearchBudget(t *testing.T) {
	defer func(b time.Duration) { searchBudget = b }(searchBudget)
	searchBudget = time.Nanosecond
	c := redistest.Client(t)
	topic := fmt.Sprintf("search-budget-%d", time.Now().UnixNano())
	key := streamwire.DeadLetterStreamName(topic)
	const n = 5500
	want := map[string]bool{}
	for i := range n {
		body := `{"x":0}`
		if i%500 == 7 {
			body = `{"x":"needle"}`
		}
		id, err := c.Do(context.Background(), c.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("body", body).
			FieldValue("dl_group", "g").FieldValue("dl_error", "e").FieldValue("dl_ts", strconv.Itoa(i)).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if i%500 == 7 {
			want[id] = true
		}
	}
	con, err := New(Options{Client: c, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	found, after, pages := map[string]bool{}, "", 0
	for {
		p, err := con.listDeadLetters(context.Background(), topic, deadLetterFilter{Body: "needle"}, after, 50)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.Scanned > searchChunk {
			t.Fatalf("page %d read %d dead letters past its budget, want one chunk of %d", pages, p.Scanned, searchChunk)
		}
		for _, r := range p.Rows {
			if found[r.ID] {
				t.Fatalf("%s found twice", r.ID)
			}
			found[r.ID] = true
		}
		if p.Next == "" {
			break
		}
		if !p.OutOfTime {
			t.Fatalf("page %d stopped with a cursor but not at its budget", pages)
		}
		after = p.Next
	}
	if len(found) != len(want) || pages != n/searchChunk+1 {
		t.Fatalf("found %d of %d in %d pages, want all in %d", len(found), len(want), pages, n/searchChunk+1)
	}
	for id := range want {
		if !found[id] {
			t.Errorf("%s not found", id)
		}
	}
}
