package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// syncBuffer is an io.Writer safe for the console's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startConsole runs `redstream console ARGS --listen 127.0.0.1:0` until the test ends and
// returns its URL.
func startConsole(t *testing.T, args ...string) string {
	t.Helper()
	urls := make(chan string, 1)
	consoleReady = func(u string) { urls <- u }
	t.Cleanup(func() { consoleReady = nil })
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"console", "--listen", "127.0.0.1:0"}, args...), out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("console: %v\n%s", err, out.String())
			}
		case <-time.After(15 * time.Second):
			t.Error("console did not stop within 15s of its context's end")
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("console ended: %v\n%s", err, out.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("console did not start:\n%s", out.String())
	}
	return ""
}

func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleDemo runs `redstream console --demo` as a newcomer would: with no Redis, the
// page shows the demo's topics, and its failing handler fills the dead-letter stream.
func TestConsoleDemo(t *testing.T) {
	base := startConsole(t, "--demo")
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, body := getPage(t, base+"dlq?t=orders")
		if st == http.StatusOK && strings.Contains(body, "payment declined for order 4: card expired") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter of the demo's failing handler after 30s: %d\n%s", st, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, body := getPage(t, base)
	if st != http.StatusOK || !strings.Contains(body, ">orders</a>") || !strings.Contains(body, ">emails</a>") {
		t.Fatalf("topics page: %d\n%s", st, body)
	}
	st, body = getPage(t, base+"dlq?t=emails")
	if st != http.StatusOK || !strings.Contains(body, "poison") {
		t.Fatalf("the demo's poison entry is not a dead letter: %d\n%s", st, body)
	}
	st, body = getPage(t, base+"group?t=orders&g=billing")
	if st != http.StatusOK || !strings.Contains(body, "crashed-worker-7") {
		t.Fatalf("group page: %d\n%s", st, body)
	}
	st, body = getPage(t, base+"limits")
	if st != http.StatusOK || !strings.Contains(body, ">api</a>") || !strings.Contains(body, ">login</a>") || !strings.Contains(body, ">hourly<") {
		t.Fatalf("limits page: %d\n%s", st, body)
	}
	// ada signs in every 800 ms and her burst of 5 earns one back a minute: soon denied.
	deadline = time.Now().Add(30 * time.Second)
	for {
		st, body = getPage(t, base+"limits?l=login&key=ada%40example.com")
		if st == http.StatusOK && strings.Contains(body, `class="combined" data-limit="5" data-available="0" data-allowed="false"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo's login limiter does not deny ada after 30s: %d\n%s", st, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestConsoleCommandConfig: with --config the limits page shows the file's Redis limiters,
// as the application that reads the same file uses them, and says which it leaves out.
func TestConsoleCommandConfig(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	file := filepath.Join(t.TempDir(), "application.yaml")
	yaml := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    key-prefix: cfgtest:rl
    default-name: api
    policies:
      api:
        algorithm: sliding
        window-ms: 3600000
        limit: 50
      local:
        backend: memory
        algorithm: token-bucket
        capacity: 10
        rate-per-second: 1
redis-stream:
  consumer-timeout-ms: 60000
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	app, err := config.FromConfig(file, config.Options{Redis: c})
	if err != nil {
		t.Fatal(err)
	}
	api, err := app.RateLimit.Registry.Get("api")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := api.AllowN(context.Background(), "tenant-7", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	out := &syncBuffer{}
	urls := make(chan string, 1)
	consoleReady = func(u string) { urls <- u }
	t.Cleanup(func() { consoleReady = nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"console", "--listen", "127.0.0.1:0", "--redis", srv.Addr, "--config", file}, out)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
	}()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		t.Fatalf("console ended: %v\n%s", err, out.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("console did not start:\n%s", out.String())
	}
	st, body := getPage(t, base+"limits")
	if st != http.StatusOK || !strings.Contains(body, ">api</a>") || strings.Contains(body, ">local</a>") || !strings.Contains(body, "cfgtest:rl:api") {
		t.Fatalf("limits page: %d\n%s", st, body)
	}
	if !strings.Contains(out.String(), `limiter "local" uses the memory backend`) {
		t.Errorf("the console does not say it leaves out the memory limiter:\n%s", out.String())
	}
	st, body = getPage(t, base+"limits?l=api&key=tenant-7")
	if st != http.StatusOK || !strings.Contains(body, `data-limit="50" data-available="46" data-allowed="true" data-remaining="45"`) {
		t.Fatalf("lookup of the application's key: %d\n%s", st, body)
	}
	for _, args := range [][]string{{"console", "--demo", "--config", file}, {"console", "--redis", srv.Addr, "--profile", "x"},
		{"console", "--redis", srv.Addr, "--config", filepath.Join(t.TempDir(), "missing.yaml")}} {
		if err := run(context.Background(), append(args, "--listen", "127.0.0.1:0"), io.Discard); err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
}

// TestConsoleCommandRedis serves a real redis-server read-only under a prefix.
func TestConsoleCommandRedis(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Xadd().Key("payments").Id("*").FieldValue().FieldValue("body", "{}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	dlq := streamwire.DeadLetterStreamName("payments")
	if err := c.Do(ctx, c.B().Xadd().Key(dlq).Id("*").FieldValue().FieldValue("body", "{}").
		FieldValue("dl_group", "g").FieldValue("dl_error", "boom").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	base := startConsole(t, "--redis", srv.Addr, "--read-only", "--prefix", "/ops")
	if !strings.HasSuffix(base, "/ops/") {
		t.Fatalf("URL %s, want the prefix /ops/", base)
	}
	st, body := getPage(t, base)
	if st != http.StatusOK || !strings.Contains(body, ">payments</a>") || strings.Contains(body, ">"+dlq+"</a>") {
		t.Fatalf("topics page: %d\n%s", st, body)
	}
	st, body = getPage(t, base+"dlq?t=payments")
	if st != http.StatusOK || !strings.Contains(body, "boom") || strings.Contains(body, `method="post"`) {
		t.Fatalf("read-only dead letters: %d\n%s", st, body)
	}
}

// TestConsoleCommandCluster serves the real 3-node cluster.
func TestConsoleCommandCluster(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	c := redistest.NewClient(t, addrs...)
	var topics []string
	for i := 0; i < 12; i++ {
		tp := fmt.Sprintf("cli-console-%d-%d", os.Getpid(), i)
		if err := c.Do(context.Background(), c.B().Xadd().Key(tp).Id("*").FieldValue().FieldValue("body", "{}").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		topics = append(topics, tp)
	}
	base := startConsole(t, "--cluster", strings.Join(addrs, ","))
	st, body := getPage(t, base+"?n=500")
	if st != http.StatusOK {
		t.Fatalf("%d\n%s", st, body)
	}
	for _, tp := range topics {
		if !strings.Contains(body, ">"+tp+"</a>") {
			t.Errorf("topic %s, on the cluster, not listed", tp)
		}
	}
}

func TestConsoleCommandFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"console", "--redis", "127.0.0.1:1", "--demo"}, "one of --redis, --cluster and --demo"},
		{[]string{"console", "extra"}, "unexpected arguments"},
		{[]string{"console", "--prefix", "nope", "--redis", "127.0.0.1:1"}, "--prefix"},
		{[]string{"console", "--no-such-flag"}, "no-such-flag"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"console", "--help"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, f := range []string{"-redis", "-cluster", "-listen", "127.0.0.1:8080", "-read-only", "-prefix", "-demo", "-config", "-profile"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help lacks %q:\n%s", f, out.String())
		}
	}
}
