package config_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redstream-go/redstream/config"
)

func ExampleLoad() {
	yaml := `
redis-streaming:
  ratelimit:
    enabled: true
    default-name: api1
    policies:
      api1:
        algorithm: sliding
        window-ms: 1000
        limit: 2
      api2:
        algorithm: token-bucket
        capacity: 100
        rate-per-second: 50
`
	cfg, err := config.Load([]byte(yaml), config.Options{})
	if err != nil {
		panic(err)
	}
	rl := cfg.RateLimit
	fmt.Println("registered:", rl.Registry.Names(), "default:", rl.DefaultName)

	now := time.Unix(1_800_000_000, 0)
	for range 3 {
		d, _ := rl.Default.AllowN(context.Background(), "user:1", now, 1)
		fmt.Println("api1 allowed:", d.Allowed)
	}
	// Output:
	// registered: [api1 api2] default: api1
	// api1 allowed: true
	// api1 allowed: true
	// api1 allowed: false
}

func ExampleLoad_error() {
	yaml := `
redis-streaming:
  ratelimit:
    enabled: true
    policies:
      api1:
        limit: 0
`
	_, err := config.Load([]byte(yaml), config.Options{})
	fmt.Println(err)
	// Output:
	// config: redis-streaming.ratelimit.policies.api1.limit (line 7): limit = 0, want in [1, 1099511627776]
}

func ExampleLoad_redisWithoutClient() {
	yaml := `
redis-streaming.ratelimit:
  enabled: true
  backend: redis
`
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // stable output
			}
			return a
		},
	}))
	cfg, err := config.Load([]byte(yaml), config.Options{Logger: logger}) // no Options.Redis
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.RateLimit.Registry.Names())
	// Output:
	// level=WARN msg="config: backend is redis but no Redis client was given (Options.Redis); policy \"default\" uses memory" key=redis-streaming.ratelimit line=2
	// [default]
}

// The Java starter's example file. With Options.Redis set, api1 and api2 run on Redis;
// without, they fall back to memory with a warning (discarded here).
func ExampleFromConfig() {
	cfg, err := config.FromConfig("testdata/seed.yaml", config.Options{
		Logger: slog.New(slog.DiscardHandler),
		// Redis: client, // a rueidis.Client; the caller keeps ownership
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.RateLimit.Registry.Names(), cfg.RateLimit.DefaultName)
	// Output: [api1 api2] api1
}
