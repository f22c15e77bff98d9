package stream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// metricValue returns the value of the sample of set whose line starts with prefix (name
// and labels), 0 when there is none.
func metricValue(set *vm.Set, prefix string) float64 {
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return v
		}
	}
	return 0
}

// resultHandler is a handler recording results: status "fail" fails for good; otherwise
// it reports progress, waits for proceed (when not nil), and sets a result naming the order.
func resultHandler(topic string, o *stream.ResultOptions, progressed chan<- string, proceed <-chan struct{}) stream.Handler[order] {
	return stream.Handler[order]{Topic: topic, Group: "g", Results: o,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			if m.Body.Status == "fail" {
				return stream.Permanent(errors.New("card declined"))
			}
			if err := m.Progress(ctx, map[string]int{"step": 1}); err != nil {
				return err
			}
			if progressed != nil {
				progressed <- m.ID
			}
			if proceed != nil {
				<-proceed
			}
			return m.SetResult(map[string]string{"invoice": fmt.Sprintf("inv-%d", m.Body.ID)})
		}}
}

// TestResults: a handler's progress is readable while it runs, its result once it returns,
// and a dead-lettered entry's record says why; WaitResult waits for either, and ends at its
// deadline for an entry never handled. Each write is counted.
func TestResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(testing.TB) rueidis.Client
	}{{"single", redistest.Client}, {"cluster", redistest.ClusterClient}} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client(t)
			cfg := fastConfig()
			topic := newTopic(t)
			progressed, proceed := make(chan string, 1), make(chan struct{})
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, resultHandler(topic, &stream.ResultOptions{}, progressed, proceed)); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c)
			p := newProducer(t, client, cfg)
			ctx := context.Background()

			id := send(t, p, topic, order{ID: 1})
			select {
			case got := <-progressed:
				if got != id {
					t.Fatalf("handling %s, want %s", got, id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the message was not handled")
			}
			r, err := p.Result(ctx, topic, "g", id)
			if err != nil || r.State != stream.ResultActive || string(r.Progress) != `{"step":1}` || r.Done() || r.DeliveryCount != 1 || r.Key == "" {
				t.Fatalf("while handling: %+v, %v", r, err)
			}
			close(proceed)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			r, err = p.WaitResult(wctx, topic, "g", id)
			cancel()
			if err != nil || r.State != stream.ResultCompleted || string(r.Value) != `{"invoice":"inv-1"}` || string(r.Progress) != `{"step":1}` || r.ID != id {
				t.Fatalf("WaitResult: %+v, %v", r, err)
			}
			if time.Since(r.Updated) > time.Minute || r.Updated.After(time.Now().Add(time.Minute)) {
				t.Errorf("Updated %v, want about now", r.Updated)
			}

			failed := send(t, p, topic, order{ID: 2, Status: "fail"})
			wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			r, err = p.WaitResult(wctx, topic, "g", failed)
			cancel()
			if err != nil || r.State != stream.ResultFailed || !strings.Contains(r.Error, "card declined") || r.Value != nil {
				t.Fatalf("WaitResult of a failing message: %+v, %v", r, err)
			}

			if _, err := p.Result(ctx, topic, "g", "1-1"); !errors.Is(err, redstream.ErrNotFound) {
				t.Fatalf("Result of an entry never handled: %v, want ErrNotFound", err)
			}
			if _, err := p.Result(ctx, topic, "other", id); !errors.Is(err, redstream.ErrNotFound) {
				t.Fatalf("Result for another group: %v, want ErrNotFound", err)
			}
			wctx, cancel = context.WithTimeout(ctx, 150*time.Millisecond)
			_, err = p.WaitResult(wctx, topic, "g", "1-1")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitResult of an entry never handled: %v, want the deadline", err)
			}
			for state, want := range map[string]float64{"active": 1, "completed": 1, "failed": 1} {
				if got := metricValue(cfg.Metrics, `redis_streaming_mq_results_total{topic="`+topic+`",group="g",state="`+state+`"}`); got != want {
					t.Errorf("results_total{state=%s} = %v, want %v", state, got, want)
				}
			}
		})
	}
}

// TestResultsChild is the consumer of TestResultsOtherProcess, in a child process.
func TestResultsChild(t *testing.T) {
	topic := os.Getenv("REDSTREAM_RESULTS_TOPIC")
	if topic == "" {
		t.Skip("run by TestResultsOtherProcess")
	}
	client := redistest.Client(t)
	c := newConsumer(t, client, fastConfig())
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Results: &stream.ResultOptions{},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			return m.SetResult(map[string]int{"pid": os.Getpid(), "double": 2 * m.Body.ID})
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	select {}
}

// TestResultsOtherProcess: a producer waits for results that a handler in another process
// writes.
func TestResultsOtherProcess(t *testing.T) {
	addr := redistest.Addr(t)
	client := redistest.Client(t)
	topic := newTopic(t)
	cmd := startChild(t, "TestResultsChild", nil, "REDSTREAM_RESULTS_TOPIC="+topic, "REDSTREAM_REDIS_ADDR="+addr)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	p := newProducer(t, client, fastConfig())
	for i := 1; i <= 5; i++ {
		id := send(t, p, topic, order{ID: i})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r, err := p.WaitResult(ctx, topic, "g", id)
		cancel()
		var v struct{ PID, Double int }
		if err == nil {
			err = json.Unmarshal(r.Value, &v)
		}
		if err != nil || r.State != stream.ResultCompleted || v.PID != cmd.Process.Pid || v.Double != 2*i {
			t.Fatalf("message %d: %+v (%+v), %v; want completed by pid %d", i, r, v, err, cmd.Process.Pid)
		}
	}
}

// TestResultsRetention: a record expires TTL after its last write, and a topic and group
// keep at most MaxRecords of them, the oldest deleted first.
func TestResultsRetention(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	t.Run("ttl", func(t *testing.T) {
		topic := newTopic(t)
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, resultHandler(topic, &stream.ResultOptions{TTL: 400 * time.Millisecond}, nil, nil)); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
		p := newProducer(t, client, cfg)
		id := send(t, p, topic, order{ID: 1})
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := p.WaitResult(wctx, topic, "g", id)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := client.Do(ctx, client.B().Pttl().Key("{"+topic+"}:result:g:"+id).Build()).AsInt64()
		if err != nil || ttl <= 0 || ttl > 400 {
			t.Fatalf("PTTL of the record: %d, %v; want (0, 400] ms", ttl, err)
		}
		eventually(t, 5*time.Second, "the record to expire", func() bool {
			_, err := p.Result(ctx, topic, "g", id)
			return errors.Is(err, redstream.ErrNotFound)
		})
	})
	t.Run("max-records", func(t *testing.T) {
		topic := newTopic(t)
		c := newConsumer(t, client, cfg)
		if err := stream.Register(c, resultHandler(topic, &stream.ResultOptions{MaxRecords: 3}, nil, nil)); err != nil {
			t.Fatal(err)
		}
		startConsumer(t, c)
		p := newProducer(t, client, cfg)
		var ids []string
		for i := 1; i <= 7; i++ {
			id := send(t, p, topic, order{ID: i})
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := p.WaitResult(wctx, topic, "g", id)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		for i, id := range ids {
			_, err := p.Result(ctx, topic, "g", id)
			if kept := i >= len(ids)-3; kept != (err == nil) {
				t.Errorf("record %d of 7: %v; want kept=%t (the newest 3)", i+1, err, kept)
			}
		}
		if n, err := client.Do(ctx, client.B().Zcard().Key("{"+topic+"}:results:g").Build()).AsInt64(); err != nil || n != 3 {
			t.Errorf("the index holds %d (%v), want 3", n, err)
		}
	})
}

// TestResultsStale: a delivery taken over while its handler runs can neither report
// progress nor record its result (both refused and counted); the delivery that took over
// records the outcome.
func TestResultsStale(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	topic := newTopic(t)
	entered, proceed := make(chan int64, 4), make(chan struct{})
	progress := make(chan error, 4)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Results: &stream.ResultOptions{},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			entered <- m.DeliveryCount
			if m.DeliveryCount == 1 {
				<-proceed
			}
			progress <- m.Progress(ctx, m.DeliveryCount)
			return m.SetResult(m.DeliveryCount)
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	id := send(t, p, topic, order{ID: 1})
	if n := <-entered; n != 1 {
		t.Fatalf("first delivery %d", n)
	}
	// Another consumer takes the entry over (its delivery count becomes 2).
	if err := client.Do(ctx, client.B().Xclaim().Key(topic).Group("g").Consumer("thief").MinIdleTime("0").Id(id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-progress; !errors.Is(err, stream.ErrStaleDelivery) {
		t.Fatalf("Progress of the stale delivery: %v, want ErrStaleDelivery", err)
	}
	// The thief never acknowledges: the entry comes back to the consumer after min-idle, as
	// delivery 3, which records its outcome.
	select {
	case n := <-entered:
		if n != 3 {
			t.Fatalf("redelivery %d, want 3", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the entry was not delivered again")
	}
	if err := <-progress; err != nil {
		t.Fatalf("Progress of the current delivery: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	r, err := p.WaitResult(wctx, topic, "g", id)
	cancel()
	if err != nil || r.State != stream.ResultCompleted || string(r.Value) != "3" || r.DeliveryCount != 3 {
		t.Fatalf("the record: %+v, %v; want completed by delivery 3", r, err)
	}
	if got := metricValue(cfg.Metrics, `redis_streaming_mq_stale_refused_total{topic="`+topic+`",group="g",op="result"}`); got != 2 {
		t.Errorf("stale result writes refused: %v, want 2 (the progress and the completion)", got)
	}
}

// TestResultsErrors: bad options, results on a partitioned topic, and the errors of
// Progress, SetResult and Result.
func TestResultsErrors(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	cfg := fastConfig()
	cfg.Partitions = map[string]int{"parts": 4}
	c := newConsumer(t, client, cfg)
	for _, o := range []stream.ResultOptions{{TTL: -1}, {TTL: time.Microsecond}, {MaxBytes: -1}, {MaxBytes: 65 << 20}, {MaxRecords: -1}, {MaxRecords: 10_000_001}} {
		err := stream.Register(c, resultHandler(newTopic(t), &o, nil, nil))
		if !errors.Is(err, redstream.ErrInvalidConfig) {
			t.Errorf("Results %+v: %v, want ErrInvalidConfig", o, err)
		}
	}
	if err := stream.Register(c, resultHandler("parts", &stream.ResultOptions{}, nil, nil)); !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "not partitioned") {
		t.Errorf("Results on a partitioned topic: %v, want ErrInvalidConfig", err)
	}
	p := newProducer(t, client, cfg)
	if _, err := p.Result(ctx, "parts", "g", "1-1"); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Result on a partitioned topic: %v, want ErrInvalidConfig", err)
	}
	if _, err := p.Result(ctx, "x", "", "1-1"); !errors.Is(err, redstream.ErrInvalidConfig) {
		t.Errorf("Result with an empty group: %v, want ErrInvalidConfig", err)
	}
	m := stream.NewMessage(order{ID: 1})
	if err := m.Progress(ctx, 1); err == nil {
		t.Error("Progress of a message no Consumer delivered succeeded")
	}
	if err := m.SetResult(1); err == nil {
		t.Error("SetResult of a message no Consumer delivered succeeded")
	}

	topic, plain := newTopic(t), newTopic(t)
	errs := make(chan [3]error, 2)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Results: &stream.ResultOptions{MaxBytes: 16},
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			errs <- [3]error{m.SetResult(strings.Repeat("x", 20)), m.SetResult(make(chan int)), m.Progress(ctx, strings.Repeat("y", 20))}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Register(c, stream.Handler[order]{Topic: plain, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			errs <- [3]error{m.SetResult(1), m.Progress(ctx, 1), nil}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	id := send(t, p, topic, order{ID: 1})
	got := <-errs
	if got[0] == nil || !strings.Contains(got[0].Error(), "MaxBytes") || got[1] == nil || got[2] == nil || !strings.Contains(got[2].Error(), "MaxBytes") {
		t.Errorf("oversized and unencodable values: %v", got)
	}
	send(t, p, plain, order{ID: 1})
	got = <-errs
	if got[0] == nil || !strings.Contains(got[0].Error(), "Handler.Results") || got[1] == nil {
		t.Errorf("results on a handler without Results: %v", got)
	}

	// A record that is not one the result script writes is an error naming the field.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := p.WaitResult(wctx, topic, "g", id); err != nil {
		t.Fatal(err)
	}
	keys, err := client.Do(ctx, client.B().Keys().Pattern("*"+topic+"*"+id).Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the record's key: %v, %v", keys, err)
	}
	if err := client.Do(ctx, client.B().Hset().Key(keys[0]).FieldValue().FieldValue("result", "{not json").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Result(ctx, topic, "g", id); err == nil || !strings.Contains(err.Error(), `field "result"`) {
		t.Errorf("Result of a malformed record: %v, want an error naming the field", err)
	}
}
