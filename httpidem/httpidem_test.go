package httpidem_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/httpidem"
	"github.com/redstream-go/redstream/idempotency"
	"github.com/redstream-go/redstream/internal/redistest"
)

// The draft's example key (section 2.3 of -07).
const draftKey = `"8e03978e-40d5-43e8-bc93-6894a57f9324"`

// backends builds an Idempotent on each engine the middleware is tested on.
var backends = []struct {
	name   string
	client func(t testing.TB) rueidis.Client // nil: memory
}{
	{"memory", nil},
	{"redis", redistest.Client},
	{"cluster", redistest.ClusterClient},
}

func newIdempotent(t *testing.T, client func(t testing.TB) rueidis.Client, o idempotency.Options) *idempotency.Idempotent {
	t.Helper()
	o.Name = strings.NewReplacer("/", "-", "=", "-").Replace(t.Name())
	var (
		i   *idempotency.Idempotent
		err error
	)
	if client == nil {
		i, err = idempotency.NewMemory(o)
	} else {
		i, err = idempotency.NewRedis(client(t), o)
	}
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// byUser is the principal: the X-User header (an authenticated user in a real API).
func byUser(r *http.Request) string { return r.Header.Get("X-User") }

// payments is a handler that counts its runs and answers 201 with a body naming the run.
type payments struct{ runs atomic.Int64 }

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	if s := r.URL.Query().Get("status"); s != "" {
		var code int
		fmt.Sscan(s, &code)
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d run %d", code, n)
		return
	}
	w.Header().Set("Location", "/payments/"+fmt.Sprint(n))
	w.Header().Add("X-Multi", "a")
	w.Header().Add("X-Multi", "b")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"run":%d,"body":%q}`, n, body)
}

type req struct {
	method, target, user, body string
	key                        []string // Idempotency-Key field lines
	header                     map[string]string
}

func do(t *testing.T, h http.Handler, q req) *httptest.ResponseRecorder {
	t.Helper()
	if q.method == "" {
		q.method = http.MethodPost
	}
	if q.target == "" {
		q.target = "/payments"
	}
	r := httptest.NewRequest(q.method, q.target, strings.NewReader(q.body))
	r.Header.Set("X-User", q.user)
	for _, k := range q.key {
		r.Header.Add("Idempotency-Key", k)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// problemOf decodes a problem details response, checking its media type and status member.
func problemOf(t *testing.T, w *httptest.ResponseRecorder, status int) map[string]any {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d (%s), want %d", w.Code, w.Body, status)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if p["status"] != float64(status) || p["title"] == "" || p["detail"] == "" {
		t.Fatalf("problem %v", p)
	}
	return p
}

func sameResponse(t *testing.T, got, want *httptest.ResponseRecorder) {
	t.Helper()
	if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
		t.Fatalf("replay %d %q, want %d %q", got.Code, got.Body, want.Code, want.Body)
	}
	if fmt.Sprint(got.Header()) != fmt.Sprint(want.Header()) {
		t.Fatalf("replay header %v, want %v", got.Header(), want.Header())
	}
}

func TestDraftExamplesAndErrors(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			idem := newIdempotent(t, b.client, idempotency.Options{})
			mk := func(o httpidem.Options) (*payments, http.Handler) {
				o.Idempotent, o.Principal = idem, byUser
				m, err := httpidem.New(o)
				if err != nil {
					t.Fatal(err)
				}
				p := &payments{}
				return p, m.Wrap(p)
			}
			p, h := mk(httpidem.Options{ProblemType: "https://developer.example.com/idempotency", FingerprintHeaders: []string{"content-type"}})

			t.Run("first request and its retry", func(t *testing.T) {
				first := do(t, h, req{user: "u1", key: []string{draftKey}, body: `{"amount":10}`})
				if first.Code != http.StatusCreated || p.runs.Load() != 1 {
					t.Fatalf("first: %d %s after %d runs", first.Code, first.Body, p.runs.Load())
				}
				for range 2 {
					sameResponse(t, do(t, h, req{user: "u1", key: []string{draftKey}, body: `{"amount":10}`}), first)
				}
				if p.runs.Load() != 1 {
					t.Fatalf("handler ran %d times, want 1", p.runs.Load())
				}
			})
			t.Run("key with parameters and spaces", func(t *testing.T) {
				first := do(t, h, req{user: "u1", key: []string{` "k-params";a=1;b;c="x";d=?0;e=:AQ==:;f=tok/x;g=@1659578233;h=%"caf%c3%a9";i=1.5 `}})
				again := do(t, h, req{user: "u1", key: []string{`"k-params"`}})
				if first.Code != http.StatusCreated {
					t.Fatalf("%d %s", first.Code, first.Body)
				}
				sameResponse(t, again, first)
			})
			t.Run("400 missing when required", func(t *testing.T) {
				_, hr := mk(httpidem.Options{Required: true, ProblemType: "https://developer.example.com/idempotency"})
				pr := problemOf(t, do(t, hr, req{user: "u1"}), http.StatusBadRequest)
				if pr["title"] != "Idempotency-Key is missing" || pr["type"] != "https://developer.example.com/idempotency" {
					t.Fatalf("problem %v", pr)
				}
			})
			t.Run("missing key not required runs unprotected", func(t *testing.T) {
				q, hn := mk(httpidem.Options{})
				do(t, hn, req{user: "u1"})
				do(t, hn, req{user: "u1"})
				if q.runs.Load() != 2 {
					t.Fatalf("runs %d, want 2", q.runs.Load())
				}
			})
			for name, key := range map[string][]string{
				"token, not a string": {`8e03978e-40d5-43e8-bc93-6894a57f9324`},
				"two field lines":     {`"a"`, `"b"`},
				"a list":              {`"a", "b"`},
				"empty string":        {`""`},
				"too long":            {`"` + strings.Repeat("k", 256) + `"`},
				"control character":   {"\"a\tb\""},
				"unterminated":        {`"abc`},
				"bad escape":          {`"a\b"`},
				"bad parameter":       {`"abc";A=1`},
				"trailing garbage":    {`"abc" x`},
				"empty field":         {``},
			} {
				t.Run("400 "+name, func(t *testing.T) {
					before := p.runs.Load()
					pr := problemOf(t, do(t, h, req{user: "u1", key: key}), http.StatusBadRequest)
					if pr["title"] != "Idempotency-Key is invalid" || p.runs.Load() != before {
						t.Fatalf("problem %v, runs %d -> %d", pr, before, p.runs.Load())
					}
				})
			}
			t.Run("422 other payload", func(t *testing.T) {
				do(t, h, req{user: "u1", key: []string{`"k-422"`}, body: "a"})
				for _, q := range []req{
					{body: "b"},
					{body: "a", target: "/payments?x=1"},
					{body: "a", target: "/refunds"},
					{body: "a", method: http.MethodPatch},
					{body: "a", header: map[string]string{"Content-Type": "text/plain"}},
				} {
					q.user, q.key = "u1", []string{`"k-422"`}
					pr := problemOf(t, do(t, h, q), http.StatusUnprocessableEntity)
					if pr["title"] != "Idempotency-Key is already used" {
						t.Fatalf("%+v: problem %v", q, pr)
					}
				}
			})
			t.Run("409 in flight", func(t *testing.T) {
				started, release := make(chan struct{}), make(chan struct{})
				m, _ := httpidem.New(httpidem.Options{Idempotent: idem, Principal: byUser})
				slow := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(started)
					<-release
					w.WriteHeader(http.StatusAccepted)
				}))
				done := make(chan int)
				go func() { done <- do(t, slow, req{user: "u1", key: []string{`"k-409"`}}).Code }()
				<-started
				w := do(t, slow, req{user: "u1", key: []string{`"k-409"`}})
				pr := problemOf(t, w, http.StatusConflict)
				if pr["title"] != "A request is outstanding for this Idempotency-Key" || w.Header().Get("Retry-After") != "1" {
					t.Fatalf("problem %v, header %v", pr, w.Header())
				}
				close(release)
				if c := <-done; c != http.StatusAccepted {
					t.Fatalf("first: %d", c)
				}
				if c := do(t, slow, req{user: "u1", key: []string{`"k-409"`}}).Code; c != http.StatusAccepted {
					t.Fatalf("replay: %d", c)
				}
			})
			t.Run("413 body too large", func(t *testing.T) {
				_, hs := mk(httpidem.Options{MaxBody: 4})
				problemOf(t, do(t, hs, req{user: "u1", key: []string{`"k-413"`}, body: "12345"}), http.StatusRequestEntityTooLarge)
				if w := do(t, hs, req{user: "u1", key: []string{`"k-413"`}, body: "1234"}); w.Code != http.StatusCreated {
					t.Fatalf("at the bound: %d", w.Code)
				}
			})
			t.Run("5xx not stored, 4xx stored", func(t *testing.T) {
				before := p.runs.Load()
				if w := do(t, h, req{user: "u1", key: []string{`"k-5xx"`}, target: "/payments?status=503"}); w.Code != 503 {
					t.Fatalf("first: %d", w.Code)
				}
				if w := do(t, h, req{user: "u1", key: []string{`"k-5xx"`}, target: "/payments?status=503"}); w.Code != 503 || p.runs.Load() != before+2 {
					t.Fatalf("retry of a 5xx: %d after %d runs, want a second run", w.Code, p.runs.Load()-before)
				}
				first := do(t, h, req{user: "u1", key: []string{`"k-4xx"`}, target: "/payments?status=402"})
				sameResponse(t, do(t, h, req{user: "u1", key: []string{`"k-4xx"`}, target: "/payments?status=402"}), first)
				if p.runs.Load() != before+3 {
					t.Fatalf("runs %d, want %d", p.runs.Load(), before+3)
				}
			})
			t.Run("other methods pass through", func(t *testing.T) {
				before := p.runs.Load()
				do(t, h, req{method: http.MethodGet, user: "u1", key: []string{`"k-get"`}})
				do(t, h, req{method: http.MethodGet, user: "u1", key: []string{`"k-get"`}})
				do(t, h, req{method: http.MethodPut, user: "u1", key: []string{"not a string"}})
				if p.runs.Load() != before+3 {
					t.Fatalf("runs %d, want 3", p.runs.Load()-before)
				}
			})
		})
	}
}

// TestCrossPrincipal: a principal replaying another's key with the same request runs its
// own request; keys and principals cannot be shifted to collide.
func TestCrossPrincipal(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			idem := newIdempotent(t, b.client, idempotency.Options{})
			m, _ := httpidem.New(httpidem.Options{Idempotent: idem, Principal: byUser})
			p := &payments{}
			h := m.Wrap(p)
			alice := do(t, h, req{user: "alice", key: []string{`"shared"`}, body: "pay 10"})
			mallory := do(t, h, req{user: "mallory", key: []string{`"shared"`}, body: "pay 10"})
			if p.runs.Load() != 2 || bytes.Equal(alice.Body.Bytes(), mallory.Body.Bytes()) || alice.Header().Get("Location") == mallory.Header().Get("Location") {
				t.Fatalf("mallory got %q (alice %q) after %d runs: a replay of another principal's response", mallory.Body, alice.Body, p.runs.Load())
			}
			sameResponse(t, do(t, h, req{user: "alice", key: []string{`"shared"`}, body: "pay 10"}), alice)
			// "a" with key "1:b" and "a:1" with key "b" must not share a record.
			x := do(t, h, req{user: "a", key: []string{`"1:b"`}})
			y := do(t, h, req{user: "a:1", key: []string{`"b"`}})
			z := do(t, h, req{user: "", key: []string{`"1:a:1:b"`}})
			if x.Body.String() == y.Body.String() || y.Body.String() == z.Body.String() || p.runs.Load() != 5 {
				t.Fatalf("shifted principal and key collided: %q %q %q", x.Body, y.Body, z.Body)
			}
		})
	}
}

// TestConcurrentOneKey: 100 concurrent requests with one key over real connections run the
// handler once; the others get 409, or the stored response in wait mode.
func TestConcurrentOneKey(t *testing.T) {
	for _, b := range backends[1:] {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wait=%v", b.name, wait), func(t *testing.T) {
				// A generous Redis deadline: the test is of the outcome, on a loaded machine.
				idem := newIdempotent(t, b.client, idempotency.Options{Wait: wait, Timeout: 5 * time.Second})
				m, _ := httpidem.New(httpidem.Options{Idempotent: idem, Principal: byUser})
				const n = 100
				var runs atomic.Int64
				answered := make(chan struct{}, n) // every response but the handler's
				h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					if !wait {
						for range n - 1 { // hold the key until every other request was answered
							<-answered
						}
					} else {
						time.Sleep(100 * time.Millisecond)
					}
					w.WriteHeader(http.StatusCreated)
					io.WriteString(w, "charged once")
				}))
				srv := httptest.NewServer(h)
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
				defer client.CloseIdleConnections()
				codes := make(chan string, n)
				for range n {
					go func() {
						r, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader("pay"))
						r.Header.Set("Idempotency-Key", `"one-key"`)
						r.Header.Set("X-User", "u")
						resp, err := client.Do(r)
						if err != nil {
							answered <- struct{}{}
							codes <- err.Error()
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							answered <- struct{}{}
						}
						codes <- fmt.Sprintf("%d %s", resp.StatusCode, body)
					}()
				}
				count := map[string]int{}
				for range n {
					c := <-codes
					if strings.HasPrefix(c, "409") {
						c = "409"
					}
					count[c]++
				}
				if runs.Load() != 1 {
					t.Fatalf("handler ran %d times, want 1 (%v)", runs.Load(), count)
				}
				want := map[string]int{"201 charged once": 1, "409": n - 1}
				if wait {
					want = map[string]int{"201 charged once": n}
				}
				if fmt.Sprint(count) != fmt.Sprint(want) {
					t.Fatalf("responses %v, want %v", count, want)
				}
				t.Logf("%d requests: handler ran once; responses %v", n, count)
			})
		}
	}
}

// TestRedisDown: with Redis stopped, an unsafe request gets 503 without running the
// handler (fail closed); a safe method listed in Methods runs unprotected.
func TestRedisDown(t *testing.T) {
	s := redistest.NewServer(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idem, err := idempotency.NewRedis(c, idempotency.Options{Name: "down"})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := httpidem.New(httpidem.Options{Idempotent: idem, Principal: byUser, Methods: []string{"POST", "get"}})
	p := &payments{}
	h := m.Wrap(p)
	s.Stop()
	w := do(t, h, req{user: "u", key: []string{`"k"`}})
	problemOf(t, w, http.StatusServiceUnavailable)
	if p.runs.Load() != 0 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("runs %d, header %v", p.runs.Load(), w.Header())
	}
	if w := do(t, h, req{method: http.MethodGet, user: "u", key: []string{`"k"`}}); w.Code != http.StatusCreated || p.runs.Load() != 1 {
		t.Fatalf("GET with Redis down: %d after %d runs", w.Code, p.runs.Load())
	}
}

func TestNewValidates(t *testing.T) {
	idem, _ := idempotency.NewMemory(idempotency.Options{})
	for _, o := range []httpidem.Options{{}, {Idempotent: idem}, {Idempotent: idem, Principal: byUser, MaxBody: -1}} {
		if _, err := httpidem.New(o); err == nil {
			t.Errorf("New(%+v): nil error", o)
		}
	}
}
