package stream_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestFailuresLoggedAtDefaultLevel: at the default level (Info), a handler panic and a
// dead letter are each one Warn line naming the entry (the panic with where it happened,
// not its stack), PanicError's text is one line while the dead letter keeps the stack, and
// a flood of failures is bounded to 10 records per kind with the rest counted.
func TestFailuresLoggedAtDefaultLevel(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	topic := newTopic(t)
	failed := make(chan error, 64)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(_ context.Context, m *stream.Message[order]) error { panic("boom\nsecond line") },
		OnFailure: func(_ context.Context, _ *stream.Message[order], _ []byte, err error) {
			failed <- err
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	id := send(t, p, topic, order{ID: 1})
	var pe *stream.PanicError
	if err := <-failed; !errors.As(err, &pe) || err.Error() != "stream: handler panicked: boom second line" {
		t.Fatalf("OnFailure error %q, want the one-line PanicError", err)
	}
	if reason := deadLetterError(t, client, cfg, topic); !strings.HasPrefix(reason, "stream: handler panicked: boom second line\ngoroutine ") ||
		!strings.Contains(reason, "failurelog_test.go") {
		t.Errorf("dead-letter reason %q, want the panic line and its stack", reason)
	}
	eventually(t, 5*time.Second, "the dead-letter record", func() bool { return strings.Contains(logs.String(), "stream: entry dead-lettered") })
	out := logs.String()
	panicked := lineWith(out, `msg="stream: handler panicked"`)
	if panicked == "" || !strings.Contains(panicked, "level=WARN") || !strings.Contains(panicked, "id="+id) ||
		!strings.Contains(panicked, `panic="boom second line"`) || !strings.Contains(panicked, "TestFailuresLoggedAtDefaultLevel") ||
		!strings.Contains(panicked, "failurelog_test.go:") {
		t.Errorf("panic record %q, want Warn with the entry, the value and where it panicked", panicked)
	}
	dead := lineWith(out, "stream: entry dead-lettered")
	if !strings.Contains(dead, "level=WARN") || !strings.Contains(dead, "id="+id) || !strings.Contains(dead, `reason="stream: handler panicked: boom second line …"`) {
		t.Errorf("dead-letter record %q, want Warn with the entry and the reason's first line", dead)
	}
	if strings.Contains(out, "goroutine ") {
		t.Errorf("a stack reached the log:\n%s", out)
	}

	// A flood: 30 more failures in well under the 10 s period.
	for i := 0; i < 30; i++ {
		send(t, p, topic, order{ID: 2 + i})
	}
	for i := 0; i < 30; i++ {
		<-failed
	}
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(logs.String(), `msg="stream: entry dead-lettered"`); n != 10 {
		t.Errorf("%d dead-letter records for 31 dead letters, want 10 (the burst)", n)
	}
	if n := strings.Count(logs.String(), `msg="stream: handler panicked"`); n != 10 {
		t.Errorf("%d panic records for 31 panics, want 10 (the burst)", n)
	}
}

// TestCloseOnEmptyTopicSaysNothingFalse: a consumer closed before it holds anything does
// not claim to own pending entries.
func TestCloseOnEmptyTopicSaysNothingFalse(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: newTopic(t), Group: "g",
		Handle: func(context.Context, *stream.Message[order]) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // a few empty reads
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "owns pending") {
		t.Errorf("log claims pending entries on an empty topic:\n%s", logs.String())
	}
}

// lineWith returns the first line of s containing sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
