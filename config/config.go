// Package config builds redstream from YAML files written for the Java starters: the same
// keys, the same defaults, the same fallbacks, so existing configuration files carry over.
//
// Keys bind as Spring Boot's relaxed binding does: "window-ms", "windowMs" and "window_ms"
// are one setting, and a dotted key ("redis-streaming.ratelimit.enabled: true") equals the
// nested form. Unknown keys are ignored with a warning (Spring ignores them silently). Bad
// values are errors that name the setting and its line:
//
//	config: redis-streaming.ratelimit.policies.api1.limit (line 12): must be > 0
//
// Sections: redis-streaming.ratelimit builds limiters, a [redstream.Registry] and the default
// limiter ([RateLimit]). Each section is parsed by its own reader from the document's node
// (package internal/yamlx), so sections of other packages plug in the same way.
package config

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
)

// Options says how to build what a configuration file describes. The zero value is valid:
// no Redis client (Redis backends fall back to memory with a warning), warnings to
// slog.Default(), default memory engines.
type Options struct {
	// Redis is the client of every Redis-backed component. Nil makes "backend: redis" fall
	// back to memory with a warning, as the Java starter does without a RedissonClient.
	// The client stays the caller's: nothing built here closes it.
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

// Config is what a configuration file built.
type Config struct {
	// RateLimit is built from redis-streaming.ratelimit. It is never nil.
	RateLimit *RateLimit
}

// Load parses a YAML document and builds what it describes. Errors name the setting and
// its line (*yamlx.Error); warnings go to opts.Logger.
func Load(data []byte, opts Options) (*Config, error) {
	root, err := yamlx.Parse(data)
	if err != nil {
		return nil, err
	}
	rl, err := loadRateLimit(root, opts)
	if err != nil {
		return nil, err
	}
	return &Config{RateLimit: rl}, nil
}

// FromConfig reads the YAML file at path and builds what it describes, as Load does.
func FromConfig(path string, opts Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Load(data, opts)
}
