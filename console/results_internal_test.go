package console

import (
	"fmt"
	"testing"
	"time"
)

// TestResultStore: results are found by their token until resultTTL, and at most
// maxResults are kept, the oldest dropped first.
func TestResultStore(t *testing.T) {
	var s resultStore
	t0 := time.Unix(1_700_000_000, 0)
	first := s.put(result{Action: "replay"}, 200, t0)
	if r, ok := s.get(first, t0.Add(resultTTL)); !ok || r.res.Action != "replay" || r.status != 200 {
		t.Fatalf("get at the TTL = %+v, %v", r, ok)
	}
	if _, ok := s.get(first, t0.Add(resultTTL+time.Second)); ok {
		t.Error("result found after its TTL")
	}
	var toks []string
	for i := 0; i < maxResults+10; i++ {
		toks = append(toks, s.put(result{Action: fmt.Sprint(i)}, 200, t0.Add(time.Duration(i)*time.Millisecond)))
	}
	now := t0.Add(time.Second)
	if _, ok := s.get(toks[9], now); ok {
		t.Error("an old result was kept beyond maxResults")
	}
	if r, ok := s.get(toks[len(toks)-1], now); !ok || r.res.Action != fmt.Sprint(maxResults+9) {
		t.Errorf("newest result: %+v, %v", r, ok)
	}
	if n := len(s.byTok); n > maxResults || len(s.order) != n {
		t.Errorf("%d results kept (%d in order), want at most %d", n, len(s.order), maxResults)
	}
	if _, ok := s.get("", now); ok {
		t.Error("empty token found a result")
	}
}
