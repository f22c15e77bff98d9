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

// Stacked middlewares each add their item to RateLimit-Policy and RateLimit, outer first;
// the one that denies adds Retry-After.
func ExampleMiddleware_stacked() {
	perIP, _ := memory.NewLimiter(redstream.SlidingWindow(time.Hour, 1000), memory.Options{})
	perUser, _ := memory.NewLimiter(redstream.SlidingWindow(time.Minute, 1), memory.Options{})
	ipNamed, _ := metrics.Named("ip", perIP)
	userNamed, _ := metrics.Named("user", perUser)
	outer, _ := httplimit.New(httplimit.Options{Limiter: ipNamed, Key: httplimit.ByRemoteIP})
	inner, _ := httplimit.New(httplimit.Options{Limiter: userNamed, Key: httplimit.ByHeader("X-User")})
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	h := outer.Wrap(inner.Wrap(hello))

	for _, user := range []string{"ada", "ada", ""} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if user != "" {
			req.Header.Set("X-User", user)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit-Policy: %s\n    RateLimit: %s Retry-After: %q\n", rec.Code,
			rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Policy: "ip";q=1000;w=3600, "user";q=1;w=60
	//     RateLimit: "ip";r=999;t=3600, "user";r=0;t=60 Retry-After: ""
	// 429 RateLimit-Policy: "ip";q=1000;w=3600, "user";q=1;w=60
	//     RateLimit: "ip";r=998;t=3600, "user";r=0;t=60 Retry-After: "60"
	// 400 RateLimit-Policy: "ip";q=1000;w=3600
	//     RateLimit: "ip";r=997;t=3600 Retry-After: ""
}
