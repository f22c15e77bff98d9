package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// The stream benchmarks compare redstream's stream package with watermill-redisstream and
// asynq on one redis-server:
//
//   - Publish: 16 goroutines write small messages (redstream Producer.Send, watermill
//     Publisher.Publish, asynq Client.Enqueue).
//   - Consume: b.N messages are written first (untimed); the timed part is one consumer
//     handling and acknowledging all of them with a no-op handler (asynq: a server with
//     concurrency 10 processing no-op tasks).
//   - Latency: one producer sends in a loop while one consumer handles; the handler records
//     send-to-handler time; p50 and p99 are reported in µs.
//   - Ceiling: redis-benchmark's pipelined XADD and XREADGROUP on the same server (16
//     clients, pipeline 16): what the server itself can do.
//
// Each reports msgs/s. Run e.g.
//
//	go test -run '^$' -bench 'Stream' -benchtime 100000x

type benchEvent struct {
	OrderID int64  `json:"orderId"`
	Status  string `json:"status"`
	SentNs  int64  `json:"sentNs"`
}

var streamRun atomic.Int64

func init() { streamRun.Store(time.Now().UnixNano() % 1e9) }

func streamTopic(name string) string { return fmt.Sprintf("bench-%d-%s", streamRun.Add(1), name) }

func goRedis(tb testing.TB) *goredis.Client {
	tb.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: redisAddr(tb)})
	tb.Cleanup(func() { c.Close() })
	return c
}

// parallel16 makes RunParallel use 16 goroutines.
func parallel16(b *testing.B) {
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkStreamPublish(b *testing.B) {
	payload, _ := json.Marshal(benchEvent{OrderID: 1, Status: "CREATED"})
	b.Run("redstream", func(b *testing.B) {
		p, err := stream.NewProducer(redisClient(b), stream.Config{})
		if err != nil {
			b.Fatal(err)
		}
		topic := streamTopic("pub")
		ctx := context.Background()
		b.ReportAllocs()
		parallel16(b)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			msg := stream.NewMessage(benchEvent{OrderID: 1, Status: "CREATED"})
			for pb.Next() {
				if _, err := p.Send(ctx, topic, msg); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b, start)
	})
	b.Run("watermill", func(b *testing.B) {
		pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: goRedis(b), Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
		if err != nil {
			b.Fatal(err)
		}
		defer pub.Close()
		topic := streamTopic("pub-wm")
		b.ReportAllocs()
		parallel16(b)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), payload)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b, start)
	})
	b.Run("asynq", func(b *testing.B) {
		client := asynq.NewClientFromRedisClient(goRedis(b))
		queue := streamTopic("q")
		b.ReportAllocs()
		parallel16(b)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := client.Enqueue(asynq.NewTask("bench", payload), asynq.Queue(queue)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b, start)
	})
}

// fillRedstream writes n messages to topic (untimed set-up), 16 at a time.
func fillRedstream(b *testing.B, client rueidis.Client, topic string, n int) {
	b.Helper()
	p, _ := stream.NewProducer(client, stream.Config{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := p.Send(context.Background(), topic, stream.NewMessage(benchEvent{OrderID: int64(i)})); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got, _ := client.Do(context.Background(), client.B().Xlen().Key(topic).Build()).AsInt64(); got != int64(n) {
		b.Fatalf("fixture: XLEN %d, want %d", got, n)
	}
}

func BenchmarkStreamConsume(b *testing.B) {
	for _, readCount := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("redstream/read-count=%d", readCount), func(b *testing.B) {
			client := redisClient(b)
			topic := streamTopic("con")
			fillRedstream(b, client, topic, b.N)
			var handled atomic.Int64
			all := make(chan struct{})
			c, err := stream.NewConsumer(client, stream.Config{ReadCount: readCount, BlockTimeout: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			if err := stream.Register(c, stream.Handler[benchEvent]{Topic: topic, Group: "g",
				Handle: func(ctx context.Context, m *stream.Message[benchEvent]) error {
					if handled.Add(1) == int64(b.N) {
						close(all)
					}
					return nil
				}}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			if err := c.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			<-all
			waitNoPending(b, func() int64 {
				r, _ := client.Do(context.Background(), client.B().Xpending().Key(topic).Group("g").Build()).ToArray()
				n, _ := r[0].AsInt64()
				return n
			})
			reportRate(b, start)
			b.StopTimer()
			if err := c.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("watermill", func(b *testing.B) {
		rdb := goRedis(b)
		topic := streamTopic("con-wm")
		pub, _ := redisstream.NewPublisher(redisstream.PublisherConfig{Client: rdb, Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
		payload, _ := json.Marshal(benchEvent{OrderID: 1})
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < b.N; i += 16 {
					if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), payload)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		sub, err := redisstream.NewSubscriber(redisstream.SubscriberConfig{Client: rdb, Unmarshaller: redisstream.DefaultMarshallerUnmarshaller{},
			ConsumerGroup: "g", Consumer: "c", OldestId: "0"}, watermill.NopLogger{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		msgs, err := sub.Subscribe(ctx, topic)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			m := <-msgs
			m.Ack()
		}
		waitNoPending(b, func() int64 {
			p, _ := rdb.XPending(context.Background(), topic, "g").Result()
			if p == nil {
				return -1
			}
			return p.Count
		})
		reportRate(b, start)
		b.StopTimer()
		cancel()
		_ = sub.Close()
	})
	b.Run("asynq/concurrency=10", func(b *testing.B) {
		rdb := goRedis(b)
		queue := streamTopic("q")
		client := asynq.NewClientFromRedisClient(rdb)
		payload, _ := json.Marshal(benchEvent{OrderID: 1})
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < b.N; i += 16 {
					if _, err := client.Enqueue(asynq.NewTask("bench", payload), asynq.Queue(queue)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		var handled atomic.Int64
		all := make(chan struct{})
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 10, Queues: map[string]int{queue: 1}, LogLevel: asynq.FatalLevel})
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			if handled.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
		})); err != nil {
			b.Fatal(err)
		}
		<-all
		reportRate(b, start)
		b.StopTimer()
		srv.Shutdown()
	})
}

// waitNoPending polls until pending() reports 0 acknowledged-but-unsent entries.
func waitNoPending(b *testing.B, pending func() int64) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for pending() != 0 {
		if time.Now().After(deadline) {
			b.Fatal("entries still pending after a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkStreamLatency reports send-to-handler latency percentiles: one goroutine sends
// b.N messages back to back while one consumer handles them.
func BenchmarkStreamLatency(b *testing.B) {
	run := func(b *testing.B, send func(i int) error, lat *[]time.Duration, mu *sync.Mutex, all chan struct{}) {
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := send(i); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-all:
		case <-time.After(time.Minute):
			b.Fatal("not all messages handled")
		}
		reportRate(b, start)
		b.StopTimer()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(*lat)
		l := *lat
		b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("redstream", func(b *testing.B) {
		client := redisClient(b)
		topic := streamTopic("lat")
		var mu sync.Mutex
		lat := make([]time.Duration, 0, b.N)
		all := make(chan struct{})
		c, _ := stream.NewConsumer(client, stream.Config{ReadCount: 100, BlockTimeout: 1000 * time.Millisecond})
		_ = stream.Register(c, stream.Handler[benchEvent]{Topic: topic, Group: "g",
			Handle: func(ctx context.Context, m *stream.Message[benchEvent]) error {
				d := time.Duration(time.Now().UnixNano() - m.Body.SentNs)
				mu.Lock()
				lat = append(lat, d)
				if len(lat) == b.N {
					close(all)
				}
				mu.Unlock()
				return nil
			}})
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		p, _ := stream.NewProducer(client, stream.Config{})
		run(b, func(i int) error {
			_, err := p.Send(context.Background(), topic, stream.NewMessage(benchEvent{OrderID: int64(i), SentNs: time.Now().UnixNano()}))
			return err
		}, &lat, &mu, all)
	})
	b.Run("watermill", func(b *testing.B) {
		rdb := goRedis(b)
		topic := streamTopic("lat-wm")
		var mu sync.Mutex
		lat := make([]time.Duration, 0, b.N)
		all := make(chan struct{})
		sub, _ := redisstream.NewSubscriber(redisstream.SubscriberConfig{Client: rdb, Unmarshaller: redisstream.DefaultMarshallerUnmarshaller{},
			ConsumerGroup: "g", Consumer: "c", OldestId: "0"}, watermill.NopLogger{})
		ctx, cancel := context.WithCancel(context.Background())
		defer func() { cancel(); _ = sub.Close() }()
		msgs, err := sub.Subscribe(ctx, topic)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for m := range msgs {
				var e benchEvent
				_ = json.Unmarshal(m.Payload, &e)
				d := time.Duration(time.Now().UnixNano() - e.SentNs)
				m.Ack()
				mu.Lock()
				lat = append(lat, d)
				if len(lat) == b.N {
					close(all)
				}
				mu.Unlock()
			}
		}()
		pub, _ := redisstream.NewPublisher(redisstream.PublisherConfig{Client: rdb, Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
		run(b, func(i int) error {
			payload, _ := json.Marshal(benchEvent{OrderID: int64(i), SentNs: time.Now().UnixNano()})
			return pub.Publish(topic, message.NewMessage(watermill.NewUUID(), payload))
		}, &lat, &mu, all)
	})
}

// BenchmarkStreamCeiling runs redis-benchmark (16 clients, pipeline 16) against the same
// server: raw XADD, and XREADGROUP COUNT 1 NOACK over a pre-filled stream. ns/op is the
// server's cost per command.
func BenchmarkStreamCeiling(b *testing.B) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Skip("redis-benchmark not in PATH")
	}
	addr := redisAddr(b)
	host, port, _ := strings.Cut(addr, ":")
	bench := func(b *testing.B, n int, args ...string) {
		b.Helper()
		base := []string{"-h", host, "-p", port, "-c", "16", "-P", "16", "-n", fmt.Sprint(n), "-q"}
		out, err := exec.Command("redis-benchmark", append(base, args...)...).CombinedOutput()
		if err != nil {
			b.Fatalf("redis-benchmark: %v: %s", err, out)
		}
	}
	b.Run("XADD", func(b *testing.B) {
		key := streamTopic("ceil-xadd")
		start := time.Now()
		bench(b, b.N, "XADD", key, "*", "key", "1", "tag", "", "enc", "plain", "body", `{"orderId":1,"status":"CREATED"}`, "ts", "1")
		reportRate(b, start)
	})
	b.Run("XREADGROUP", func(b *testing.B) {
		key := streamTopic("ceil-read")
		b.StopTimer()
		bench(b, b.N+16*16, "XADD", key, "*", "key", "1", "tag", "", "enc", "plain", "body", `{"orderId":1,"status":"CREATED"}`, "ts", "1")
		client := redisClient(b)
		if err := client.Do(context.Background(), client.B().XgroupCreate().Key(key).Group("g").Id("0").Build()).Error(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		bench(b, b.N, "XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "NOACK", "STREAMS", key, ">")
		reportRate(b, start)
	})
}

// The new paths (send with headers, delayed send) are measured interleaved: the libraries
// take turns, 500 messages each per round (16 goroutines), the order rotating every round,
// so that machine drift (other load, Redis growing) falls on all of them alike. Each
// reports its own msgs/s and redstream's ratio to it (x-vs-<library>: >1 means redstream
// is faster). Run e.g.
//
//	go test -run '^$' -bench 'StreamSendHeaders|StreamDelayedSend' -benchtime 40000x

// benchLib is one library's send of message i, or (chunk) of messages start..start+n-1 in
// one call, for a library driven in another process (BullMQ in Node.js), which sends them
// 16 at a time as the Go side's 16 goroutines do.
type benchLib struct {
	name  string
	send  func(i int) error
	chunk func(start, n int) error
}

// interleaved runs b.N sends of every library, in rotating rounds, and reports the rates and
// ratios.
func interleaved(b *testing.B, libs []benchLib) {
	b.Helper()
	const chunk = 500
	dur := make([]time.Duration, len(libs))
	sent := make([]int, len(libs))
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		c := min(chunk, b.N-done)
		for k := range libs {
			li := (k + round) % len(libs)
			start := time.Now()
			if libs[li].chunk != nil {
				if err := libs[li].chunk(done, c); err != nil {
					b.Fatal(err)
				}
				dur[li] += time.Since(start)
				sent[li] += c
				continue
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= c {
							return
						}
						if err := libs[li].send(done + i); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			dur[li] += time.Since(start)
			sent[li] += c
		}
		done += c
	}
	b.StopTimer()
	rates := make([]float64, len(libs))
	for i, l := range libs {
		rates[i] = float64(sent[i]) / dur[i].Seconds()
		b.ReportMetric(rates[i], l.name+"-msgs/s")
	}
	for i := 1; i < len(libs); i++ {
		b.ReportMetric(rates[0]/rates[i], "x-vs-"+libs[i].name)
	}
}

// BenchmarkStreamSendHeaders: a send carrying three headers (trace context, tenant,
// request id): redstream Message.Headers (entry fields h:<name>), watermill message
// Metadata, asynq task headers (NewTaskWithHeaders).
func BenchmarkStreamSendHeaders(b *testing.B) {
	ctx := context.Background()
	headers := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme", "x-request-id": "req-12345"}
	payload, _ := json.Marshal(benchEvent{OrderID: 1, Status: "CREATED"})
	p, err := stream.NewProducer(redisClient(b), stream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	topic := streamTopic("hdr")
	msg := stream.Message[benchEvent]{Body: benchEvent{OrderID: 1, Status: "CREATED"}, Headers: headers}
	pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: goRedis(b), Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	wmTopic := streamTopic("hdr-wm")
	aq := asynq.NewClientFromRedisClient(goRedis(b))
	queue := streamTopic("hdr-q")
	interleaved(b, []benchLib{
		{name: "redstream", send: func(int) error { _, err := p.Send(ctx, topic, msg); return err }},
		{name: "watermill", send: func(int) error {
			m := message.NewMessage(watermill.NewUUID(), payload)
			for k, v := range headers {
				m.Metadata.Set(k, v)
			}
			return pub.Publish(wmTopic, m)
		}},
		{name: "asynq", send: func(int) error {
			_, err := aq.Enqueue(asynq.NewTaskWithHeaders("bench", payload, headers), asynq.Queue(queue))
			return err
		}},
	})
	// The fixture really holds the headers.
	cl := redisClient(b)
	e, err := cl.Do(ctx, cl.B().Xrange().Key(topic).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil || len(e) != 1 || e[0].FieldValues["h:tenant"] != "acme" {
		b.Fatalf("redstream entry %v, %v: want the h:tenant header", e, err)
	}
}

// BenchmarkStreamDelayedSend: scheduling a message an hour ahead: redstream
// WithDelay (delay_add.lua: ZADD + HSET), asynq ProcessIn (its scheduled set). watermill
// has no delayed delivery on Redis Streams (its delay component only sets metadata, which
// the redisstream subscriber ignores), so it is not in this comparison.
func BenchmarkStreamDelayedSend(b *testing.B) {
	ctx := context.Background()
	payload, _ := json.Marshal(benchEvent{OrderID: 1, Status: "CREATED"})
	cl := redisClient(b)
	p, err := stream.NewProducer(cl, stream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	topic := streamTopic("delay")
	msg := stream.NewMessage(benchEvent{OrderID: 1, Status: "CREATED"})
	aq := asynq.NewClientFromRedisClient(goRedis(b))
	queue := streamTopic("delay-q")
	interleaved(b, []benchLib{
		{name: "redstream", send: func(int) error { _, err := p.Send(ctx, topic, msg, stream.WithDelay(time.Hour)); return err }},
		{name: "asynq", send: func(int) error {
			_, err := aq.Enqueue(asynq.NewTask("bench", payload), asynq.Queue(queue), asynq.ProcessIn(time.Hour))
			return err
		}},
	})
	if n, err := p.Scheduled(ctx, topic); err != nil || n != int64(b.N) {
		b.Fatalf("fixture: %d scheduled, %v; want %d", n, err, b.N)
	}
	sched, msgs := streamwire.DelayedKeys(topic)
	_ = cl.Do(ctx, cl.B().Del().Key(sched, msgs).Build()).Error()
}

// BenchmarkStreamDelayedDelivery measures how late delayed messages arrive: each
// iteration schedules 200 messages due 500 ms later (each carrying its due time) and waits
// until a running consumer has handled all of them; it reports the median and the largest
// lateness (handled - due) in ms. redstream: one consumer with the default poll interval
// (100 ms); asynq: a server with its default DelayedTaskCheckInterval (5 s) and one with
// 100 ms. Run with -benchtime 3x.
func BenchmarkStreamDelayedDelivery(b *testing.B) {
	const n = 200
	const delay = 500 * time.Millisecond
	type result struct{ p50, max time.Duration }
	summarize := func(late []time.Duration) result {
		slices.Sort(late)
		return result{late[len(late)/2], late[len(late)-1]}
	}
	report := func(b *testing.B, all []time.Duration) {
		r := summarize(all)
		b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-late-ms")
		b.ReportMetric(float64(r.max.Microseconds())/1000, "max-late-ms")
	}
	b.Run("redstream", func(b *testing.B) {
		cl := redisClient(b)
		topic := streamTopic("delay-e2e")
		var mu sync.Mutex
		var late []time.Duration
		got := make(chan struct{}, n)
		c, _ := stream.NewConsumer(cl, stream.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err := stream.Register(c, stream.Handler[benchEvent]{Topic: topic, Group: "g", Concurrency: 8,
			Handle: func(_ context.Context, m *stream.Message[benchEvent]) error {
				mu.Lock()
				late = append(late, time.Since(time.Unix(0, m.Body.SentNs)))
				mu.Unlock()
				got <- struct{}{}
				return nil
			}}); err != nil {
			b.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		p, _ := stream.NewProducer(cl, stream.Config{})
		b.ResetTimer()
		for range b.N {
			for i := range n {
				due := time.Now().Add(delay)
				if _, err := p.Send(context.Background(), topic, stream.NewMessage(benchEvent{OrderID: int64(i), SentNs: due.UnixNano()}), stream.WithDeliverAt(due)); err != nil {
					b.Fatal(err)
				}
			}
			for range n {
				<-got
			}
		}
		b.StopTimer()
		report(b, late)
	})
	for _, check := range []time.Duration{0, 100 * time.Millisecond} {
		name := "asynq/check=default-5s"
		if check > 0 {
			name = "asynq/check=100ms"
		}
		b.Run(name, func(b *testing.B) {
			rdb := goRedis(b)
			queue := streamTopic("delay-q")
			client := asynq.NewClientFromRedisClient(rdb)
			var mu sync.Mutex
			var late []time.Duration
			got := make(chan struct{}, n)
			srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 8, Queues: map[string]int{queue: 1},
				LogLevel: asynq.FatalLevel, DelayedTaskCheckInterval: check})
			if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
				var e benchEvent
				_ = json.Unmarshal(t.Payload(), &e)
				mu.Lock()
				late = append(late, time.Since(time.Unix(0, e.SentNs)))
				mu.Unlock()
				got <- struct{}{}
				return nil
			})); err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown()
			b.ResetTimer()
			for range b.N {
				for i := range n {
					due := time.Now().Add(delay)
					payload, _ := json.Marshal(benchEvent{OrderID: int64(i), SentNs: due.UnixNano()})
					if _, err := client.Enqueue(asynq.NewTask("bench", payload), asynq.Queue(queue), asynq.ProcessAt(due)); err != nil {
						b.Fatal(err)
					}
				}
				for range n {
					<-got
				}
			}
			b.StopTimer()
			report(b, late)
		})
	}
}

// BenchmarkStreamUniqueSend: a send deduplicated by an id: redstream WithUnique (throttle
// mode, xadd_unique.lua: one script), asynq Unique (a lock key on the task's type and
// payload, taken in its enqueue script).
// "new": every send has a new id and is written; "duplicate": every send repeats one id
// and is refused.
func BenchmarkStreamUniqueSend(b *testing.B) {
	ctx := context.Background()
	p, err := stream.NewProducer(redisClient(b), stream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	aq := asynq.NewClientFromRedisClient(goRedis(b))
	u := stream.Unique{Throttle: true, TTL: time.Hour}
	for _, dup := range []bool{false, true} {
		name := "new"
		if dup {
			name = "duplicate"
		}
		b.Run(name, func(b *testing.B) {
			topic, queue := streamTopic("uniq"), streamTopic("uniq-q")
			want := func(n int) int64 { // messages written by n sends
				if dup {
					return 1
				}
				return int64(n)
			}
			id := func(i int) string {
				if dup {
					return "job-0"
				}
				return "job-" + strconv.Itoa(i)
			}
			if dup { // the first send of the one id
				if _, err := p.Send(ctx, topic, stream.NewMessage(benchEvent{OrderID: 0}), stream.WithUnique(id(0), u)); err != nil {
					b.Fatal(err)
				}
				if _, err := aq.Enqueue(asynq.NewTask("bench", []byte(id(0))), asynq.Queue(queue), asynq.Unique(time.Hour)); err != nil {
					b.Fatal(err)
				}
			}
			bq := startBullMQ(b, redisAddr(b))
			bqQueue := streamTopic("uniq-bq")
			libs := []benchLib{
				{name: "redstream", send: func(i int) error {
					_, err := p.Send(ctx, topic, stream.NewMessage(benchEvent{OrderID: int64(i)}), stream.WithUnique(id(i+1), u))
					if dup && errors.Is(err, stream.ErrDuplicate) {
						return nil
					}
					return err
				}},
				{name: "asynq", send: func(i int) error { // Unique keys on the type and payload: one payload per id
					_, err := aq.Enqueue(asynq.NewTask("bench", []byte(id(i+1))), asynq.Queue(queue), asynq.Unique(time.Hour))
					if dup && errors.Is(err, asynq.ErrDuplicateTask) {
						return nil
					}
					return err
				}},
			}
			if bq != nil {
				if dup {
					if _, err := bq.do(map[string]any{"op": "add-unique", "queue": bqQueue, "start": 0, "n": 1, "dup": true}); err != nil {
						b.Fatal(err)
					}
				}
				libs = append(libs, bq.lib("add-unique", bqQueue, dup))
			}
			interleaved(b, libs)
			if bq != nil {
				if n, err := bq.count(bqQueue); err != nil || int64(n) != want(b.N) {
					b.Fatalf("bullmq fixture: %d jobs, %v; want %d", n, err, want(b.N))
				}
			}
			if n := xlenOf(b, topic); n != want(b.N) {
				b.Fatalf("fixture: %d entries, want %d", n, want(b.N))
			}
		})
	}
}

// xlenOf returns the length of stream key.
func xlenOf(b *testing.B, key string) int64 {
	cl := redisClient(b)
	n, err := cl.Do(context.Background(), cl.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkStreamPrioritySend: sends at three priority levels in turn (redstream's
// WithPriority on a topic of 3 levels; asynq's priorities are weighted queues, so a task goes
// to the queue of its level; BullMQ's per-job priority option), interleaved, 16 goroutines.
//
//	(cd bullmq && npm ci) && go test -run '^$' -bench StreamPrioritySend -benchtime 20000x
func BenchmarkStreamPrioritySend(b *testing.B) {
	ctx := context.Background()
	topic := streamTopic("prio")
	cfg := stream.Config{Priorities: map[string]int{topic: 3}}
	p, err := stream.NewProducer(redisClient(b), cfg)
	if err != nil {
		b.Fatal(err)
	}
	aq := asynq.NewClientFromRedisClient(goRedis(b))
	queues := []string{streamTopic("prio-low"), streamTopic("prio-default"), streamTopic("prio-critical")}
	bq := startBullMQ(b, redisAddr(b))
	bqQueue := streamTopic("prio-bq")
	libs := []benchLib{
		{name: "redstream", send: func(i int) error {
			_, err := p.Send(ctx, topic, stream.NewMessage(benchEvent{OrderID: int64(i)}), stream.WithPriority(i%3))
			return err
		}},
		{name: "asynq", send: func(i int) error {
			_, err := aq.Enqueue(asynq.NewTask("bench", []byte(strconv.Itoa(i))), asynq.Queue(queues[i%3]))
			return err
		}},
	}
	if bq != nil {
		libs = append(libs, bq.lib("add-priority", bqQueue, false))
	}
	interleaved(b, libs)
	var n int64
	for level := range 3 {
		key := topic
		if level > 0 {
			key = "{" + topic + "}:prio:" + strconv.Itoa(level)
		}
		n += xlenOf(b, key)
	}
	if n != int64(b.N) {
		b.Fatalf("fixture: %d entries over the levels, want %d", n, b.N)
	}
	if bq != nil {
		if c, err := bq.count(bqQueue); err != nil || c != b.N {
			b.Fatalf("bullmq fixture: %d jobs, %v; want %d", c, err, b.N)
		}
	}
}
