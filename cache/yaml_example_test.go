package cache_test

import (
	"fmt"

	"github.com/redstream-go/redstream/config"
)

// The cache's outage settings read from a configuration file (package config binds the
// redis-cache section onto cache.DefaultConfig).
func ExampleConfig_yaml() {
	cfg, err := config.Load([]byte(`
redis-cache:
  timeout-ms: 50
  on-redis-error: load
  breaker:
    failures: 5
    cool-down-ms: 2000
`), config.Options{})
	if err != nil {
		panic(err)
	}
	c := cfg.Cache
	fmt.Println(c.Timeout, c.OnRedisError, c.Breaker.Failures, c.Breaker.CoolDown)

	_, err = config.Load([]byte("redis-cache:\n  on-redis-error: ignore\n"), config.Options{})
	fmt.Println(err)
	// Output:
	// 50ms load 5 2s
	// config: redis-cache.on-redis-error (line 2): must be "error" or "load", got "ignore"
}
