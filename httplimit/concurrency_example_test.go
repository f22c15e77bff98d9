package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httplimit"
	"github.com/redstream-go/redstream/memory"
)

// One request in progress per API key: a second one while the first runs is 429; once the
// first returns, its slot is free again.
func ExampleConcurrency() {
	leases, err := memory.NewConcurrencyLimiter([]redstream.Spec{redstream.Concurrency(1, 30*time.Second)}, memory.Options{})
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.NewConcurrency(httplimit.ConcurrencyOptions{Limiter: leases, Key: httplimit.ByHeader("X-Api-Key")})
	if err != nil {
		panic(err)
	}
	entered, finish := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-finish
		}
		io.WriteString(w, "done")
	})
	srv := httptest.NewServer(mw.Wrap(slow))
	defer srv.Close()
	get := func(path string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("X-Api-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%s: %d Retry-After: %q\n", path, resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	first := make(chan struct{})
	go func() { get("/slow"); close(first) }()
	<-entered
	get("/fast") // while /slow holds the key's only slot
	close(finish)
	<-first
	get("/fast")
	// Output:
	// /fast: 429 Retry-After: "30"
	// /slow: 200 Retry-After: ""
	// /fast: 200 Retry-After: ""
}
