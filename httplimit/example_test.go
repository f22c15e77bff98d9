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
	"github.com/redstream-go/redstream/metrics"
)

func ExampleMiddleware() {
	limiter, err := memory.NewLimiter(redstream.SlidingWindow(time.Minute, 2), memory.Options{})
	if err != nil {
		panic(err)
	}
	api, _ := metrics.Named("api", limiter)
	mw, err := httplimit.New(httplimit.Options{Limiter: api, Key: httplimit.ByRemoteIP})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	srv := httptest.NewServer(mw.Wrap(hello)) // in a program: http.ListenAndServe(addr, mw.Wrap(mux))
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d RateLimit-Policy: %s RateLimit: %s Retry-After: %q\n", resp.StatusCode,
			resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Policy: "api";q=2;w=60 RateLimit: "api";r=1;t=60 Retry-After: ""
	// 200 RateLimit-Policy: "api";q=2;w=60 RateLimit: "api";r=0;t=60 Retry-After: ""
	// 429 RateLimit-Policy: "api";q=2;w=60 RateLimit: "api";r=0;t=60 Retry-After: "60"
}
