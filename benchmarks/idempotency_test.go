package benchmarks

import (
	"context"
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
)

// BenchmarkIdempotencyMiddleware: the cost per request of httpidem on a real Redis against
// the same handler without middleware and behind a hand-written SET NX lock (the in-flight
// marker SET NX PX, then the response SET PX: two round trips, as the middleware's acquire
// and complete scripts are, but without fingerprint, principal scope, lease renewal or
// problem details). Requests are served in process (httptest.ResponseRecorder), so the
// figures are the middleware's and Redis's, not a network stack's.
//
// "first" requests carry a new key each (the path that runs the handler and stores its
// response); "replay" requests repeat one key (the stored response). The contenders run in
// interleaved rounds timed by the wall clock (the Redis round trips are the cost); read the
// ratios idem/none, idem/setnx and idem/setnx-deadline, not the absolute ns/op.
func BenchmarkIdempotencyMiddleware(b *testing.B) {
	client := redisClient(b)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_1","amount":%q}`, body)
	})
	idem, err := idempotency.NewRedis(client, idempotency.Options{Name: "bench", Timeout: 2 * time.Second}) // a loaded machine: measure, do not time out
	if err != nil {
		b.Fatal(err)
	}
	mw, err := httpidem.New(httpidem.Options{Idempotent: idem, Principal: func(r *http.Request) string { return r.Header.Get("X-User") }})
	if err != nil {
		b.Fatal(err)
	}
	withIdem := mw.Wrap(handler)
	withLock := setNXLock(client, 0, handler)
	withLockDeadline := setNXLock(client, 2*time.Second, handler)

	var seq atomic.Int64
	serve := func(h http.Handler, key string) {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader("1000"))
		r.Header.Set("X-User", "u1")
		r.Header.Set("Idempotency-Key", `"`+key+`"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	run := func(h http.Handler, replay bool) func(n int) {
		return func(n int) {
			for range n {
				key := "replayed-key"
				if !replay {
					key = fmt.Sprintf("k-%d", seq.Add(1))
				}
				serve(h, key)
			}
		}
	}
	for _, replay := range []bool{false, true} {
		name := map[bool]string{false: "first", true: "replay"}[replay]
		b.Run(name, func(b *testing.B) {
			runRounds(b, []contender{
				{"idem", run(withIdem, replay)},
				{"none", run(handler, replay)},
				{"setnx", run(withLock, replay)},
				{"setnx-deadline", run(withLockDeadline, replay)},
			}, func(c contender, n int) time.Duration {
				t0 := time.Now()
				c.run(n)
				return time.Since(t0)
			})
			if !replay && seq.Load() < int64(2*minRound) {
				b.Fatalf("only %d distinct keys: the first-request fixture repeated keys", seq.Load())
			}
		})
	}
}

// setNXLock is the hand-written version: SET NX PX marks the key in flight; a repeat
// finding the stored body replays it, one finding the marker is 409; the response body is
// then stored with SET PX. No fingerprint, no scope, no renewal, headers not stored. With
// timeout > 0 each call has that deadline, as each of the middleware's Redis calls has (a
// context with a deadline takes rueidis's slower path).
func setNXLock(c rueidis.Client, timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		key := "bench:setnx:" + r.Header.Get("Idempotency-Key")
		ok, err := c.Do(ctx, c.B().Set().Key(key).Value("running").Nx().PxMilliseconds(30000).Build()).AsBool()
		if err != nil && !rueidis.IsRedisNil(err) {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !ok {
			v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
			if err != nil || v == "running" {
				http.Error(w, "in flight", http.StatusConflict)
				return
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, v)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		_ = c.Do(ctx, c.B().Set().Key(key).Value(rec.Body.String()).PxMilliseconds(86400000).Build()).Error()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}
