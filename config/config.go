package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/stream"
)

// Options says how to read a configuration file and build what it describes. The zero
// value is valid: strict reading, profiles from SPRING_PROFILES_ACTIVE, placeholders from
// the process environment, no Redis client (Redis backends fall back to memory with a
// warning), warnings to slog.Default(), default memory engines.
type Options struct {
	// Redis is the client of every Redis-backed component: Redis limiters, and the cache,
	// producer and consumer of Config.NewCache, NewProducer and NewConsumer. Nil makes
	// "backend: redis" fall back to memory with a warning, as the Java starter does without
	// a RedissonClient, and makes those builders return ErrNoClient. The client stays the
	// caller's: nothing built here closes it. To build it from the file's spring.data.redis
	// section, load once without it and call Config.Redis.ClientOption.
	Redis rueidis.Client
	// Logger receives the warnings (fallbacks; in lenient mode every tolerated mistake,
	// each saying what is used instead), and is the Logger of the cache and consumer that
	// Config.NewCache and NewConsumer build when their config sets none. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Memory configures every in-process engine (clock, shards, sweeping).
	Memory memory.Options
	// Lenient restores the Java starter's warn-and-default behaviour, for migrations:
	// unknown keys, unknown algorithm names, a default-name naming no policy (or none set
	// while no policy is named "default"), policies without enabled: true, keys that do
	// not apply to a policy's algorithm, spring.redis next to spring.data.redis,
	// ssl.bundle and the legacy spring.profiles key are warnings, each saying what is used
	// instead, rather than errors. Values that cannot be read (wrong types, out of range,
	// unresolvable placeholders) are errors in both modes, as they fail a Spring
	// application's start.
	Lenient bool
	// Profiles are the active profiles, selecting the documents whose
	// spring.config.activate.on-profile matches. Nil means SPRING_PROFILES_ACTIVE (a
	// comma-separated list), else spring.profiles.active of the file; with none, the
	// profile "default" is active, as in Spring Boot. An empty non-nil slice also falls
	// back to "default" but ignores the environment and the file.
	Profiles []string
	// Getenv looks up environment variables: those of ${NAME} placeholders, of
	// SPRING_PROFILES_ACTIVE, and those that override keys as in Spring Boot (the key path
	// upper case, '.' as '_', '-' dropped: REDISSTREAM_READCOUNT for redis-stream.read-count,
	// SPRING_DATA_REDIS_HOST for spring.data.redis.host). Nil means os.LookupEnv.
	Getenv func(name string) (string, bool)
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
	// Profiles are the active profiles the file was read with ("default" when none).
	Profiles []string
	// RateLimit is built from redis-streaming.ratelimit. It is never nil, nor are its
	// Registry and Default.
	RateLimit *RateLimit
	// Stream is redis-stream, bound to stream.Config's fields, validated by
	// stream.Config.Validate, with every key the file does not set at stream's default
	// (Config.WithDefaults); without the section it is all defaults.
	Stream stream.Config
	// Cache is redis-cache, bound onto cache.DefaultConfig() and validated by
	// cache.Config.Validate; without the section it is cache.DefaultConfig().
	Cache cache.Config
	// Redis is spring.data.redis (or, for Spring Boot 2 files, spring.redis): the
	// connection settings of the Java application, turned into a rueidis.ClientOption by
	// RedisSettings.ClientOption.
	Redis RedisSettings
	// Idempotency is redis-idempotency: the options of an idempotency.Idempotent
	// (Config.NewIdempotent) and of the httpidem middleware under http, validated by
	// idempotency.Options.Validate; without the section they are the zero (default) ones.
	Idempotency IdempotencySettings

	redis  rueidis.Client
	logger *slog.Logger // Options.Logger, for the components built here
}

// Load parses a YAML file (one or more documents) and builds what it describes: every
// section, each absent one with its defaults. Errors name the setting and its line
// (*yamlx.Error) and match redstream.ErrInvalidConfig under errors.Is; errors found by
// stream's or cache's Validate also unwrap to their *stream.ConfigError or
// *cache.ConfigError. Warnings go to opts.Logger.
func Load(data []byte, opts Options) (*Config, error) {
	docs, err := yamlx.ParseDocuments(data)
	if err != nil {
		return nil, invalid(err)
	}
	return load(docs, len(data), opts)
}

// LoadProperties parses a .properties file (Spring Boot's application.properties: dotted
// keys, "#---" between documents) and builds what it describes, exactly as [Load] does for
// the same settings written in YAML.
func LoadProperties(data []byte, opts Options) (*Config, error) {
	docs, err := yamlx.ParseProperties(data)
	if err != nil {
		return nil, invalid(err)
	}
	return load(docs, len(data), opts)
}

// FromConfig reads the file at path and builds what it describes: a ".properties" file as
// [LoadProperties] does, any other as YAML ([Load]).
func FromConfig(path string, opts Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".properties") {
		return LoadProperties(data, opts)
	}
	return Load(data, opts)
}

// loader reads the sections of one file.
type loader struct {
	opts    Options
	log     *slog.Logger
	getenv  func(string) (string, bool)
	fromEnv map[string]string // key path -> the environment variable its value came from
}

func (l *loader) warn(n yamlx.Node, msg string) {
	l.log.Warn("config: "+msg, "key", n.Path, "line", n.Line())
}

// strict returns the error at n in strict mode, nil in lenient mode (the caller warns).
func (l *loader) strict(n yamlx.Node, format string, args ...any) error {
	if l.opts.Lenient {
		return nil
	}
	return n.Errorf(format, args...)
}

func (l *loader) bindOptions() yamlx.BindOptions {
	return yamlx.BindOptions{Lenient: l.opts.Lenient, Warn: l.warn, Getenv: l.getenv, Parse: parsers,
		FromEnv: func(path, name string) { l.fromEnv[path] = name }}
}

func load(docs []yamlx.Node, size int, opts Options) (*Config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	l := &loader{opts: opts, log: opts.logger(), getenv: getenv, fromEnv: map[string]string{}}
	ld, err := yamlx.Load(docs, yamlx.LoadOptions{Profiles: opts.Profiles, Getenv: getenv, Lenient: opts.Lenient, Warn: l.warn, InputSize: size})
	if err != nil {
		return nil, invalid(err)
	}
	root := ld.Root
	// Every section is read and checked, and their errors reported together in file order;
	// the limiters are built only from a file without errors.
	errs := []error{l.checkRoot(root)}
	st, err := l.loadStream(root)
	errs = append(errs, err)
	ca, err := l.loadCache(root)
	errs = append(errs, err)
	rs, err := l.loadRedis(root)
	errs = append(errs, err)
	idem, err := l.loadIdempotency(root)
	errs = append(errs, err)
	plan, err := l.planRateLimit(root)
	errs = append(errs, err)
	if err := yamlx.Join(errs); err != nil {
		return nil, invalid(err)
	}
	rl := plan.rl
	if rl == nil {
		if rl, err = l.buildRateLimit(plan); err != nil {
			return nil, invalid(err)
		}
	}
	return &Config{Profiles: ld.Profiles, RateLimit: rl, Stream: st, Cache: ca, Redis: rs, Idempotency: idem, redis: opts.Redis, logger: opts.Logger}, nil
}

// checkRoot rejects unknown keys under redis-streaming (this library's prefix; it holds
// ratelimit only) and top-level keys one or two letters away from a section name (a
// warning in lenient mode): the section would otherwise be ignored without a word.
func (l *loader) checkRoot(root yamlx.Node) error {
	sec, err := section(root, "redis-streaming")
	if err != nil {
		return err
	}
	var prefix struct {
		RateLimit yamlx.Node `yaml:"ratelimit"`
	}
	if err := yamlx.Bind(sec, &prefix, l.bindOptions()); err != nil {
		return err
	}
	entries, _ := root.Entries()
	var errs []error
	for _, e := range entries {
		if near := yamlx.Near(e.Name(), "redis-streaming", StreamPath, CachePath, IdempotencyPath); near != "" && e.Name() != near {
			msg := fmt.Sprintf("top-level key %q is not read; did you mean %s?", e.Name(), near)
			if err := l.strict(e, "%s", msg); err != nil {
				errs = append(errs, err)
				continue
			}
			l.warn(e, msg)
		}
	}
	return yamlx.Join(errs)
}

// loadError is an error of a file: its message is the *yamlx.Error's, and it matches
// redstream.ErrInvalidConfig (and the error of the package that rejected the value).
type loadError struct {
	err   error
	cause error
}

func (e *loadError) Error() string { return e.err.Error() }

func (e *loadError) Unwrap() []error {
	out := []error{e.err, redstream.ErrInvalidConfig}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

func invalid(err error) error {
	var le *loadError
	if errors.As(err, &le) {
		return err
	}
	return &loadError{err: err}
}
