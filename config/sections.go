package config

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/stream"
)

// The sections of other packages, read by those packages' own loaders.
const (
	// StreamPath is the section Config.Stream is read from (keys of stream.Config).
	StreamPath = stream.ConfigSection
	// CachePath is the section Config.Cache is read from (keys of cache.Config).
	CachePath = "redis-cache"
)

// ErrNoClient is returned by [Config.NewCache], [Config.NewProducer] and
// [Config.NewConsumer] when Options.Redis was nil.
var ErrNoClient = errors.New("config: no Redis client: set Options.Redis")

// loadStream reads redis-stream with stream.ConfigFromNode and fills the keys it does not
// set with stream's defaults, so the Config shows the values it will run with. An absent
// or empty section is stream's defaults.
func loadStream(root yamlx.Node) (stream.Config, error) {
	sec, ok, err := root.Get(StreamPath)
	if err != nil {
		return stream.Config{}, err
	}
	if !ok {
		return stream.Config{}.WithDefaults(), nil
	}
	c, err := stream.ConfigFromNode(sec.Value, StreamPath)
	if err != nil {
		return stream.Config{}, streamError(sec, err)
	}
	return c.WithDefaults(), nil
}

// loadCache reads redis-cache with cache.Config.UnmarshalYAML, starting from
// cache.DefaultConfig. An absent or empty section is cache.DefaultConfig().
func loadCache(root yamlx.Node) (cache.Config, error) {
	c := cache.DefaultConfig()
	sec, ok, err := root.Get(CachePath)
	if err != nil || !ok {
		return c, err
	}
	if err := c.UnmarshalYAML(sec.Value); err != nil {
		return cache.DefaultConfig(), cacheError(sec, err)
	}
	return c, nil
}

// sectionError is an error of another package's loader restated as "config: <path>
// (line N): <msg>". It unwraps to both the *yamlx.Error and the loader's own error (which
// matches redstream.ErrInvalidConfig).
type sectionError struct {
	at    *yamlx.Error
	cause error
}

func (e *sectionError) Error() string   { return e.at.Error() }
func (e *sectionError) Unwrap() []error { return []error{e.at, e.cause} }

// lineSuffix matches the " (line N)" some loader messages end with.
var lineSuffix = regexp.MustCompile(`\s*\(line (\d+)\)$`)

// streamError restates a stream.ConfigFromNode error. stream names the key path; a line is
// in the message of syntax errors only, so others get the line of the key path's node.
func streamError(sec yamlx.Node, err error) error {
	var ce *stream.ConfigError
	if !errors.As(err, &ce) || ce.Path == "" {
		return &sectionError{at: &yamlx.Error{Path: sec.Path, Line: sec.Line(), Msg: strings.TrimPrefix(err.Error(), "stream: ")}, cause: err}
	}
	msg, line := ce.Msg, 0
	if m := lineSuffix.FindStringSubmatchIndex(msg); m != nil {
		line, _ = strconv.Atoi(msg[m[2]:m[3]])
		msg = msg[:m[0]]
	}
	if line == 0 {
		line = lineOf(sec, ce.Path)
	}
	return &sectionError{at: &yamlx.Error{Path: ce.Path, Line: line, Msg: msg}, cause: err}
}

// cacheError restates a cache.Config.UnmarshalYAML error at its key path and line; an
// error not tied to one key is kept whole at the section's line.
func cacheError(sec yamlx.Node, err error) error {
	var ce *cache.ConfigError
	if !errors.As(err, &ce) {
		return &sectionError{at: &yamlx.Error{Path: sec.Path, Line: sec.Line(), Msg: strings.TrimPrefix(err.Error(), "cache: ")}, cause: err}
	}
	line := ce.Line
	if line == 0 {
		line = lineOf(sec, ce.Path)
	}
	return &sectionError{at: &yamlx.Error{Path: ce.Path, Line: line, Msg: ce.Msg}, cause: err}
}

// lineOf returns the line of the deepest node of path (a dotted path starting with the
// section's name) that the section holds, relaxed key matching; the section's line at
// worst.
func lineOf(sec yamlx.Node, path string) int {
	line, cur := sec.Line(), sec
	for _, seg := range strings.Split(path, ".")[1:] {
		next, _, err := cur.Get(seg)
		if err != nil || !next.Exists() {
			break
		}
		cur, line = next, next.Line()
	}
	return line
}

// NewCache returns a cache.Cache built from c.Cache on Options.Redis (cache.New). The
// client stays the caller's; the caller closes the cache. It returns [ErrNoClient] without
// a client, and cache.New's error for an invalid c.Cache.
func (c *Config) NewCache() (*cache.Cache, error) {
	if c.redis == nil {
		return nil, ErrNoClient
	}
	return cache.New(c.redis, c.Cache)
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
// (stream.NewConsumer); set c.Stream's callbacks (OnError, OnTrimmedWhilePending) before
// calling it. The client stays the caller's; the caller registers handlers, starts and
// closes the consumer. It returns [ErrNoClient] without a client.
func (c *Config) NewConsumer() (*stream.Consumer, error) {
	if c.redis == nil {
		return nil, ErrNoClient
	}
	return stream.NewConsumer(c.redis, c.Stream)
}
