package benchmarks

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// BenchmarkStreamPartitionedConsume measures one topic's consume throughput: a single
// stream on one redis-server, a single stream on the 3-master cluster (one master does all
// the work), and a topic of 6 partitions on the same cluster (two per master), all on this
// machine. Each round writes 20,000 messages per contender (untimed, SendBatch), then times
// one consumer (ReadCount 100, Concurrency 4 per stream, no-op handler) from Start until
// every message is handled and acknowledged; the contenders take turns, the order rotating
// every round. Reported: the median msgs/s of each and the median within-round ratio of the
// partitioned topic to each single stream. On a machine with fewer cores than servers plus
// client the servers share the cores: the ratio then shows what partitioning costs or gains
// there, not what it gains with one core per node. Run e.g.
//
//	go test -run '^$' -bench StreamPartitionedConsume -benchtime 5x
//
// (b.N is the number of rounds.)
func BenchmarkStreamPartitionedConsume(b *testing.B) {
	const perRound, parts = 20000, 6
	single := redistest.Client(b)
	cluster := redistest.ClusterClient(b)
	type contender struct {
		name   string
		client rueidis.Client
		parts  int
	}
	cs := []contender{
		{"partitioned-cluster", cluster, parts},
		{"single-server", single, 0},
		{"single-cluster", cluster, 0},
	}
	rates := make([][]float64, len(cs))
	b.ResetTimer()
	for round := range b.N {
		for k := range cs {
			i := (k + round) % len(cs)
			rates[i] = append(rates[i], consumeRound(b, cs[i].client, cs[i].parts, perRound))
		}
	}
	b.StopTimer()
	for i, c := range cs {
		b.ReportMetric(medianOf(rates[i]), c.name+"-msgs/s")
	}
	for i := 1; i < len(cs); i++ {
		ratios := make([]float64, len(rates[0]))
		for r := range ratios {
			ratios[r] = rates[0][r] / rates[i][r]
		}
		b.ReportMetric(medianOf(ratios), "x-vs-"+cs[i].name)
	}
	b.Logf("GOMAXPROCS %d, NumCPU %d: the cluster's 3 servers, the single server and this process share them", runtime.GOMAXPROCS(0), runtime.NumCPU())
}

// consumeRound fills a fresh topic of parts partitions with n messages and returns the rate
// at which one consumer handles and acknowledges them.
func consumeRound(b *testing.B, client rueidis.Client, parts, n int) float64 {
	b.Helper()
	ctx := context.Background()
	topic := streamTopic("part" + strconv.Itoa(parts))
	cfg := stream.Config{ReadCount: 100, BlockTimeout: 100 * time.Millisecond, Trim: stream.TrimConfig{Mode: stream.TrimOff}}
	if parts > 1 {
		cfg.Partitions = map[string]int{topic: parts}
	}
	p, err := stream.NewProducer(client, cfg)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]stream.Sendable, 0, 1000)
	for i := range n {
		batch = append(batch, &stream.Message[benchEvent]{Key: "k" + strconv.Itoa(i), Body: benchEvent{OrderID: int64(i)}})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := p.SendBatch(ctx, topic, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	streams, _ := stream.PartitionStreams(cfg, topic)
	total := int64(0)
	for _, s := range streams {
		got, err := client.Do(ctx, client.B().Xlen().Key(s).Build()).AsInt64()
		if err != nil {
			b.Fatal(err)
		}
		if parts > 1 && got == 0 {
			b.Fatalf("fixture: partition %s empty", s)
		}
		total += got
	}
	if total != int64(n) {
		b.Fatalf("fixture: %d entries over %d streams, want %d", total, len(streams), n)
	}
	var handled atomic.Int64
	all := make(chan struct{})
	c, err := stream.NewConsumer(client, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := stream.Register(c, stream.Handler[benchEvent]{Topic: topic, Group: "g", Concurrency: 4,
		Handle: func(ctx context.Context, m *stream.Message[benchEvent]) error {
			if handled.Add(1) == int64(n) {
				close(all)
			}
			return nil
		}}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-all
	waitNoPending(b, func() int64 {
		var sum int64
		for _, s := range streams {
			r, err := client.Do(ctx, client.B().Xpending().Key(s).Group("g").Build()).ToArray()
			if err != nil {
				return -1
			}
			v, _ := r[0].AsInt64()
			sum += v
		}
		return sum
	})
	rate := float64(n) / time.Since(start).Seconds()
	if err := c.Close(ctx); err != nil {
		b.Fatal(err)
	}
	for _, s := range streams { // keep the servers small between rounds
		_ = client.Do(ctx, client.B().Del().Key(s).Build()).Error()
	}
	return rate
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
