// Package config builds redstream from YAML files written for the Java starters: the same
// keys, the same defaults, the same fallbacks, so existing configuration files carry over.
// One file configures every component:
//
//	redis-streaming:
//	  ratelimit:            # rate limiters, a registry, the default limiter
//	    enabled: true
//	    backend: redis
//	    default-name: api1
//	    policies:
//	      api1: {algorithm: sliding, window-ms: 1000, limit: 10}
//	redis-stream:           # the Redis Streams SDK (package stream)
//	  read-count: 10
//	  block-ms: 2000
//	  max-retry: 3
//	redis-cache:            # the cache-aside template (package cache)
//	  key-prefix: "cache:"
//	  default-ttl-seconds: 3600
//
// [Load] and [FromConfig] return a [Config]:
//
//   - redis-streaming.ratelimit builds limiters, a [redstream.Registry] and the default
//     limiter ([RateLimit]);
//   - redis-stream is read by package stream's own loader (stream.ConfigFromNode) into
//     Config.Stream, a stream.Config; without the section it is the zero stream.Config,
//     which package stream treats as its defaults;
//   - redis-cache is read by package cache's own loader (cache.Config.UnmarshalYAML) into
//     Config.Cache; without the section it is cache.DefaultConfig().
//
// With Options.Redis set, [Config.NewCache], [Config.NewProducer] and [Config.NewConsumer]
// build the cache and the stream producer and consumer from the parsed sections on that
// client. The client stays the caller's: nothing built here closes it; the caller closes
// the cache and the consumer.
//
// Keys bind as Spring Boot's relaxed binding does: "window-ms", "windowMs" and "window_ms"
// are one setting, and so are the section names "redis-stream", "redisStream" and
// "redis_stream". A dotted key ("redis-streaming.ratelimit.enabled: true",
// "redis-stream.read-count: 5") equals the nested form. Unknown keys under
// redis-streaming.ratelimit are ignored with a warning (Spring ignores them silently); under
// redis-stream and redis-cache they are errors, as those packages' loaders decide. Bad
// values in any section are errors that name the setting and its line:
//
//	config: redis-streaming.ratelimit.policies.api1.limit (line 12): must be > 0
//	config: redis-stream.max-retry (line 4): got -1, want a positive count (0 for the default 3)
//	config: redis-cache.jitter-ratio (line 9): must be in [0, 1), got 1.5
//
// Errors of redis-stream and redis-cache also match redstream.ErrInvalidConfig under
// errors.Is. Each section is parsed by its own reader from the document's node (package
// internal/yamlx), so sections of other packages plug in the same way.
package config
