package console

import (
	"crypto/rand"
	"net/http"
	"sync"
	"time"
)

// Action results are shown with POST-redirect-GET: an action stores its result under a
// random token and answers 303 See Other to GET /result?r=TOKEN, so that reloading the
// result page shows it again instead of posting the action again. Results are kept for
// resultTTL, at most maxResults of them (the oldest dropped first).
const (
	resultTTL  = 10 * time.Minute
	maxResults = 256
)

// storedResult is a result with the status its page is served with.
type storedResult struct {
	res    result
	status int
	at     time.Time
}

// resultStore holds the results of recent actions by token.
type resultStore struct {
	mu    sync.Mutex
	byTok map[string]storedResult
	order []string // tokens, oldest first
}

// put stores res and returns its token.
func (s *resultStore) put(res result, status int, now time.Time) string {
	tok := rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTok == nil {
		s.byTok = map[string]storedResult{}
	}
	for len(s.order) > 0 && (len(s.order) >= maxResults || now.Sub(s.byTok[s.order[0]].at) > resultTTL) {
		delete(s.byTok, s.order[0])
		s.order = s.order[1:]
	}
	s.byTok[tok] = storedResult{res: res, status: status, at: now}
	s.order = append(s.order, tok)
	return tok
}

// get returns the result stored under tok, if it is there and not expired.
func (s *resultStore) get(tok string, now time.Time) (storedResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byTok[tok]
	if !ok || now.Sub(r.at) > resultTTL {
		return storedResult{}, false
	}
	return r, true
}

// pageResult serves the result page of an action (GET /result?r=TOKEN).
func (c *Console) pageResult(w http.ResponseWriter, r *http.Request) {
	sr, ok := c.results.get(r.URL.Query().Get("r"), time.Now())
	if !ok {
		c.fail(w, r, http.StatusNotFound, "this action result is no longer kept (results are kept 10 minutes); the pages show the current state")
		return
	}
	crumbs := append(c.topicCrumbs(sr.res.Topic), crumb{"dead letters", sr.res.BackDLQ})
	c.render(w, r, sr.status, "result.html", crumbs, sr.res)
}
