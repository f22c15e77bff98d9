package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/stream"
)

// BenchmarkQueueScenarios runs BullMQ's own benchmark scenarios for every queue on one
// redis-server, in interleaved rounds (5; the order rotates every round), each contender
// taking b.N jobs per round:
//
//   - add-single: one producer adds jobs one at a time, each awaited before the next
//     (redstream Producer.Send, asynq Client.Enqueue, watermill Publisher.Publish, BullMQ
//     Queue.add);
//   - add-delayed: add-single with every job due an hour later (redstream WithDelay, asynq
//     ProcessIn, BullMQ's delay option; watermill has no delayed delivery on Redis Streams
//     and is left out), against the floor of a ZADD and an HSET pipelined (the bare
//     commands of a scheduled job: its due time and its body);
//   - add-bulk-50: jobs added 50 per call, one call at a time (redstream SendBatch,
//     watermill Publish of 50 messages, BullMQ Queue.addBulk; asynq has no bulk add and is
//     left out);
//   - consume-c1 and consume-c100: b.N jobs written first (untimed), then one worker of 1 or
//     100 concurrent no-op jobs runs until all are done and acknowledged (redstream Handler
//     Concurrency, ReadCount 100 with 100 slots; asynq Config.Concurrency; BullMQ Worker
//     concurrency; watermill's subscriber hands out one message at a time and is in
//     consume-c1 only).
//
// The floor is the same work as bare commands through rueidis, with no queue around them:
// XADD awaited one at a time, 50 XADDs pipelined per call, and XREADGROUP COUNT 100 with
// the XACK of each batch (the floor of both consume scenarios: a no-op handler adds
// nothing to it). Every figure is reported with the server's CPU per job (INFO cpu, user
// + system, over the timed part), and redstream's ratio to each peer and to the floor.
// BullMQ runs in Node.js through bullmq/peer.mjs (`cd bullmq && npm ci` first; without it
// BullMQ is left out, and said so). Run it with
//
//	(cd bullmq && npm ci) && go test -run '^$' -bench QueueScenarios -benchtime 5000x
func BenchmarkQueueScenarios(b *testing.B) {
	client := redisClient(b)
	bq := startBullMQ(b, redisAddr(b))
	for _, sc := range []struct {
		name string
		cs   []queueContender
	}{
		{"add-single", addSingleContenders(b, client, bq, false)},
		{"add-delayed", addSingleContenders(b, client, bq, true)},
		{"add-bulk-50", addBulkContenders(b, client, bq)},
		{"consume-c1", consumeContenders(b, client, bq, 1)},
		{"consume-c100", consumeContenders(b, client, bq, 100)},
	} {
		b.Run(sc.name, func(b *testing.B) { runQueueRounds(b, client, sc.cs) })
	}
}

// queueContender is one queue in a scenario: run does n jobs and returns the wall time of
// the timed part, and the server's CPU time over it.
type queueContender struct {
	name string
	run  func(n int) (wall, cpu time.Duration)
}

// serverTimed runs f and returns its wall time and the server's CPU time over it.
func serverTimed(b *testing.B, admin rueidis.Client, f func()) (wall, cpu time.Duration) {
	b.Helper()
	_, cpu0 := serverStats(b, admin)
	start := time.Now()
	f()
	wall = time.Since(start)
	_, cpu1 := serverStats(b, admin)
	return wall, cpu1 - cpu0
}

// runQueueRounds runs cs in 5 rotating rounds of b.N jobs each and reports each contender's
// median jobs/s (with the slowest and fastest round in the log) and server µs per job, and
// redstream's median ratio to every other contender, round by round, with its spread.
func runQueueRounds(b *testing.B, admin rueidis.Client, cs []queueContender) {
	b.Helper()
	const nRounds = 5
	rates := make([][]float64, len(cs))
	cpus := make([][]float64, len(cs))
	b.ResetTimer()
	for r := range nRounds {
		for k := range cs {
			i := (r + k) % len(cs)
			wall, cpu := cs[i].run(b.N)
			rates[i] = append(rates[i], float64(b.N)/wall.Seconds())
			cpus[i] = append(cpus[i], float64(cpu.Microseconds())/float64(b.N))
		}
	}
	b.StopTimer()
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%s: %d jobs per round, %d rounds\n", strings.TrimPrefix(b.Name(), "Benchmark"), b.N, nRounds)
	for i, c := range cs {
		m, lo, hi := median(rates[i])
		cpu, _, _ := median(cpus[i])
		b.ReportMetric(m, c.name+"-jobs/s")
		b.ReportMetric(cpu, c.name+"-server-µs/job")
		fmt.Fprintf(&sb, "%-10s median %7.0f jobs/s (rounds %.0f–%.0f), server CPU %.1f µs/job\n", c.name, m, lo, hi, cpu)
	}
	for i := 1; i < len(cs); i++ {
		ratios := make([]float64, nRounds)
		for r := range nRounds {
			ratios[r] = rates[0][r] / rates[i][r]
		}
		m, lo, hi := median(ratios)
		b.ReportMetric(m, cs[0].name+"/"+cs[i].name)
		fmt.Fprintf(&sb, "%s/%s: %.2fx (rounds %.2f–%.2f)\n", cs[0].name, cs[i].name, m, lo, hi)
	}
	fmt.Print(sb.String()) // b.Log would keep only part of it
}

// benchPayload is the job every contender adds, as JSON.
var benchPayload, _ = json.Marshal(benchEvent{OrderID: 1, Status: "CREATED"})

// addSingleContenders are add-single's contenders, or add-delayed's when delayed.
func addSingleContenders(b *testing.B, client rueidis.Client, bq *bullmqPeer, delayed bool) []queueContender {
	ctx := context.Background()
	p, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	rdb := goRedis(b)
	aq := asynq.NewClientFromRedisClient(rdb)
	pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: rdb, Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	each := func(n int, one func() error) func() {
		return func() {
			for range n {
				if err := one(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if delayed {
		return addDelayedContenders(b, client, bq, p, aq, each)
	}
	cs := []queueContender{
		{"redstream", func(n int) (time.Duration, time.Duration) {
			topic, msg := streamTopic("add1"), stream.NewMessage(benchEvent{OrderID: 1, Status: "CREATED"})
			return serverTimed(b, client, each(n, func() error { _, err := p.Send(ctx, topic, msg); return err }))
		}},
		{"floor", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("add1-raw")
			cmd := func() rueidis.Completed {
				return client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("body", string(benchPayload)).Build()
			}
			return serverTimed(b, client, each(n, func() error { return client.Do(ctx, cmd()).Error() }))
		}},
		{"asynq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("add1-aq")
			return serverTimed(b, client, each(n, func() error {
				_, err := aq.Enqueue(asynq.NewTask("bench", benchPayload), asynq.Queue(queue))
				return err
			}))
		}},
		{"watermill", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("add1-wm")
			return serverTimed(b, client, each(n, func() error {
				return pub.Publish(topic, message.NewMessage(watermill.NewUUID(), benchPayload))
			}))
		}},
	}
	if bq != nil {
		cs = append(cs, queueContender{"bullmq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("add1-bq")
			return serverTimed(b, client, func() {
				if _, err := bq.do(map[string]any{"op": "add", "queue": queue, "start": 0, "n": n, "inflight": 1}); err != nil {
					b.Fatal(err)
				}
			})
		}})
	}
	return cs
}

// addDelayedContenders are add-delayed's contenders: add-single's, every job due an hour later.
func addDelayedContenders(b *testing.B, client rueidis.Client, bq *bullmqPeer, p *stream.Producer, aq *asynq.Client,
	each func(n int, one func() error) func()) []queueContender {
	ctx := context.Background()
	cs := []queueContender{
		{"redstream", func(n int) (time.Duration, time.Duration) {
			topic, msg := streamTopic("addd"), stream.NewMessage(benchEvent{OrderID: 1, Status: "CREATED"})
			return serverTimed(b, client, each(n, func() error { _, err := p.Send(ctx, topic, msg, stream.WithDelay(time.Hour)); return err }))
		}},
		{"floor", func(n int) (time.Duration, time.Duration) {
			zset, hash := streamTopic("addd-raw")+":due", streamTopic("addd-raw")+":bodies"
			i := 0
			return serverTimed(b, client, each(n, func() error {
				i++
				id := strconv.Itoa(i)
				due := float64(time.Now().Add(time.Hour).UnixMilli())
				for _, r := range client.DoMulti(ctx,
					client.B().Zadd().Key(zset).ScoreMember().ScoreMember(due, id).Build(),
					client.B().Hset().Key(hash).FieldValue().FieldValue(id, string(benchPayload)).Build()) {
					if err := r.Error(); err != nil {
						return err
					}
				}
				return nil
			}))
		}},
		{"asynq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("addd-aq")
			return serverTimed(b, client, each(n, func() error {
				_, err := aq.Enqueue(asynq.NewTask("bench", benchPayload), asynq.Queue(queue), asynq.ProcessIn(time.Hour))
				return err
			}))
		}},
	}
	if bq != nil {
		cs = append(cs, queueContender{"bullmq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("addd-bq")
			return serverTimed(b, client, func() {
				if _, err := bq.do(map[string]any{"op": "add-delayed", "queue": queue, "start": 0, "n": n, "inflight": 1}); err != nil {
					b.Fatal(err)
				}
			})
		}})
	}
	return cs
}

func addBulkContenders(b *testing.B, client rueidis.Client, bq *bullmqPeer) []queueContender {
	const bulk = 50
	ctx := context.Background()
	p, err := stream.NewProducer(client, stream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: goRedis(b), Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	chunks := func(n int, call func(m int) error) func() {
		return func() {
			for i := 0; i < n; i += bulk {
				if err := call(min(bulk, n-i)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	msgs := make([]stream.Sendable, bulk)
	for i := range msgs {
		m := stream.NewMessage(benchEvent{OrderID: int64(i), Status: "CREATED"})
		msgs[i] = &m
	}
	cs := []queueContender{
		{"redstream", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("bulk")
			return serverTimed(b, client, chunks(n, func(m int) error {
				res, err := p.SendBatch(ctx, topic, msgs[:m])
				if err != nil {
					return err
				}
				for _, r := range res {
					if r.Err != nil {
						return r.Err
					}
				}
				return nil
			}))
		}},
		{"floor", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("bulk-raw")
			cmds := make(rueidis.Commands, bulk)
			return serverTimed(b, client, chunks(n, func(m int) error {
				for i := range m {
					cmds[i] = client.B().Xadd().Key(topic).Id("*").FieldValue().FieldValue("body", string(benchPayload)).Build()
				}
				for _, r := range client.DoMulti(ctx, cmds[:m]...) {
					if err := r.Error(); err != nil {
						return err
					}
				}
				return nil
			}))
		}},
		{"watermill", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("bulk-wm")
			return serverTimed(b, client, chunks(n, func(m int) error {
				ms := make([]*message.Message, m)
				for i := range ms {
					ms[i] = message.NewMessage(watermill.NewUUID(), benchPayload)
				}
				return pub.Publish(topic, ms...)
			}))
		}},
	}
	if bq != nil {
		cs = append(cs, queueContender{"bullmq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("bulk-bq")
			return serverTimed(b, client, func() {
				if _, err := bq.do(map[string]any{"op": "add-bulk", "queue": queue, "start": 0, "n": n, "bulk": bulk}); err != nil {
					b.Fatal(err)
				}
			})
		}})
	}
	return cs
}

// consumeContenders returns the queues consuming with workers of c concurrent no-op jobs.
func consumeContenders(b *testing.B, client rueidis.Client, bq *bullmqPeer, c int) []queueContender {
	ctx := context.Background()
	cs := []queueContender{
		{"redstream", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("con")
			fillRedstream(b, client, topic, n)
			var handled atomic.Int64
			all := make(chan struct{})
			cfg := stream.Config{BlockTimeout: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
			if c > 1 {
				cfg.ReadCount = c
			}
			con, err := stream.NewConsumer(client, cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := stream.Register(con, stream.Handler[benchEvent]{Topic: topic, Group: "g", Concurrency: c,
				Handle: func(context.Context, *stream.Message[benchEvent]) error {
					if handled.Add(1) == int64(n) {
						close(all)
					}
					return nil
				}}); err != nil {
				b.Fatal(err)
			}
			wall, cpu := serverTimed(b, client, func() {
				if err := con.Start(ctx); err != nil {
					b.Fatal(err)
				}
				<-all
				waitNoPending(b, func() int64 { return xpending(client, topic) })
			})
			if err := con.Close(ctx); err != nil {
				b.Fatal(err)
			}
			return wall, cpu
		}},
		{"floor", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("con-raw")
			fillRedstream(b, client, topic, n)
			if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Build()).Error(); err != nil {
				b.Fatal(err)
			}
			return serverTimed(b, client, func() {
				for done := 0; done < n; {
					r, err := client.Do(ctx, client.B().Xreadgroup().Group("g", "c").Count(100).Streams().Key(topic).Id(">").Build()).AsXRead()
					if err != nil {
						b.Fatal(err)
					}
					entries := r[topic]
					ids := make([]string, len(entries))
					for i, e := range entries {
						ids[i] = e.ID
					}
					if err := client.Do(ctx, client.B().Xack().Key(topic).Group("g").Id(ids...).Build()).Error(); err != nil {
						b.Fatal(err)
					}
					done += len(entries)
				}
			})
		}},
		{"asynq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("con-aq")
			ardb := goRedis(b) // a server's Shutdown closes its client
			aq := asynq.NewClientFromRedisClient(ardb)
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < n; i += 16 {
						if _, err := aq.Enqueue(asynq.NewTask("bench", benchPayload), asynq.Queue(queue)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			var handled atomic.Int64
			all := make(chan struct{})
			srv := asynq.NewServerFromRedisClient(ardb, asynq.Config{Concurrency: c, Queues: map[string]int{queue: 1}, LogLevel: asynq.FatalLevel})
			wall, cpu := serverTimed(b, client, func() {
				if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
					if handled.Add(1) == int64(n) {
						close(all)
					}
					return nil
				})); err != nil {
					b.Fatal(err)
				}
				<-all
			})
			srv.Shutdown()
			return wall, cpu
		}},
	}
	if c == 1 {
		cs = append(cs, queueContender{"watermill", func(n int) (time.Duration, time.Duration) {
			topic := streamTopic("con-wm")
			rdb := goRedis(b) // the publisher's and the subscriber's Close close it
			pub, _ := redisstream.NewPublisher(redisstream.PublisherConfig{Client: rdb, Marshaller: redisstream.DefaultMarshallerUnmarshaller{}}, watermill.NopLogger{})
			defer pub.Close()
			for i := 0; i < n; i += 50 {
				ms := make([]*message.Message, min(50, n-i))
				for k := range ms {
					ms[k] = message.NewMessage(watermill.NewUUID(), benchPayload)
				}
				if err := pub.Publish(topic, ms...); err != nil {
					b.Fatal(err)
				}
			}
			sub, err := redisstream.NewSubscriber(redisstream.SubscriberConfig{Client: rdb, Unmarshaller: redisstream.DefaultMarshallerUnmarshaller{},
				ConsumerGroup: "g", Consumer: "c", OldestId: "0"}, watermill.NopLogger{})
			if err != nil {
				b.Fatal(err)
			}
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wall, cpu := serverTimed(b, client, func() {
				ch, err := sub.Subscribe(sctx, topic)
				if err != nil {
					b.Fatal(err)
				}
				for range n {
					(<-ch).Ack()
				}
				waitNoPending(b, func() int64 { return xpending(client, topic) })
			})
			cancel()
			_ = sub.Close()
			return wall, cpu
		}})
	}
	if bq != nil {
		cs = append(cs, queueContender{"bullmq", func(n int) (time.Duration, time.Duration) {
			queue := streamTopic("con-bq")
			if _, err := bq.do(map[string]any{"op": "add-bulk", "queue": queue, "start": 0, "n": n, "bulk": 50}); err != nil {
				b.Fatal(err)
			}
			var ms float64
			_, cpu := serverTimed(b, client, func() {
				r, err := bq.do(map[string]any{"op": "consume", "queue": queue, "n": n, "concurrency": c, "max": 0, "duration": 0})
				if err != nil {
					b.Fatal(fmt.Errorf("bullmq consume: %w", err))
				}
				ms = r.MS
			})
			return time.Duration(ms * float64(time.Millisecond)), cpu
		}})
	}
	return cs
}

// xpending returns the entries of topic's group g delivered and not acknowledged, or -1 when
// XPENDING fails.
func xpending(client rueidis.Client, topic string) int64 {
	r, err := client.Do(context.Background(), client.B().Xpending().Key(topic).Group("g").Build()).ToArray()
	if err != nil || len(r) == 0 {
		return -1
	}
	n, _ := r[0].AsInt64()
	return n
}
