package browsertest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/internal/redistest"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		// rueidis closes connections dropped by a cluster topology refresh 5 s later, from a
		// goroutine of its own.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func xlen(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// q returns the query string of the key/value pairs kv.
func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}

// serve starts a console over o.
func serve(t *testing.T, o console.Options) (*httptest.Server, rueidis.Client) {
	t.Helper()
	con, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mount := strings.TrimRight(o.Prefix, "/") + "/"
	mux.Handle(mount, con)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, o.Client
}
