package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/httpidem"
	"github.com/redstream-go/redstream/idempotency"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/stream"
)

// The sections of other packages, bound to those packages' plain config structs.
const (
	// StreamPath is the section Config.Stream is read from (the yaml tags of stream.Config).
	StreamPath = "redis-stream"
	// CachePath is the section Config.Cache is read from (the yaml tags of cache.Config).
	CachePath = "redis-cache"
	// IdempotencyPath is the section Config.Idempotency is read from (the yaml tags of
	// idempotency.Options, and of httpidem.Options under http).
	IdempotencyPath = "redis-idempotency"
)

// IdempotencySettings are the redis-idempotency section: an Idempotent's options and, under
// http, the middleware's (its Idempotent and Principal are the application's to set).
type IdempotencySettings struct {
	idempotency.Options `yaml:",inline"`
	HTTP                httpidem.Options `yaml:"http"`
}

// loadIdempotency binds redis-idempotency and validates it with idempotency.Options.Validate.
func (l *loader) loadIdempotency(root yamlx.Node) (IdempotencySettings, error) {
	sec, err := section(root, IdempotencyPath)
	if err != nil {
		return IdempotencySettings{}, err
	}
	var s IdempotencySettings
	if err := yamlx.Bind(sec, &s, l.bindOptions()); err != nil {
		return IdempotencySettings{}, err
	}
	if err := s.Options.Validate(); err != nil {
		return IdempotencySettings{}, &loadError{err: sec.Errorf("%s", strings.TrimPrefix(err.Error(), "idempotency: ")), cause: err}
	}
	if s.HTTP.MaxBody < 0 {
		return IdempotencySettings{}, l.atPath(sec, IdempotencyPath+".http.max-body-bytes", fmt.Sprintf("must be at least 0, got %d", s.HTTP.MaxBody), nil)
	}
	return s, nil
}

// NewIdempotent returns an idempotency.Idempotent on Options.Redis built from
// c.Idempotency (idempotency.NewRedis), logging to Options.Logger unless the section's
// options name a logger. The client stays the caller's. It returns [ErrNoClient] without a
// client.
func (c *Config) NewIdempotent() (*idempotency.Idempotent, error) {
	if c.redis == nil {
		return nil, ErrNoClient
	}
	o := c.Idempotency.Options
	if o.Logger == nil {
		o.Logger = c.logger
	}
	return idempotency.NewRedis(c.redis, o)
}

// ErrNoClient is returned by [Config.NewCache], [Config.NewProducer], [Config.NewConsumer]
// and [Config.NewIdempotent] when Options.Redis was nil.
var ErrNoClient = errors.New("config: no Redis client: set Options.Redis")

// section returns the section at path, with its canonical path even when absent.
func section(root yamlx.Node, path string) (yamlx.Node, error) {
	sec, _, err := root.Lookup(path)
	if err != nil {
		return yamlx.Node{}, err
	}
	sec.Path = path
	return sec, nil
}

// loadStream binds redis-stream to a stream.Config, validates it with stream's own
// Validate and fills the keys it does not set with stream's defaults, so the Config shows
// the values it will run with.
func (l *loader) loadStream(root yamlx.Node) (stream.Config, error) {
	sec, err := section(root, StreamPath)
	if err != nil {
		return stream.Config{}, err
	}
	var c stream.Config
	if err := yamlx.Bind(sec, &c, l.bindOptions()); err != nil {
		return stream.Config{}, err
	}
	if err := c.Validate(); err != nil {
		var ce *stream.ConfigError
		if errors.As(err, &ce) && ce.Path != "" {
			return stream.Config{}, l.atPath(sec, ce.Path, ce.Msg, err)
		}
		return stream.Config{}, &loadError{err: sec.Errorf("%s", strings.TrimPrefix(err.Error(), "stream: ")), cause: err}
	}
	// stream's Validate skips zero (default) fields; the defaults must also fit the values
	// the file set (a consumer timeout longer than twice the block timeout).
	d := c.WithDefaults()
	if err := d.Validate(); err != nil {
		var ce *stream.ConfigError
		if errors.As(err, &ce) && ce.Path != "" {
			return stream.Config{}, l.atPath(sec, ce.Path, ce.Msg+" (the default does not fit the other settings: set it)", err)
		}
		return stream.Config{}, &loadError{err: sec.Errorf("%s", strings.TrimPrefix(err.Error(), "stream: ")), cause: err}
	}
	return d, nil
}

// loadCache binds redis-cache onto cache.DefaultConfig and validates it with cache's own
// Validate.
func (l *loader) loadCache(root yamlx.Node) (cache.Config, error) {
	sec, err := section(root, CachePath)
	if err != nil {
		return cache.Config{}, err
	}
	c := cache.DefaultConfig()
	if err := yamlx.Bind(sec, &c, l.bindOptions()); err != nil {
		return cache.DefaultConfig(), err
	}
	if err := c.Validate(); err != nil {
		var ce *cache.ConfigError
		if errors.As(err, &ce) && ce.Path != "" {
			return cache.DefaultConfig(), l.atPath(sec, ce.Path, ce.Msg, err)
		}
		return cache.DefaultConfig(), &loadError{err: sec.Errorf("%s", strings.TrimPrefix(err.Error(), "cache: ")), cause: err}
	}
	return c, nil
}

// atPath restates a Validate error of the key path (which starts with the section's name)
// at the line of that key in the file, or of its deepest present parent (a default), or
// naming the environment variable the value came from.
func (l *loader) atPath(sec yamlx.Node, path, msg string, cause error) error {
	if name, ok := l.fromEnv[path]; ok {
		return &loadError{err: &yamlx.Error{Path: path + " (environment " + name + ")", Msg: msg}, cause: cause}
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, sec.Path), ".")
	line := sec.LineOf(rel)
	return &loadError{err: &yamlx.Error{Path: path, Line: line, Msg: msg}, cause: cause}
}

// NewCache returns a cache.Cache built from c.Cache on Options.Redis (cache.New), logging
// to Options.Logger unless c.Cache.Logger is set. The client stays the caller's; the caller closes the cache. It returns [ErrNoClient] without
// a client, and cache.New's error for an invalid c.Cache.
func (c *Config) NewCache() (*cache.Cache, error) {
	if c.redis == nil {
		return nil, ErrNoClient
	}
	cc := c.Cache
	if cc.Logger == nil {
		cc.Logger = c.logger
	}
	return cache.New(c.redis, cc)
}

// NewProducer returns a stream.Producer built from c.Stream on Options.Redis
// (stream.NewProducer). The client stays the caller's. It returns [ErrNoClient] without a
// client.
func (c *Config) NewProducer() (*stream.Producer, error) {
	if c.redis == nil {
		return nil, ErrNoClient
	}
	return stream.NewProducer(c.redis, c.Stream)
}

// NewConsumer returns a stream.Consumer built from c.Stream on Options.Redis
// (stream.NewConsumer), logging to Options.Logger unless c.Stream.Logger is set; set c.Stream's callbacks (OnError, OnTrimmedWhilePending) before
// calling it. The client stays the caller's; the caller registers handlers, starts and
// closes the consumer. It returns [ErrNoClient] without a client.
func (c *Config) NewConsumer() (*stream.Consumer, error) {
	if c.redis == nil {
		return nil, ErrNoClient
	}
	sc := c.Stream
	if sc.Logger == nil {
		sc.Logger = c.logger
	}
	return stream.NewConsumer(c.redis, sc)
}
