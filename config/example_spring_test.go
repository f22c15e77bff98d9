package config_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/redstream-go/redstream/config"
)

// stdoutLogger writes warnings to standard output without timestamps (stable output).
func stdoutLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// Mistakes the Java starter turned into silent defaults are errors by default.
func ExampleLoad_strict() {
	yaml := `
redis-streaming:
  ratelimit:
    enabled: true
    default-name: api
    policies:
      api:
        algorithm: gcra
        limit: 10
`
	_, err := config.Load([]byte(yaml), config.Options{})
	fmt.Println(err)
	// Output:
	// config: redis-streaming.ratelimit.policies.api.algorithm (line 8): unknown algorithm "gcra"; want sliding, token-bucket, leaky-bucket, fixed or sliding-counter
}

// Options.Lenient restores the Java starter's warn-and-default behaviour, for migrations:
// each warning says what is used instead.
func ExampleLoad_lenient() {
	yaml := `
redis-streaming:
  ratelimit:
    enabled: true
    default-name: api
    policies:
      api:
        algorithm: gcra
        limt: 10
`
	cfg, err := config.Load([]byte(yaml), config.Options{Lenient: true, Logger: stdoutLogger()})
	if err != nil {
		panic(err)
	}
	p := cfg.RateLimit.Settings.Policies[0]
	fmt.Println(p.Name, p.Algorithm, p.Window, p.Limit)
	// Output:
	// level=WARN msg="config: unknown key (did you mean limit?); ignored" key=redis-streaming.ratelimit.policies.api.limt line=9
	// level=WARN msg="config: unknown algorithm \"gcra\"; using sliding (window-ms 1000, limit 100)" key=redis-streaming.ratelimit.policies.api.algorithm line=8
	// api sliding 1s 100
}

// Profile documents and placeholders, as Spring Boot reads them. Options.Getenv stands in
// for the environment here; by default it is os.LookupEnv.
func ExampleLoad_profiles() {
	yaml := `
spring:
  application.name: orders
  profiles.active: ${APP_ENV:dev}
redis-cache:
  key-prefix: "${spring.application.name}:${APP_ENV:dev}:"
  default-ttl-seconds: 3600
---
spring.config.activate.on-profile: dev
redis-cache.default-ttl-seconds: 60
`
	for _, env := range []map[string]string{{}, {"APP_ENV": "prod"}} {
		cfg, err := config.Load([]byte(yaml), config.Options{
			Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(cfg.Profiles, cfg.Cache.KeyPrefix, cfg.Cache.DefaultTTL)
	}
	// Output:
	// [dev] orders:dev: 1m0s
	// [prod] orders:prod: 1h0m0s
}

// application.properties binds as application.yml does.
func ExampleLoadProperties() {
	props := `
redis-streaming.ratelimit.enabled=true
redis-streaming.ratelimit.default-name=api
redis-streaming.ratelimit.policies.api.algorithm=token-bucket
redis-streaming.ratelimit.policies.api.capacity=20
redis-streaming.ratelimit.policies.api.rate-per-second=5
redisStream.readCount=25
`
	cfg, err := config.LoadProperties([]byte(props), config.Options{})
	if err != nil {
		panic(err)
	}
	p := cfg.RateLimit.Settings.Policies[0]
	fmt.Println(p.Name, p.Algorithm, p.Capacity, p.RatePerSecond, cfg.Stream.ReadCount)
	// Output: api token-bucket 20 5 25
}

// The Java application's spring.data.redis section gives the rueidis client option; the
// client is the caller's to build, pass in Options.Redis and close.
func ExampleRedisSettings_ClientOption() {
	yaml := `
spring:
  data:
    redis:
      host: redis.internal
      port: 6380
      password: s3cret
      database: 2
      ssl.enabled: true
      timeout: 2s
      client-name: orders
`
	cfg, err := config.Load([]byte(yaml), config.Options{})
	if err != nil {
		panic(err)
	}
	opt, err := cfg.Redis.ClientOption()
	if err != nil {
		panic(err)
	}
	fmt.Println(opt.InitAddress, opt.SelectDB, opt.TLSConfig.ServerName, opt.ConnWriteTimeout, opt.ClientName)
	// Then: client, err := rueidis.NewClient(opt); defer client.Close()
	// Output: [redis.internal:6380] 2 redis.internal 2s orders
}
