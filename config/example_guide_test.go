package config_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
)

// ExampleLoad_streamError: a bad value of the redis-stream section is an error naming its key
// and line, as in every section.
func ExampleLoad_streamError() {
	yamlBytes := []byte("redis-stream:\n  block-ms: soon\n")
	cfg, err := config.Load(yamlBytes, config.Options{}) // cfg.Stream; see "Configuration from YAML"
	fmt.Println(cfg == nil, errors.Is(err, redstream.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true true
	// config: redis-stream.block-ms (line 2): must be a duration such as 500ms, 2s or a whole number of ms, got "soon"
}

// ExampleRedisSettings_ClientOption_connect connects with the application's own Redis
// settings (spring.data.redis), then builds the components on that client.
func ExampleRedisSettings_ClientOption_connect() {
	srv, err := miniredis.Run() // an embedded Redis standing for the application's
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	yaml := fmt.Sprintf(`
spring.data.redis:
  host: %s
  port: %s
  client-name: orders
redis-streaming.ratelimit:
  enabled: true
  backend: redis
  timeout-ms: 1000
  default-name: api
  policies:
    api: {algorithm: sliding, window-ms: 1000, limit: 10}
`, srv.Host(), srv.Port())
	cfg, err := config.Load([]byte(yaml), config.Options{})
	if err != nil {
		panic(err)
	}

	opt, err := cfg.Redis.ClientOption() // [redis.internal:6380], SelectDB 2, TLS, 2s, "orders"
	if err != nil {
		panic(err)
	}
	opt.DisableCache = true // the embedded Redis has no client tracking
	client, err := rueidis.NewClient(opt)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	cfg, err = config.Load([]byte(yaml), config.Options{Redis: client}) // or config.FromConfig("application.yml", ...)
	if err != nil {
		panic(err)
	}
	d, err := redstream.Allow(context.Background(), cfg.RateLimit.Default, "user:1")
	fmt.Println(d.Allowed, d.Remaining, err)
	// Output: true 9 <nil>
}
