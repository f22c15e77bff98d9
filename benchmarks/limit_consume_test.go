package benchmarks

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

// limitedRate is the global rate of BenchmarkStreamLimitedConsume's binding limit.
const limitedRate = 2000

// BenchmarkStreamLimitedConsume measures what a consumption limit costs and how close to
// its limit a limited topic is consumed, in interleaved rounds (5; each round consumes b.N
// messages per contender from a fresh queue, 10 handler slots, no-op handlers):
//   - redstream plain, and with Handler.Limit admitting every message (a Redis token
//     bucket far above the load: the cost of one limiter call per message), and with a
//     binding global limit of 2,000 messages/s (a token bucket of burst 20, one key for
//     the topic);
//   - BullMQ plain, and with its Worker's global rate limiter at the same rate ({max: 20,
//     duration: 10 ms}), through the npm package on the same Redis.
//
// It reports each contender's median msgs/s, the ratios limited/plain for each library,
// and for the binding limits the achieved rate over the limit (1 is the limit exactly).
func BenchmarkStreamLimitedConsume(b *testing.B) {
	client := redisClient(b)
	open, err := redisbackend.NewLimiter(client, redstream.TokenBucket(1e6, 1e6), redisbackend.Options{KeyPrefix: streamTopic("lim-open")})
	if err != nil {
		b.Fatal(err)
	}
	binding, err := redisbackend.NewLimiter(client, redstream.TokenBucket(20, limitedRate), redisbackend.Options{KeyPrefix: streamTopic("lim-bind")})
	if err != nil {
		b.Fatal(err)
	}
	bq := startBullMQ(b, redisAddr(b))
	type run struct {
		name string
		fn   func() time.Duration
	}
	runs := []run{
		{"redstream", func() time.Duration { return consumeRedstream(b, client, nil) }},
		{"redstream-limit-open", func() time.Duration { return consumeRedstream(b, client, open) }},
		{"redstream-limit-2000/s", func() time.Duration { return consumeRedstream(b, client, binding) }},
	}
	if bq != nil {
		runs = append(runs,
			run{"bullmq", func() time.Duration { return consumeBullMQ(b, bq, 0) }},
			run{"bullmq-limit-2000/s", func() time.Duration { return consumeBullMQ(b, bq, 20) }})
	}
	const nRounds = 5
	rates := make(map[string][]float64, len(runs))
	b.ResetTimer()
	for r := range nRounds {
		for k := range runs {
			c := runs[(r+k)%len(runs)]
			rates[c.name] = append(rates[c.name], float64(b.N)/c.fn().Seconds())
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for _, c := range runs {
		m, lo, hi := median(rates[c.name])
		med[c.name] = m
		b.ReportMetric(m, c.name+"-msgs/s")
		b.Logf("%s: median %.0f msgs/s (%.0f–%.0f over %d rounds)", c.name, m, lo, hi, nRounds)
	}
	b.ReportMetric(med["redstream-limit-open"]/med["redstream"], "redstream-limit-open/redstream")
	b.ReportMetric(med["redstream-limit-2000/s"]/limitedRate, "redstream-achieved/limit")
	if bq != nil {
		b.ReportMetric(med["bullmq-limit-2000/s"]/limitedRate, "bullmq-achieved/limit")
		b.ReportMetric(med["redstream"]/med["bullmq"], "redstream/bullmq")
		b.ReportMetric(med["redstream-limit-2000/s"]/med["bullmq-limit-2000/s"], "redstream-limited/bullmq-limited")
	}
}

// consumeRedstream fills a new topic with b.N messages and returns the time one consumer
// (10 slots, limited by rate when not nil, under one key) takes to handle them all.
func consumeRedstream(b *testing.B, client rueidis.Client, rate redstream.Limiter) time.Duration {
	b.Helper()
	b.StopTimer()
	topic := streamTopic("limcon")
	fillRedstream(b, client, topic, b.N)
	var handled atomic.Int64
	all := make(chan struct{})
	c, err := stream.NewConsumer(client, stream.Config{BlockTimeout: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	h := stream.Handler[benchEvent]{Topic: topic, Group: "g", Concurrency: 10,
		Handle: func(ctx context.Context, m *stream.Message[benchEvent]) error {
			if handled.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
		}}
	if rate != nil {
		h.Limit = &stream.Limit[benchEvent]{Rate: rate, Key: func(*stream.Message[benchEvent]) string { return topic }}
	}
	if err := stream.Register(c, h); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d handled in 5 minutes", handled.Load(), b.N)
	}
	d := time.Since(start)
	b.StopTimer()
	if err := c.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return d
}

// consumeBullMQ adds b.N jobs to a new queue and returns the time a BullMQ Worker (10
// concurrent jobs; with max > 0 its rate limiter of max jobs per 10 ms) takes to complete
// them all, as peer.mjs measures it.
func consumeBullMQ(b *testing.B, bq *bullmqPeer, max int) time.Duration {
	b.Helper()
	b.StopTimer()
	queue := streamTopic("limcon-bq")
	if _, err := bq.do(map[string]any{"op": "add", "queue": queue, "start": 0, "n": b.N}); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	r, err := bq.do(map[string]any{"op": "consume", "queue": queue, "n": b.N, "concurrency": 10, "max": max, "duration": 10})
	if err != nil {
		b.Fatal(fmt.Errorf("bullmq consume: %w", err))
	}
	return time.Duration(r.MS * float64(time.Millisecond))
}
