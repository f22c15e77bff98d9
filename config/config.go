package config

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/stream"
)

// Options says how to build what a configuration file describes. The zero value is valid:
// no Redis client (Redis backends fall back to memory with a warning), warnings to
// slog.Default(), default memory engines.
type Options struct {
	// Redis is the client of every Redis-backed component: Redis limiters, and the cache,
	// producer and consumer of Config.NewCache, NewProducer and NewConsumer. Nil makes
	// "backend: redis" fall back to memory with a warning, as the Java starter does without
	// a RedissonClient, and makes those builders return ErrNoClient. The client stays the
	// caller's: nothing built here closes it.
	Redis rueidis.Client
	// Logger receives the warnings (fallbacks, unknown keys and algorithms). Nil means
	// slog.Default().
	Logger *slog.Logger
	// Memory configures every in-process engine (clock, shards, sweeping).
	Memory memory.Options
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Config is what a configuration file built. Its builders ([Config.NewCache],
// [Config.NewProducer], [Config.NewConsumer]) use Options.Redis.
type Config struct {
	// RateLimit is built from redis-streaming.ratelimit. It is never nil.
	RateLimit *RateLimit
	// Stream is redis-stream, read by stream.ConfigFromNode, with every key the file does
	// not set at stream's default (Config.WithDefaults: read-count 10, block-ms 2000,
	// max-retry 3, ...); without the section it is all defaults.
	Stream stream.Config
	// Cache is redis-cache, read by cache.Config.UnmarshalYAML starting from
	// cache.DefaultConfig(); without the section it is cache.DefaultConfig().
	Cache cache.Config

	redis rueidis.Client
}

// Load parses a YAML document and builds what it describes: every section, each absent one
// with its defaults. Errors name the setting and its line (*yamlx.Error); errors of the
// redis-stream and redis-cache sections also match redstream.ErrInvalidConfig under
// errors.Is. Warnings go to opts.Logger.
func Load(data []byte, opts Options) (*Config, error) {
	root, err := yamlx.Parse(data)
	if err != nil {
		return nil, err
	}
	// The sections that only parse go first, so that an error there builds no limiter.
	st, err := loadStream(root)
	if err != nil {
		return nil, err
	}
	ca, err := loadCache(root)
	if err != nil {
		return nil, err
	}
	rl, err := loadRateLimit(root, opts)
	if err != nil {
		return nil, err
	}
	return &Config{RateLimit: rl, Stream: st, Cache: ca, redis: opts.Redis}, nil
}

// FromConfig reads the YAML file at path and builds what it describes, as Load does.
func FromConfig(path string, opts Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Load(data, opts)
}
