package config_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/stream"
)

// One file configures rate limiting, the Redis Streams SDK and the cache; Options.Redis
// is the client every component uses (an embedded Redis here).
func ExampleLoad_allSections() {
	yaml := `
redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    default-name: api1
    policies:
      api1:
        algorithm: sliding
        window-ms: 1000
        limit: 10

redis-stream:
  read-count: 10
  block-ms: 100
  max-retry: 3
  autoclaim:
    min-idle-ms: 60000
    interval-ms: 30000
  trim:
    maxlen: 100000
    interval-ms: 60000

redis-cache:
  key-prefix: "cache:"
  default-ttl-seconds: 3600
  null-ttl-seconds: 60
  jitter-ratio: 0.1
  breakdown:
    enabled: true
    lock-ttl-ms: 10000
    wait-timeout-ms: 3000
    wait-interval-ms: 50
`
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close() // the client is the caller's: nothing built from cfg closes it

	cfg, err := config.Load([]byte(yaml), config.Options{Redis: client})
	if err != nil {
		panic(err)
	}
	fmt.Println("limiters:", cfg.RateLimit.Registry.Names())
	fmt.Println("stream: read-count", cfg.Stream.ReadCount, "block-ms", cfg.Stream.BlockTimeout.Milliseconds())
	fmt.Println("cache: prefix", cfg.Cache.KeyPrefix, "ttl", cfg.Cache.DefaultTTL)

	ctx := context.Background()
	d, err := cfg.RateLimit.Default.AllowN(ctx, "user:1", time.Time{}, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed:", d.Allowed)

	c, err := cfg.NewCache()
	if err != nil {
		panic(err)
	}
	defer c.Close()
	name, err := cache.GetOrLoad(ctx, c, "user:1:name", cache.DefaultTTL,
		func(context.Context) (string, error) { return "Ada", nil })
	if err != nil {
		panic(err)
	}
	fmt.Println("cached:", name)

	consumer, err := cfg.NewConsumer()
	if err != nil {
		panic(err)
	}
	received := make(chan string, 1)
	err = stream.Register(consumer, stream.Handler[string]{
		Topic: "greetings", Group: "printer",
		Handle: func(ctx context.Context, msg *stream.Message[string]) error {
			received <- msg.Body
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.Start(ctx); err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)
	producer, err := cfg.NewProducer()
	if err != nil {
		panic(err)
	}
	if _, err := producer.Send(ctx, "greetings", stream.NewMessage("hello")); err != nil {
		panic(err)
	}
	select {
	case body := <-received:
		fmt.Println("consumed:", body)
	case <-time.After(10 * time.Second):
		fmt.Println("nothing consumed")
	}
	// Output:
	// limiters: [api1]
	// stream: read-count 10 block-ms 100
	// cache: prefix cache: ttl 1h0m0s
	// allowed: true
	// cached: Ada
	// consumed: hello
}

// A bad value in any section names its key path and line.
func ExampleLoad_sectionError() {
	yaml := `
redis-stream:
  read-count: 10
  max-retry: -1
redis-cache:
  jitter-ratio: 0.1
`
	_, err := config.Load([]byte(yaml), config.Options{})
	fmt.Println(err)
	// Output:
	// config: redis-stream.max-retry (line 4): got -1, want a positive count (0 for the default 3)
}
