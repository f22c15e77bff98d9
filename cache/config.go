package cache

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/redstream-go/redstream"
)

// Defaults of Config, as in the seed (YAML keys under redis-cache).
const (
	// DefaultName is the default Config.Name (the metrics label).
	DefaultName = "default"
	// DefaultKeyPrefix is the default Config.KeyPrefix (key-prefix).
	DefaultKeyPrefix = "cache:"
	// DefaultEntryTTL is the default Config.DefaultTTL (default-ttl-seconds: 3600).
	DefaultEntryTTL = time.Hour
	// DefaultNullTTL is the default Config.NullTTL (null-ttl-seconds: 60).
	DefaultNullTTL = time.Minute
	// DefaultJitterRatio is the default Config.JitterRatio (jitter-ratio: 0.1).
	DefaultJitterRatio = 0.1
	// DefaultLockTTL is the default BreakdownConfig.LockTTL (breakdown.lock-ttl-ms: 10000).
	DefaultLockTTL = 10 * time.Second
	// DefaultWaitTimeout is the default BreakdownConfig.WaitTimeout
	// (breakdown.wait-timeout-ms: 3000).
	DefaultWaitTimeout = 3 * time.Second
	// DefaultWaitInterval is the default BreakdownConfig.WaitInterval
	// (breakdown.wait-interval-ms: 50).
	DefaultWaitInterval = 50 * time.Millisecond
	// DefaultLocalTTL is the default ClientSideCacheConfig.TTL (client-side-cache.ttl-ms:
	// 60000), the longest a value is served from process memory without asking Redis.
	DefaultLocalTTL = time.Minute
)

// Config configures a Cache. Its fields mirror the seed's YAML keys under redis-cache (given
// with each field); LoadConfig reads them. Fields are taken literally: start from
// DefaultConfig and change what you need, since the zero Config is invalid (zero TTLs are
// rejected, and a zero JitterRatio or a false Breakdown.Enabled switch protections off).
//
// Durations are rounded down to whole milliseconds when sent to Redis; every TTL must be at
// least 1ms.
type Config struct {
	// Name labels the cache's metrics (name="..."); give every cache in a process its own.
	// YAML: name. Default "default".
	Name string
	// KeyPrefix starts every Redis key. YAML: key-prefix. Default "cache:".
	KeyPrefix string
	// EnvIsolation, with a non-empty Env, puts Env between the prefix and the key:
	// KeyPrefix + Env + ":" + key (cache:<env>:<key>), so environments sharing one Redis
	// never see each other's entries. YAML: env-isolation, env. Default false, "".
	EnvIsolation bool
	Env          string
	// DefaultTTL is the TTL of entries written with the DefaultTTL sentinel, and of sliding
	// renewals. YAML: default-ttl-seconds. Default 1h.
	DefaultTTL time.Duration
	// NullTTL is the TTL of a null marker, the cached "not found" of a loader (penetration
	// protection). YAML: null-ttl-seconds. Default 60s.
	NullTTL time.Duration
	// JitterRatio adds a random extra of up to JitterRatio*ttl to every TTL the cache
	// writes (values, null markers, Expire, sliding renewals), so entries written together
	// do not expire together (avalanche protection). 0 disables it; it must be in [0, 1).
	// YAML: jitter-ratio. Default 0.1.
	JitterRatio float64
	// SlidingExpiration renews DefaultTTL (with jitter) when a read finds a real value;
	// null markers are never renewed. With client-side caching, reads answered from
	// process memory do not reach Redis and renew nothing; a read that reaches Redis renews
	// once less than half of DefaultTTL is left. YAML: sliding-expire-enabled. Default false.
	SlidingExpiration bool
	// Breakdown configures the stampede (cache breakdown) protection of GetOrLoad.
	// YAML: breakdown.*.
	Breakdown BreakdownConfig
	// ClientSideCache configures client-side caching. YAML: client-side-cache.*.
	ClientSideCache ClientSideCacheConfig
	// Codec encodes values; nil means JSON. It is not read from YAML.
	Codec Codec
}

// BreakdownConfig configures the stampede protection of GetOrLoad: at most one load per key
// at a time in a process (singleflight), and across processes through a lock held in Redis.
type BreakdownConfig struct {
	// Enabled turns the protection on. When false, GetOrLoad loads on every miss without
	// any coordination. YAML: enabled. Default true.
	Enabled bool
	// LockTTL bounds how long a lock survives its owner (a crashed or hung loader): after it
	// a waiter takes the lock over. Keep it above the slowest load: a load that outlives its
	// lock is returned to its callers but not cached. YAML: lock-ttl-ms. Default 10s.
	LockTTL time.Duration
	// WaitTimeout is how long a caller waits for another process's load before it loads
	// by itself without the lock (a degraded load, counted in the metrics). 0 never waits.
	// YAML: wait-timeout-ms. Default 3s.
	WaitTimeout time.Duration
	// WaitInterval is how often a waiting caller reads the key again.
	// YAML: wait-interval-ms. Default 50ms.
	WaitInterval time.Duration
}

// ClientSideCacheConfig configures client-side caching (rueidis server-assisted
// invalidation): reads keep a copy in process memory that Redis invalidates when any client
// changes the key, so a hot read costs no round trip. It needs a rueidis client with client
// tracking (RESP3, Redis 6+, and ClientOption.DisableCache false); with tracking disabled
// rueidis turns the cached reads into plain reads.
type ClientSideCacheConfig struct {
	// Enabled turns client-side caching on. YAML: enabled. Default false.
	Enabled bool
	// TTL is the longest a copy is served from memory; a copy never outlives the key's own
	// TTL. YAML: ttl-ms. Default 60s.
	TTL time.Duration
}

// DefaultConfig returns the seed's defaults: prefix "cache:", no env isolation, TTL 1h,
// null TTL 60s, jitter 0.1, no sliding expiration, breakdown protection on (lock 10s, wait
// 3s, every 50ms), client-side caching off, JSON.
func DefaultConfig() Config {
	return Config{
		Name:        DefaultName,
		KeyPrefix:   DefaultKeyPrefix,
		DefaultTTL:  DefaultEntryTTL,
		NullTTL:     DefaultNullTTL,
		JitterRatio: DefaultJitterRatio,
		Breakdown: BreakdownConfig{
			Enabled:      true,
			LockTTL:      DefaultLockTTL,
			WaitTimeout:  DefaultWaitTimeout,
			WaitInterval: DefaultWaitInterval,
		},
		ClientSideCache: ClientSideCacheConfig{TTL: DefaultLocalTTL},
	}
}

// Validate reports the first invalid field, wrapped in redstream.ErrInvalidConfig. New calls
// it.
func (c *Config) Validate() error {
	bad := func(field, key, format string, args ...any) error {
		return &ConfigError{Field: field, Path: "redis-cache." + key, Msg: fmt.Sprintf(format, args...)}
	}
	if c.Name == "" {
		return bad("Name", "name", "must not be empty")
	}
	if err := checkTTL(c.DefaultTTL); err != nil {
		return bad("DefaultTTL", "default-ttl-seconds", "%v", err)
	}
	if err := checkTTL(c.NullTTL); err != nil {
		return bad("NullTTL", "null-ttl-seconds", "%v", err)
	}
	if err := checkJitter(c.JitterRatio); err != nil {
		return bad("JitterRatio", "jitter-ratio", "%v", err)
	}
	if err := checkTTL(c.Breakdown.LockTTL); err != nil {
		return bad("Breakdown.LockTTL", "breakdown.lock-ttl-ms", "%v", err)
	}
	if c.Breakdown.WaitTimeout < 0 {
		return bad("Breakdown.WaitTimeout", "breakdown.wait-timeout-ms", "must not be negative, got %v", c.Breakdown.WaitTimeout)
	}
	if c.Breakdown.WaitInterval < time.Millisecond {
		return bad("Breakdown.WaitInterval", "breakdown.wait-interval-ms", "must be at least 1ms, got %v", c.Breakdown.WaitInterval)
	}
	if c.ClientSideCache.Enabled && c.ClientSideCache.TTL < time.Millisecond {
		return bad("ClientSideCache.TTL", "client-side-cache.ttl-ms", "must be at least 1ms, got %v", c.ClientSideCache.TTL)
	}
	return nil
}

func checkTTL(d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("must be positive, got %v", d)
	case d < time.Millisecond:
		return fmt.Errorf("must be at least 1ms (Redis counts milliseconds), got %v", d)
	}
	return nil
}

func checkJitter(r float64) error {
	if !(r >= 0 && r < 1) { // also rejects NaN
		return fmt.Errorf("must be in [0, 1), got %v", r)
	}
	return nil
}

// LoadConfig reads a Config from a YAML document, starting from DefaultConfig: keys under
// the top-level redis-cache mapping override the defaults, other top-level keys are ignored
// (so a whole application config file can be passed), and a document without redis-cache
// yields the defaults. Keys are matched as Spring's relaxed binding does: key-prefix,
// keyPrefix and key_prefix are one key. An unknown key, a duplicate, a value of the wrong
// type or out of range is an error naming the key's path and line; every error wraps
// redstream.ErrInvalidConfig.
//
//	redis-cache:
//	  key-prefix: "cache:"
//	  env-isolation: false
//	  env: ""
//	  default-ttl-seconds: 3600
//	  null-ttl-seconds: 60
//	  jitter-ratio: 0.1
//	  sliding-expire-enabled: false
//	  breakdown:
//	    enabled: true
//	    lock-ttl-ms: 10000
//	    wait-timeout-ms: 3000
//	    wait-interval-ms: 50
//	  client-side-cache:      # beyond the seed
//	    enabled: false
//	    ttl-ms: 60000
//	  name: default           # beyond the seed: the metrics label
func LoadConfig(data []byte) (Config, error) {
	cfg := DefaultConfig()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cfg, configErrorf("cache: config: %v", err)
	}
	if len(doc.Content) == 0 {
		return cfg, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		if root.Tag == "!!null" {
			return cfg, nil
		}
		return cfg, configErrorf("cache: config (line %d): the document must be a mapping", root.Line)
	}
	var node *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if normalize(root.Content[i].Value) == "rediscache" {
			if node != nil {
				return cfg, &ConfigError{Path: "redis-cache", Line: root.Content[i].Line, Msg: "given twice"}
			}
			node = root.Content[i+1]
		}
	}
	if node == nil {
		return cfg, nil
	}
	if err := cfg.decode(node, "redis-cache"); err != nil {
		return DefaultConfig(), err
	}
	return cfg, nil
}

// UnmarshalYAML decodes the mapping found under redis-cache, as LoadConfig does: it starts
// from DefaultConfig (keeping the receiver's Codec), so keys left out keep their defaults.
// It lets a larger configuration struct embed a Config:
//
//	type AppConfig struct {
//		Cache cache.Config `yaml:"redis-cache"`
//	}
//
// yaml.v3 calls it only when the key is present; initialize the field with DefaultConfig
// for documents that may leave it out.
func (c *Config) UnmarshalYAML(value *yaml.Node) error {
	cfg := DefaultConfig()
	cfg.Codec = c.Codec
	if err := cfg.decode(value, "redis-cache"); err != nil {
		return err
	}
	*c = cfg
	return nil
}

// normalize folds a key as Spring's relaxed binding does: case, '-' and '_' do not matter.
func normalize(key string) string {
	key = strings.ToLower(key)
	return strings.NewReplacer("-", "", "_", "").Replace(key)
}

// yamlField decodes one key's value into the Config.
type yamlField func(c *Config, d *decoder) error

var (
	rootFields = map[string]yamlField{
		"name":      func(c *Config, d *decoder) error { return d.str(&c.Name) },
		"keyprefix": func(c *Config, d *decoder) error { return d.str(&c.KeyPrefix) },
		"envisolation": func(c *Config, d *decoder) error {
			return d.boolean(&c.EnvIsolation)
		},
		"env":                  func(c *Config, d *decoder) error { return d.str(&c.Env) },
		"defaultttlseconds":    func(c *Config, d *decoder) error { return d.duration(&c.DefaultTTL, time.Second, true) },
		"nullttlseconds":       func(c *Config, d *decoder) error { return d.duration(&c.NullTTL, time.Second, true) },
		"jitterratio":          func(c *Config, d *decoder) error { return d.ratio(&c.JitterRatio) },
		"slidingexpireenabled": func(c *Config, d *decoder) error { return d.boolean(&c.SlidingExpiration) },
		"breakdown": func(c *Config, d *decoder) error {
			return d.mapping(c, breakdownFields)
		},
		"clientsidecache": func(c *Config, d *decoder) error {
			return d.mapping(c, clientSideFields)
		},
	}
	breakdownFields = map[string]yamlField{
		"enabled":   func(c *Config, d *decoder) error { return d.boolean(&c.Breakdown.Enabled) },
		"lockttlms": func(c *Config, d *decoder) error { return d.duration(&c.Breakdown.LockTTL, time.Millisecond, true) },
		"waittimeoutms": func(c *Config, d *decoder) error {
			return d.duration(&c.Breakdown.WaitTimeout, time.Millisecond, false)
		},
		"waitintervalms": func(c *Config, d *decoder) error {
			return d.duration(&c.Breakdown.WaitInterval, time.Millisecond, true)
		},
	}
	clientSideFields = map[string]yamlField{
		"enabled": func(c *Config, d *decoder) error { return d.boolean(&c.ClientSideCache.Enabled) },
		"ttlms":   func(c *Config, d *decoder) error { return d.duration(&c.ClientSideCache.TTL, time.Millisecond, true) },
	}
)

// decoder is the position of one value being decoded.
type decoder struct {
	node *yaml.Node
	path string
}

func (d *decoder) errorf(format string, args ...any) error {
	return &ConfigError{Path: d.path, Line: d.node.Line, Msg: fmt.Sprintf(format, args...)}
}

// null reports whether the value is empty (key: or key: ~), which keeps the default.
func (d *decoder) null() bool { return d.node.Kind == yaml.ScalarNode && d.node.Tag == "!!null" }

func (d *decoder) scalar() error {
	if d.node.Kind == yaml.AliasNode && d.node.Alias != nil {
		d.node = d.node.Alias
	}
	if d.node.Kind != yaml.ScalarNode {
		return d.errorf("want a single value, got a %s", nodeKind(d.node.Kind))
	}
	return nil
}

func (d *decoder) str(dst *string) error {
	if err := d.scalar(); err != nil || d.null() {
		return err
	}
	*dst = d.node.Value
	return nil
}

func (d *decoder) boolean(dst *bool) error {
	if err := d.scalar(); err != nil || d.null() {
		return err
	}
	var b bool
	if d.node.Tag != "!!bool" || d.node.Decode(&b) != nil {
		return d.errorf("want true or false, got %q", d.node.Value)
	}
	*dst = b
	return nil
}

// duration reads an integer count of unit. positive requires > 0, else >= 0.
func (d *decoder) duration(dst *time.Duration, unit time.Duration, positive bool) error {
	if err := d.scalar(); err != nil || d.null() {
		return err
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(d.node.Value, "_", ""), 10, 64)
	if err != nil || d.node.Tag != "!!int" {
		return d.errorf("want an integer, got %q", d.node.Value)
	}
	switch {
	case positive && n <= 0:
		return d.errorf("must be positive, got %d", n)
	case n < 0:
		return d.errorf("must not be negative, got %d", n)
	case n > math.MaxInt64/int64(unit):
		return d.errorf("too large: %d", n)
	}
	*dst = time.Duration(n) * unit
	return nil
}

func (d *decoder) ratio(dst *float64) error {
	if err := d.scalar(); err != nil || d.null() {
		return err
	}
	var f float64
	if (d.node.Tag != "!!float" && d.node.Tag != "!!int") || d.node.Decode(&f) != nil {
		return d.errorf("want a number, got %q", d.node.Value)
	}
	if err := checkJitter(f); err != nil {
		return d.errorf("%v", err)
	}
	*dst = f
	return nil
}

// mapping decodes the mapping at d with the given fields.
func (d *decoder) mapping(c *Config, fields map[string]yamlField) error {
	if d.node.Kind == yaml.AliasNode && d.node.Alias != nil {
		d.node = d.node.Alias
	}
	if d.null() {
		return nil
	}
	if d.node.Kind != yaml.MappingNode {
		return d.errorf("want a mapping, got a %s", nodeKind(d.node.Kind))
	}
	seen := make(map[string]string, len(d.node.Content)/2)
	for i := 0; i+1 < len(d.node.Content); i += 2 {
		k, v := d.node.Content[i], d.node.Content[i+1]
		path := d.path + "." + k.Value
		n := normalize(k.Value)
		if prev, dup := seen[n]; dup {
			return &ConfigError{Path: path, Line: k.Line, Msg: fmt.Sprintf("same key as %s.%s", d.path, prev)}
		}
		seen[n] = k.Value
		f, ok := fields[n]
		if !ok {
			return &ConfigError{Path: path, Line: k.Line, Msg: "unknown key"}
		}
		if err := f(c, &decoder{node: v, path: path}); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) decode(node *yaml.Node, path string) error {
	d := &decoder{node: node, path: path}
	if err := d.mapping(c, rootFields); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		// Cross-field and Go-only checks; the per-key checks above name the YAML line.
		return err
	}
	return nil
}

func nodeKind(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.ScalarNode:
		return "value"
	}
	return "node"
}

var _ yaml.Unmarshaler = (*Config)(nil)

// ConfigError is an invalid configuration value, returned by LoadConfig, UnmarshalYAML and
// Validate. It matches redstream.ErrInvalidConfig with errors.Is.
type ConfigError struct {
	// Field is the Config field at fault (Validate), or "" for a YAML error.
	Field string
	// Path is the YAML key path, e.g. "redis-cache.jitter-ratio".
	Path string
	// Line is the line of the value in the YAML document, 0 when not from YAML.
	Line int
	// Msg says what is wrong, e.g. "must be in [0, 1), got 2".
	Msg string
}

// Error returns "cache: <path> (line N): <msg>" for a YAML value, or
// "cache: <Field> (<path>) <msg>" for a field Validate rejected.
func (e *ConfigError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("cache: %s (%s) %s", e.Field, e.Path, e.Msg)
	}
	return fmt.Sprintf("cache: %s (line %d): %s", e.Path, e.Line, e.Msg)
}

// Unwrap returns redstream.ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return redstream.ErrInvalidConfig }

// configError is any other invalid configuration (not tied to one key): its message starts
// with "cache: " and it wraps redstream.ErrInvalidConfig.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return redstream.ErrInvalidConfig }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}
