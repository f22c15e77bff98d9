// Package config builds redstream from the configuration files of the Java starters, read
// as Spring Boot reads them: the same keys, the same defaults, profiles, placeholders and
// .properties files, so existing application.yml and application.properties files carry
// over. One file configures every component:
//
//	spring:
//	  profiles.active: ${APP_ENV:dev}
//	  data.redis:           # the Java application's connection (Config.Redis)
//	    host: ${REDIS_HOST:localhost}
//	    port: 6379
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
//	---
//	spring.config.activate.on-profile: prod
//	redis-stream.read-count: 50
//
// [Load], [LoadProperties] and [FromConfig] return a [Config]:
//
//   - redis-streaming.ratelimit builds limiters, a [redstream.Registry] and the default
//     limiter ([RateLimit]); none of them is ever nil;
//   - redis-stream is bound to a stream.Config through its struct tags, checked by
//     stream.Config.Validate, defaults filled in;
//   - redis-cache is bound onto cache.DefaultConfig() the same way, checked by
//     cache.Config.Validate;
//   - spring.data.redis (or Spring Boot 2's spring.redis) gives [RedisSettings], and
//     [RedisSettings.ClientOption] the rueidis.ClientOption to connect as the Java
//     application does.
//
// Redis rate-limit policies take redstream's keys for Redis failures and the key layout
// ([RedisLimiterSettings]), on the section (every policy's default) or on a policy:
// timeout-ms (each decision's deadline, default 100; -1: the caller's context alone),
// breaker.failures, .error-rate, .min-calls, .window-ms, .cool-down-ms, .probes and
// .disabled (the circuit breaker, redstream.BreakerOptions), java-compatible (the Java
// implementation's keys, for sliding and token-bucket), local-denials (default true) and
// quota.enabled, .duration-ms, .max-share (leased quota for hot keys,
// redisbackend.QuotaOptions; token-bucket, fixed and sliding-counter only, anywhere else an
// error naming the policy). On a memory policy they are errors (lenient: warnings). A single-limit Redis policy may
// also name the spec it replaces (previous.*, its unset keys the policy's own) and how each
// key's state carries over (carry: as-is, proportional or reset; [PolicySettings.Previous]).
// shadow (on the section or a policy) runs a policy in shadow mode (redstream.Shadow).
//
// With Options.Redis set, [Config.NewCache], [Config.NewProducer] and [Config.NewConsumer]
// build the cache and the stream producer and consumer from the parsed sections on that
// client. The client stays the caller's: nothing built here closes it; the caller closes
// the cache and the consumer.
//
// Spring Boot's rules apply: relaxed keys ("window-ms", "windowMs", "window_ms"; nested or
// dotted), durations as numbers in the key's unit or as "2s" / "PT2S", documents activated
// by spring.config.activate.on-profile for the active profiles (Options.Profiles, else
// SPRING_PROFILES_ACTIVE, else spring.profiles.active, else "default"), later documents
// overriding earlier ones, ${NAME} / ${NAME:default} placeholders resolved from the
// environment and from other keys of the file, and environment variables overriding keys
// (SPRING_DATA_REDIS_HOST for spring.data.redis.host, REDISSTREAM_READCOUNT for
// redis-stream.read-count).
//
// Reading is strict: an unknown key, an unknown algorithm, a value of the wrong type or out
// of range, a default-name naming no policy, policies without enabled: true are errors that
// name the setting and its line, and match redstream.ErrInvalidConfig:
//
//	config: redis-streaming.ratelimit.policies.api1.limit (line 12): limit = 0, want in [1, 1099511627776]
//	config: redis-streaming.ratelimit.policies.api1.limt (line 12): unknown key (did you mean limit?)
//	config: redis-cache.jitter-ratio (line 9): must be in [0, 1), got 1.5
//
// Options.Lenient restores the Java starter's warn-and-default behaviour for migrations;
// each warning says what is used instead. Loading is linear in the input's size whatever
// it holds (alias bombs, placeholder bombs and deep nesting are errors), and every section
// is fuzzed.
package config
