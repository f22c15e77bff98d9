package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/httplimit"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/reliability"
)

func init() {
	registerDemo(demo{
		name:    "reliability",
		summary: "retry + dead letters in memory; an HTTP server under load answering 429 with RateLimit headers",
		order:   30,
		run:     demoReliability,
	})
}

func demoReliability(ctx context.Context, out io.Writer) error {
	if err := demoRetryDeadLetter(ctx, out); err != nil {
		return err
	}
	return demoHTTP(ctx, out)
}

var errDeclined = errors.New("card declined")

// demoRetryDeadLetter processes orders under "retry twice, then dead-letter": a flaky
// dependency recovers on the third try, a permanent error is dead-lettered at once, a down
// dependency exhausts the retries.
func demoRetryDeadLetter(ctx context.Context, out io.Writer) error {
	fmt.Fprintln(out, "\nretry (2 retries, 5 ms doubling; card declined is not retried), then dead-letter queue of 10:")
	cfg, err := reliability.WithDeadLetterQueue[string](10)
	if err != nil {
		return err
	}
	policy := reliability.DefaultPolicy()
	policy.MaxAttempts = 2
	policy.InitialDelay = 5 * time.Millisecond
	policy.NonRetryable = []reliability.ErrorMatcher{reliability.Is(errDeclined)}
	policy.OnRetry = func(retry int, err error, wait time.Duration) {
		fmt.Fprintf(out, "     retry %d in %v after: %v\n", retry, wait, err)
	}
	cfg.RetryPolicy = &policy
	cfg.Name = "demo-orders"
	proc, err := reliability.NewProcessor(cfg)
	if err != nil {
		return err
	}
	tries := map[string]int{}
	handle := func(ctx context.Context, order string) error {
		tries[order]++
		switch {
		case order == "order-2" && tries[order] < 3:
			return errors.New("inventory service timeout")
		case order == "order-3":
			return fmt.Errorf("charge %s: %w", order, errDeclined)
		case order == "order-4":
			return errors.New("payment service down")
		}
		return nil
	}
	for _, order := range []string{"order-1", "order-2", "order-3", "order-4"} {
		fmt.Fprintf(out, "   %s:\n", order)
		res, err := proc.Process(ctx, order, handle)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "     -> %s after %d tries\n", res.Outcome, res.Attempts)
	}
	fmt.Fprintln(out, "   dead letters:")
	for _, fe := range cfg.DeadLetterQueue.All() {
		fmt.Fprintf(out, "     %s: %q, %d tries, replayable under a 5-try budget: %v\n",
			fe.Element, fe.Err.Error(), fe.AttemptCount, fe.AttemptCount < 5)
	}
	return nil
}

const demoHTTPConfig = `
redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    default-name: api
    policies:
      api:
        algorithm: sliding
        window-ms: 60000
        limit: 30
`

// demoHTTP serves HTTP on 127.0.0.1 behind a limiter built from YAML on the embedded Redis,
// sends a bounded load from 4 clients, prints the statuses and headers, and stops.
func demoHTTP(ctx context.Context, out io.Writer) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return err
	}
	defer mr.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		return err
	}
	defer client.Close()

	fmt.Fprintln(out, "\nHTTP server on 127.0.0.1, limiter from YAML (redis-streaming.ratelimit, sliding 30 per minute on the embedded Redis):")
	cfg, err := config.Load([]byte(demoHTTPConfig), config.Options{Redis: client, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	mw, err := httplimit.New(httplimit.Options{Limiter: cfg.RateLimit.Default, Key: httplimit.ByRemoteIP})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api", mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})))
	mux.Handle("/metrics", metrics.Handler(false))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-served
	}()
	base := "http://" + ln.Addr().String()
	httpc := &http.Client{Timeout: 10 * time.Second}
	defer httpc.CloseIdleConnections()

	const clients, perClient = 4, 25
	var (
		mu                 sync.Mutex
		counts             = map[int]int{}
		first200, first429 http.Header
		wg                 sync.WaitGroup
		errs               []error
	)
	for range clients {
		wg.Go(func() {
			for range perClient {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api", nil)
				resp, err := httpc.Do(req)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				counts[resp.StatusCode]++
				if resp.StatusCode == 200 && first200 == nil {
					first200 = resp.Header
				}
				if resp.StatusCode == 429 && first429 == nil {
					first429 = resp.Header
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fmt.Fprintf(out, "   %d requests from %d clients: %d x 200 OK, %d x 429 Too Many Requests\n",
		clients*perClient, clients, counts[200], counts[429])
	show := func(title string, h http.Header) {
		if h == nil {
			return
		}
		fmt.Fprintf(out, "   %s\n", title)
		for _, k := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := h.Get(k); v != "" {
				fmt.Fprintf(out, "     %s: %s\n", k, v)
			}
		}
	}
	show("an admitted response:", first200)
	show("a denied response:", first429)

	resp, err := httpc.Get(base + "/metrics")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Fprintln(out, "   GET /metrics (excerpt):")
	for _, line := range strings.Split(string(body), "\n") {
		if strings.Contains(line, `name="api"`) || strings.Contains(line, `name="demo-orders"`) && !strings.HasSuffix(line, " 0") {
			fmt.Fprintln(out, "    ", line)
		}
	}
	return nil
}
