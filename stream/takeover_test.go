package stream_test

import (
	"cmp"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// TestStrandedTakeover: a consumer that died holding 200 entries of an idle topic (read,
// never acknowledged) leaves them to a live consumer, which takes them all over as fast as
// its handler slots free up: within MinIdle plus about a second with fast scan settings, and
// within MinIdle plus two scan intervals with the package defaults.
func TestStrandedTakeover(t *testing.T) {
	cases := []struct {
		name        string
		readCount   int
		concurrency int
		interval    time.Duration
		bound       time.Duration // after MinIdle
	}{
		{name: "fast settings", readCount: 20, concurrency: 2, interval: 250 * time.Millisecond, bound: 1200 * time.Millisecond},
		{name: "defaults", bound: 2 * stream.DefaultClaimInterval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const total = 200
			const minIdle = time.Second
			client := redistest.Client(t)
			ctx := context.Background()
			topic := newTopic(t)
			cfg := stream.Config{ReadCount: tc.readCount, Autoclaim: stream.AutoclaimConfig{MinIdle: minIdle, Interval: tc.interval}}
			p := newProducer(t, client, cfg)
			if err := client.Do(ctx, client.B().XgroupCreate().Key(topic).Group("g").Id("0").Mkstream().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < total; i++ {
				send(t, p, topic, order{i, "stranded"})
			}
			// The dead consumer: it read every entry and vanished.
			if err := client.Do(ctx, client.B().Xreadgroup().Group("g", "dead").Count(total).Streams().Key(topic).Id(">").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			strandedAt := time.Now()
			if n := pending(t, client, topic, "g"); n != total {
				t.Fatalf("%d pending, want %d", n, total)
			}

			var mu sync.Mutex
			seen := map[int]int{}
			var last time.Time
			c := newConsumer(t, client, cfg)
			if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: tc.concurrency,
				Handle: func(ctx context.Context, m *stream.Message[order]) error {
					time.Sleep(time.Millisecond) // a handler that does a little work
					mu.Lock()
					seen[m.Body.ID]++
					last = time.Now()
					mu.Unlock()
					return nil
				}}); err != nil {
				t.Fatal(err)
			}
			startConsumer(t, c)
			eventually(t, minIdle+tc.bound+30*time.Second, "every stranded entry handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == total
			})
			mu.Lock()
			took := last.Sub(strandedAt)
			dups := 0
			for _, n := range seen {
				dups += n - 1
			}
			mu.Unlock()
			t.Logf("%d stranded entries handled %v after they were stranded (min-idle %v, scan interval %v): %.1f entries/s after min-idle; %d duplicates",
				total, took.Round(time.Millisecond), minIdle, cmp.Or(tc.interval, stream.DefaultClaimInterval), float64(total)/max(took-minIdle, time.Millisecond).Seconds(), dups)
			if took > minIdle+tc.bound {
				t.Errorf("the takeover took %v, want at most min-idle + %v = %v", took.Round(time.Millisecond), tc.bound, minIdle+tc.bound)
			}
			if dups != 0 {
				t.Errorf("%d entries handled twice", dups)
			}
			eventually(t, 5*time.Second, "nothing pending", func() bool { return pending(t, client, topic, "g") == 0 })
		})
	}
}
