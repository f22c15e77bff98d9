package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/memory"
)

// ExampleNew mounts the console under /ops/streams/ of an application's mux, behind the
// application's own authentication (requireOperator here).
func ExampleNew() {
	mr, err := miniredis.Run() // any Redis: a server, or a cluster client
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	defer client.Close()
	client.Do(context.Background(), client.B().Xadd().Key("orders").Id("*").FieldValue().FieldValue("body", "{}").Build())

	con, err := console.New(console.Options{
		Client: client,
		Prefix: "/ops/streams",
		// Stream: the stream.Config of your consumers (ConsumerTimeout, trimming, env).
		// ReadOnly: true for a view without replay, delete and purge.
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/streams/", requireOperator(con))

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/ops/streams/", nil)
	req.Header.Set("X-Operator", "ada")
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, strings.Contains(rec.Body.String(), ">orders</a>"))
	// Output: 200 true
}

// requireOperator stands for the application's authentication and authorization.
func requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Operator") == "" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ExampleOptions_limiters adds the rate limits page: the application's limiters by name
// (here an in-process one; Redis limiters and config's Registry entries work alike). A GET
// of /limits?l=NAME&key=KEY shows the key's state without changing it.
func ExampleOptions_limiters() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	defer client.Close()

	api, _ := memory.NewLimiter(redstream.FixedWindow(time.Hour, 100), memory.Options{})
	for i := 0; i < 7; i++ {
		api.AllowN(context.Background(), "customer:ada", time.Time{}, 1)
	}
	con, err := console.New(console.Options{
		Client:   client,
		Limiters: map[string]redstream.Limiter{"api": api},
	})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	con.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/limits?l=api&key=customer:ada", nil))
	body := rec.Body.String()
	fmt.Println(rec.Code, strings.Contains(body, `data-limit="100" data-available="93"`))
	// Output: 200 true
}
