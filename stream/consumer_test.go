package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

func TestConsumeOutcomes(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	topic := newTopic(t)
	p := newProducer(t, client, cfg)
	rec := newRecorder()
	c := newConsumer(t, client, cfg)
	err := stream.Register(c, stream.Handler[order]{
		Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			n := rec.call(m.Body.ID)
			switch m.Body.Status {
			case "fail-always":
				return errors.New("boom")
			case "fail-once":
				if n == 1 {
					return errors.New("transient")
				}
			case "permanent":
				return stream.Permanent(errors.New("bad order"))
			case "panic":
				panic("handler bug")
			}
			rec.ok(m.Body.ID)
			return nil
		},
		Filter:    func(m *stream.Message[order]) bool { return m.Body.Status == "skip" },
		OnFailure: rec.fail,
	})
	if err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, p, topic, order{1, "ok"})
	send(t, p, topic, order{2, "skip"})
	send(t, p, topic, order{3, "fail-once"})
	send(t, p, topic, order{4, "fail-always"})
	send(t, p, topic, order{5, "permanent"})
	send(t, p, topic, order{6, "panic"})
	// A poison entry written by a foreign producer.
	if err := client.Do(ctx, client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("key", "k").FieldValue("tag", "").
		FieldValue("enc", "gzip").FieldValue("body", "not base64!").FieldValue("ts", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}

	eventually(t, 10*time.Second, "4 failures (fail-always, permanent, panic, poison)", func() bool { return rec.numFailures() == 4 })
	eventually(t, 5*time.Second, "nothing pending", func() bool { return pending(t, client, topic, "g") == 0 })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.handled; got[1] != 1 || got[3] != 1 || len(got) != 2 {
		t.Errorf("handled = %v, want orders 1 and 3 once each", got)
	}
	if got := rec.calls[2]; got != 0 {
		t.Errorf("filtered order handled %d times, want 0", got)
	}
	if got := rec.calls[3]; got != 2 {
		t.Errorf("fail-once order: %d calls, want 2", got)
	}
	if got := rec.calls[4]; got != stream.DefaultMaxDeliveries {
		t.Errorf("fail-always order: %d calls, want %d", got, stream.DefaultMaxDeliveries)
	}
	if got := rec.calls[5]; got != 1 {
		t.Errorf("permanent failure: %d calls, want 1", got)
	}
	byID := map[int]failure{}
	var poison *failure
	for i, f := range rec.failures {
		if f.msg == nil {
			poison = &rec.failures[i]
			continue
		}
		byID[f.msg.Body.ID] = f
	}
	if f, ok := byID[4]; !ok || !errors.Is(f.err, stream.ErrMaxRetryExceeded) || !strings.Contains(f.err.Error(), "max retry exceeded") {
		t.Errorf("fail-always OnFailure = %+v, want a max retry exceeded error", f)
	}
	if f, ok := byID[5]; !ok || errors.Is(f.err, stream.ErrMaxRetryExceeded) || !stream.IsPermanent(f.err) {
		t.Errorf("permanent OnFailure = %+v, want the permanent error", f)
	}
	if f, ok := byID[6]; !ok || !strings.Contains(f.err.Error(), "panicked") {
		t.Errorf("panic OnFailure = %+v, want a panic error", f)
	}
	if poison == nil || !errors.Is(poison.err, stream.ErrUndecodable) || poison.body != "not base64!" {
		t.Errorf("poison OnFailure = %+v, want nil message, the raw body and ErrUndecodable", poison)
	}
	dl, err := stream.NewDeadLetters(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := dl.Len(ctx, topic); err != nil || n != 4 {
		t.Errorf("dead letters = %d, %v; want 4", n, err)
	}

	var buf bytes.Buffer
	cfg.Metrics.WritePrometheus(&buf)
	labels := fmt.Sprintf(`{topic=%q,group="g"}`, topic)
	for _, tc := range []struct {
		name string
		want int
	}{
		{"redis_streaming_mq_consumed_total", 2},
		{"redis_streaming_mq_filtered_total", 1},
		{"redis_streaming_mq_poison_total", 1},
		{"redis_streaming_mq_dead_total", 4},
		{"redis_streaming_mq_retried_total", 1 + 2*(stream.DefaultMaxDeliveries-1)}, // fail-once, fail-always, panic
		{"redis_streaming_mq_redelivered_total", 1 + 2*(stream.DefaultMaxDeliveries-1)},
		{"redis_streaming_mq_handler_errors_total", 1 + 2*stream.DefaultMaxDeliveries + 1},
		{"redis_streaming_mq_acked_total", 3 + 4}, // ok, skip, fail-once; 4 dead letters
	} {
		if line := fmt.Sprintf("%s%s %d\n", tc.name, labels, tc.want); !strings.Contains(buf.String(), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	for _, name := range []string{"redis_streaming_mq_handle_latency_ms_seconds" + "_bucket", "redis_streaming_mq_produced_total"} {
		if !strings.Contains(buf.String(), name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", buf.String())
	}
}

func TestDeferredAck(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	cfg.Autoclaim.MinIdle = 60_000 * time.Millisecond // no redelivery during the test
	topic := newTopic(t)
	deferred := make(chan *stream.Message[order], 4)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			m.DeferAck()
			deferred <- m
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "x"})
	m := <-deferred
	// The handler returned, yet the entry stays pending until Ack.
	time.Sleep(200 * time.Millisecond)
	if got := pending(t, client, topic, "g"); got != 1 {
		t.Fatalf("pending after a deferred handler = %d, want 1", got)
	}
	if err := m.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, client, topic, "g"); got != 0 {
		t.Fatalf("pending after Ack = %d, want 0", got)
	}
	if err := m.Ack(context.Background()); err != nil {
		t.Fatalf("second Ack: %v", err)
	}
	var undelivered stream.Message[order]
	if err := undelivered.Ack(context.Background()); err == nil {
		t.Error("Ack of a message never delivered: got nil error")
	}
}

func TestMaxDeliveriesOverride(t *testing.T) {
	for _, tc := range []struct {
		name     string
		global   int
		override int
		want     int
	}{
		{"global", 2, 0, 2},
		{"override above", 2, 4, 4},
		{"override below", 5, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := redistest.Client(t)
			cfg := fastConfig()
			cfg.MaxDeliveries = tc.global
			topic := newTopic(t)
			rec := newRecorder()
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", MaxDeliveries: tc.override,
				Handle: func(ctx context.Context, m *stream.Message[order]) error {
					rec.call(m.Body.ID)
					return errors.New("always")
				}, OnFailure: rec.fail}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c)
			send(t, newProducer(t, client, cfg), topic, order{7, "x"})
			eventually(t, 10*time.Second, "the dead letter", func() bool { return rec.numFailures() == 1 })
			if got := rec.callsOf(7); got != tc.want {
				t.Errorf("deliveries = %d, want %d", got, tc.want)
			}
			var mre *stream.MaxRetryError
			if !errors.As(rec.failures[0].err, &mre) || mre.Deliveries != int64(tc.want) || mre.Max != tc.want {
				t.Errorf("OnFailure error = %v, want a MaxRetryError after %d deliveries", rec.failures[0].err, tc.want)
			}
			if got := rec.failures[0].msg.DeliveryCount; got != int64(tc.want) {
				t.Errorf("DeliveryCount of the last delivery = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNoRetry(t *testing.T) {
	client := redistest.Client(t)
	cfg := fastConfig()
	topic := newTopic(t)
	rec := newRecorder()
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", NoRetry: true,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			rec.call(m.Body.ID)
			return errors.New("nope")
		}, OnFailure: rec.fail}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "x"})
	eventually(t, 5*time.Second, "OnFailure", func() bool { return rec.numFailures() == 1 })
	if got := rec.callsOf(1); got != 1 {
		t.Errorf("calls = %d, want 1", got)
	}
	if got := pending(t, client, topic, "g"); got != 0 {
		t.Errorf("pending = %d, want 0", got)
	}
	if got := xlen(t, client, streamwire.DeadLetterStreamName(topic)); got != 1 {
		t.Errorf("dead letters = %d, want 1", got)
	}
}

func TestEnvIsolation(t *testing.T) {
	client := redistest.Client(t)
	topic := newTopic(t)
	for _, tc := range []struct {
		name, env  string
		isolate    bool
		wantStream string
	}{
		{"off", "dev", false, topic},
		{"on", "dev", true, topic + "_dev"},
		{"on without env", "", true, topic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastConfig()
			cfg.EnvIsolation, cfg.Env = tc.isolate, tc.env
			got, err := streamwire.StreamKey(topic, cfg.EnvIsolation, cfg.Env)
			if err != nil || got != tc.wantStream {
				t.Fatalf("StreamName = %q, %v; want %q", got, err, tc.wantStream)
			}
			before := int64(0)
			if n, err := client.Do(context.Background(), client.B().Xlen().Key(tc.wantStream).Build()).AsInt64(); err == nil {
				before = n
			}
			send(t, newProducer(t, client, cfg), topic, order{1, tc.name})
			if n := xlen(t, client, tc.wantStream); n != before+1 {
				t.Errorf("XLEN %s = %d, want %d", tc.wantStream, n, before+1)
			}
		})
	}
	// Producer and consumer of one env meet; another env does not see the message.
	dev, prod := fastConfig(), fastConfig()
	dev.EnvIsolation, dev.Env = true, "dev2"
	prod.EnvIsolation, prod.Env = true, "prod2"
	got := make(chan string, 2)
	for _, cfg := range []stream.Config{dev, prod} {
		c := newConsumer(t, client, cfg)
		env := cfg.Env
		if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
			Handle: func(ctx context.Context, m *stream.Message[order]) error { got <- env; return nil }}); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
	}
	send(t, newProducer(t, client, dev), topic, order{2, "dev"})
	if env := <-got; env != "dev2" {
		t.Fatalf("message sent under dev2 handled under %s", env)
	}
	select {
	case env := <-got:
		t.Fatalf("message also handled under %s", env)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestRegisterErrors(t *testing.T) {
	client := redistest.Client(t)
	c := newConsumer(t, client, fastConfig())
	ok := func(context.Context, *stream.Message[order]) error { return nil }
	for _, tc := range []struct {
		name string
		h    stream.Handler[order]
	}{
		{"no handle", stream.Handler[order]{Topic: "a", Group: "g"}},
		{"no group", stream.Handler[order]{Topic: "a", Handle: ok}},
		{"no topic", stream.Handler[order]{Group: "g", Handle: ok}},
		{"bad topic", stream.Handler[order]{Topic: "a}b", Group: "g", Handle: ok}},
		{"negative concurrency", stream.Handler[order]{Topic: "a", Group: "g", Handle: ok, Concurrency: -1}},
		{"bad start id", stream.Handler[order]{Topic: "a", Group: "g", Handle: ok, StartID: "5-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := stream.Register(c, tc.h); err == nil {
				t.Error("Register: got nil error")
			}
		})
	}
	h := stream.Handler[order]{Topic: "dup", Group: "g", Handle: ok}
	if err := stream.Register(c, h); err != nil {
		t.Fatal(err)
	}
	if err := stream.Register(c, h); err == nil {
		t.Error("second handler for one topic and group: got nil error")
	}
	startConsumer(t, c)
	if err := stream.Register(c, stream.Handler[order]{Topic: "b", Group: "g", Handle: ok}); err != nil {
		t.Errorf("Register after Start = %v, want nil (started at once)", err)
	}
	if err := stream.Register(c, h); err == nil {
		t.Error("second handler for one topic and group on a running consumer: got nil error")
	}
	if err := c.Start(context.Background()); !errors.Is(err, stream.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
}

func TestStartCloseWithoutHandlers(t *testing.T) {
	client := redistest.Client(t)
	c := newConsumer(t, client, fastConfig())
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); !errors.Is(err, stream.ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestConsumerNamesUnique(t *testing.T) {
	client := redistest.Client(t)
	a, b := newConsumer(t, client, fastConfig()), newConsumer(t, client, fastConfig())
	if a.Stats().Consumer == b.Stats().Consumer || !strings.HasPrefix(a.Stats().Consumer, "consumer-") {
		t.Errorf("names %q and %q: want distinct consumer-... names", a.Stats().Consumer, b.Stats().Consumer)
	}
	cfg := fastConfig()
	cfg.ConsumerName = "fixed"
	if got := newConsumer(t, client, cfg).Stats().Consumer; got != "fixed" {
		t.Errorf("configured name = %q, want fixed", got)
	}
}
