package benchmarks

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/stream"
)

// BenchmarkStreamHistoryCost: consume+ack of b.N entries per round by one consumer (read
// count 100, no-op handler), with the per-minute history recorded (the default) and with
// Config.DisableHistory, in 7 interleaved rounds on one redis-server (the order alternates).
// It reports each one's median msgs/s and the median of the per-round ratio with its range.
func BenchmarkStreamHistoryCost(b *testing.B) {
	client := redisClient(b)
	run := func(disabled bool) float64 {
		topic := streamTopic("hist")
		fillRedstream(b, client, topic, b.N)
		var handled atomic.Int64
		all := make(chan struct{})
		c, err := stream.NewConsumer(client, stream.Config{ReadCount: 100, BlockTimeout: 100 * time.Millisecond, DisableHistory: disabled})
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
		rate := float64(b.N) / time.Since(start).Seconds()
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		_ = client.Do(context.Background(), client.B().Del().Key(topic).Build()).Error()
		return rate
	}
	const rounds = 7
	var on, off, ratios []float64
	b.ResetTimer()
	for r := range rounds {
		var a, o float64
		if r%2 == 0 {
			a, o = run(false), run(true)
		} else {
			o, a = run(true), run(false)
		}
		on, off, ratios = append(on, a), append(off, o), append(ratios, a/o)
	}
	b.StopTimer()
	mOn, loOn, hiOn := median(on)
	mOff, loOff, hiOff := median(off)
	m, lo, hi := median(ratios)
	b.ReportMetric(mOn, "history-msgs/s")
	b.ReportMetric(mOff, "no-history-msgs/s")
	b.ReportMetric(m, "history/no-history")
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nStreamHistoryCost: %d entries per round, %d rounds\n", b.N, rounds)
	fmt.Fprintf(&sb, "history    median %7.0f msgs/s (rounds %.0f–%.0f)\n", mOn, loOn, hiOn)
	fmt.Fprintf(&sb, "no history median %7.0f msgs/s (rounds %.0f–%.0f)\n", mOff, loOff, hiOff)
	fmt.Fprintf(&sb, "history/no-history: %.3fx (rounds %.3f–%.3f)\n", m, lo, hi)
	fmt.Print(sb.String())
}
