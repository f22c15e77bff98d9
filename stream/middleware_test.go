package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

type ctxKey string

// trace records the steps of a middleware chain, safe for concurrent use.
type trace struct {
	mu    sync.Mutex
	steps []string
}

func (tr *trace) add(s string) {
	tr.mu.Lock()
	tr.steps = append(tr.steps, s)
	tr.mu.Unlock()
}

func (tr *trace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.steps, " ")
}

func named(tr *trace, name string) stream.Middleware {
	return func(next stream.HandleFunc) stream.HandleFunc {
		return func(ctx context.Context, d *stream.Delivery) error {
			tr.add(fmt.Sprintf("%s>%d", name, d.DeliveryCount))
			err := next(context.WithValue(ctx, ctxKey(name), d.Headers["h1"]), d)
			tr.add("<" + name)
			return err
		}
	}
}

// TestMiddlewareOrder checks on a real server that Consumer.Use middleware wrap
// Handler.Middleware, first outermost, that each sees the message's headers and delivery
// count, and that the ctx they pass on reaches Handle.
func TestMiddlewareOrder(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	var tr trace
	c := newConsumer(t, client, cfg)
	c.Use(named(&tr, "a"), named(&tr, "b"))
	done := make(chan string, 2)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Middleware: []stream.Middleware{named(&tr, "c"), named(&tr, "d")},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			tr.add("handle")
			done <- fmt.Sprintf("%v %v", ctx.Value(ctxKey("a")), ctx.Value(ctxKey("d")))
			if m.DeliveryCount == 1 {
				return errors.New("first delivery fails")
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	c.Use(named(&tr, "late")) // after Register: not in that handler's chain
	msg := stream.NewMessage(order{ID: 1})
	msg.Headers = map[string]string{"h1": "v1"}
	if _, err := p.Send(context.Background(), topic, msg); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	for i := 0; i < 2; i++ {
		select {
		case got := <-done:
			if got != "v1 v1" {
				t.Fatalf("ctx values in Handle = %q, want \"v1 v1\"", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d not handled; trace %s", i+1, &tr)
		}
	}
	want := "a>1 b>1 c>1 d>1 handle <d <c <b <a a>2 b>2 c>2 d>2 handle <d <c <b <a"
	eventually(t, 5*time.Second, "the chain to unwind", func() bool { return tr.String() == want })
}

// TestSendMiddleware checks the producer's hooks: they add headers the consumer receives,
// without touching the caller's map; headers they add are validated; one can refuse a send.
func TestSendMiddleware(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	p.Use(func(next stream.SendFunc) stream.SendFunc {
		return func(ctx context.Context, out *stream.Outgoing) (string, error) {
			if out.Topic != topic || out.Key == "" {
				return "", fmt.Errorf("middleware saw topic %q key %q", out.Topic, out.Key)
			}
			if v, ok := ctx.Value(ctxKey("req")).(string); ok {
				out.Headers["x-request-id"] = v
			}
			if out.Body.(order).Status == "refuse" {
				return "", errors.New("refused by middleware")
			}
			return next(ctx, out)
		}
	}, func(next stream.SendFunc) stream.SendFunc {
		return func(ctx context.Context, out *stream.Outgoing) (string, error) {
			if out.Body.(order).Status == "bad" {
				out.Headers["bad name"] = "x"
			}
			id, err := next(ctx, out)
			if err == nil && id == "" {
				return "", errors.New("no id")
			}
			return id, err
		}
	})
	ctx := context.WithValue(context.Background(), ctxKey("req"), "r-42")
	own := map[string]string{"tenant": "acme"}
	msg := stream.NewMessage(order{ID: 1, Status: "ok"})
	msg.Headers = own
	if _, err := p.Send(ctx, topic, msg); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(own, map[string]string{"tenant": "acme"}) {
		t.Fatalf("the caller's headers changed: %v", own)
	}
	if _, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 2, Status: "refuse"})); err == nil || !strings.Contains(err.Error(), "refused by middleware") {
		t.Fatalf("Send = %v, want the middleware's refusal", err)
	}
	if _, err := p.Send(ctx, topic, stream.NewMessage(order{ID: 3, Status: "bad"})); !errors.Is(err, stream.ErrInvalidHeader) {
		t.Fatalf("Send = %v, want ErrInvalidHeader for a header added by middleware", err)
	}
	if n := xlen(t, client, topic); n != 1 {
		t.Fatalf("XLEN = %d, want 1 (two sends refused)", n)
	}
	got := make(chan map[string]string, 1)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Handle: func(_ context.Context, m *stream.Message[order]) error {
		got <- m.Headers
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	select {
	case h := <-got:
		if want := map[string]string{"tenant": "acme", "x-request-id": "r-42"}; !maps.Equal(h, want) {
			t.Fatalf("headers %v, want %v", h, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use (a slog handler's output).
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

// deadLetterError waits for topic's single dead letter and returns its reason.
func deadLetterError(t *testing.T, client rueidis.Client, cfg stream.Config, topic string) string {
	t.Helper()
	dls, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	eventually(t, 10*time.Second, "the dead letter", func() bool {
		l, err := dls.List(context.Background(), topic, stream.ListOptions{})
		if err == nil && len(l) == 1 {
			reason = l[0].Error
			return true
		}
		return false
	})
	return reason
}

// TestRecoverAndLogging: a panicking handler behind Logging(Recover()) is logged as a
// failure and dead-lettered with its stack; without Recover the consumer's own recover
// gives the same reason.
func TestRecoverAndLogging(t *testing.T) {
	for _, withRecover := range []bool{true, false} {
		t.Run(fmt.Sprint("recover=", withRecover), func(t *testing.T) {
			client := redistest.Client(t)
			cfg := fastConfig()
			topic := newTopic(t)
			p := newProducer(t, client, cfg)
			var logs syncBuffer
			mws := []stream.Middleware{stream.Logging(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}
			if withRecover {
				mws = append(mws, stream.Recover())
			}
			failed := make(chan error, 1)
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true, Middleware: mws,
				Handle: func(context.Context, *stream.Message[order]) error { panic("boom") },
				OnFailure: func(_ context.Context, _ *stream.Message[order], _ []byte, err error) {
					failed <- err
				}}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c)
			send(t, p, topic, order{ID: 1})
			reason := deadLetterError(t, client, cfg, topic)
			if !strings.HasPrefix(reason, "stream: handler panicked: boom\ngoroutine ") || !strings.Contains(reason, "middleware_test.go") {
				t.Fatalf("dead-letter reason %q, want the panic and its stack", reason)
			}
			var pe *stream.PanicError
			if err := <-failed; !errors.As(err, &pe) || pe.Value != "boom" {
				t.Fatalf("OnFailure error %v, want a *PanicError of boom", err)
			}
			logged := strings.Contains(logs.String(), "stream: handle failed") && strings.Contains(logs.String(), "panicked: boom")
			if logged != withRecover {
				t.Fatalf("failure logged = %v, want %v (Logging sees the panic only through Recover); log:\n%s", logged, withRecover, logs.String())
			}
		})
	}
}

// TestTimeoutMiddleware: the Timeout middleware fails a handler that outlives it like
// Handler.Timeout (ErrHandlerTimeout, counted in the timeouts metric), and Handler.Timeout
// bounds the whole chain when it is shorter.
func TestTimeoutMiddleware(t *testing.T) {
	tests := []struct {
		name       string
		mw         time.Duration // Timeout middleware
		handler    time.Duration // Handler.Timeout
		wantReason string
	}{
		{"middleware", 100 * time.Millisecond, 0, "timed out after 100ms"},
		{"handler timeout shorter", 30 * time.Second, 100 * time.Millisecond, "timed out after 100ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := redistest.Client(t)
			cfg := fastConfig()
			set := vm.NewSet()
			cfg.Metrics = set
			topic := newTopic(t)
			p := newProducer(t, client, cfg)
			failed := make(chan error, 1)
			deadlineSeen := make(chan bool, 1)
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true, Timeout: tc.handler,
				Middleware: []stream.Middleware{func(next stream.HandleFunc) stream.HandleFunc {
					return func(ctx context.Context, d *stream.Delivery) error {
						_, ok := ctx.Deadline()
						deadlineSeen <- ok
						return next(ctx, d)
					}
				}, stream.Timeout(tc.mw)},
				Handle: func(ctx context.Context, _ *stream.Message[order]) error {
					<-ctx.Done()
					return ctx.Err()
				},
				OnFailure: func(_ context.Context, _ *stream.Message[order], _ []byte, err error) { failed <- err }}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c)
			start := time.Now()
			send(t, p, topic, order{ID: 1})
			select {
			case err := <-failed:
				if !errors.Is(err, stream.ErrHandlerTimeout) || !strings.Contains(err.Error(), tc.wantReason) {
					t.Fatalf("OnFailure error %v, want ErrHandlerTimeout %q", err, tc.wantReason)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no failure")
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("failure after %v, want about 100ms", el)
			}
			if ok := <-deadlineSeen; ok != (tc.handler > 0) {
				t.Fatalf("outer middleware saw a deadline = %v, want %v", ok, tc.handler > 0)
			}
			if reason := deadLetterError(t, client, cfg, topic); !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("dead-letter reason %q, want %q", reason, tc.wantReason)
			}
			series := fmt.Sprintf(`%s{topic="%s",group="g"}`, "redis_streaming_mq_handler_timeouts_total", topic)
			if v := promValue(t, set, series); v != 1 {
				t.Fatalf("%s = %v, want 1", series, v)
			}
		})
	}
}
