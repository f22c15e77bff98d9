package stream_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/redstream-go/redstream/stream"
)

func ExampleConfig_partitions() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	// Producers and consumers of the topic share the partition count.
	cfg := stream.Config{Partitions: map[string]int{"shipments": 4}, BlockTimeout: 50 * time.Millisecond}
	names, _ := stream.PartitionStreams(cfg, "shipments")
	fmt.Println(names)

	var mu sync.Mutex
	got := map[string]int{}
	done := make(chan struct{})
	consumer, _ := stream.NewConsumer(client, cfg)
	_ = stream.Register(consumer, stream.Handler[Order]{Topic: "shipments", Group: "tracking",
		Handle: func(ctx context.Context, msg *stream.Message[Order]) error { // called for all 4 partitions
			mu.Lock()
			defer mu.Unlock()
			got[fmt.Sprintf("%s in partition %d", msg.Key, msg.Partition)]++
			if len(got) == 3 {
				close(done)
			}
			return nil
		}})
	_ = consumer.Start(ctx)
	defer consumer.Close(ctx)

	producer, _ := stream.NewProducer(client, cfg)
	for _, key := range []string{"customer-7", "customer-8", "customer-9"} {
		_, _ = producer.Send(ctx, "shipments", stream.Message[Order]{Key: key, Body: Order{ID: 1}}) // to the partition of its key, FNV-1a mod 4 (stream/WIRE.md)
	}
	<-done
	mu.Lock()
	lines := make([]string, 0, len(got))
	for l := range got {
		lines = append(lines, l)
	}
	mu.Unlock()
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// [{shipments:p0:50} {shipments:p1:3} {shipments:p2:10} {shipments:p3:3}]
	// customer-7 in partition 1
	// customer-8 in partition 0
	// customer-9 in partition 3
}
