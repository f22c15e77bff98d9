package config

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// RateLimitPath is the section RateLimit is built from.
const RateLimitPath = "redis-streaming.ratelimit"

// Defaults of the redis-streaming.ratelimit section, those of the Java starter.
const (
	DefaultBackend       = "memory"
	DefaultWindowMs      = 1000
	DefaultLimit         = 100
	DefaultKeyPrefix     = "streaming:rl"
	DefaultName          = "default"
	DefaultAlgorithm     = redstream.AlgorithmSlidingWindow
	DefaultCapacity      = 100.0
	DefaultRatePerSecond = 100.0
)

// Backends.
const (
	BackendMemory = "memory"
	BackendRedis  = "redis"
)

// RateLimit is what the redis-streaming.ratelimit section built. Every field is usable:
// Registry and Default are never nil.
type RateLimit struct {
	// Settings are the section's values after defaults.
	Settings RateLimitSettings
	// Registry holds one metrics.NamedLimiter per policy (or, without policies, the
	// single default limiter under DefaultName). Empty when the section is not enabled.
	Registry *redstream.Registry
	// Default is the default limiter: the policy named default-name (or, without policies,
	// the single limiter). It is never nil: when the section is not enabled it admits
	// every request (rate limiting is off); when policies exist but default-name is not set
	// and none is named "default", every call returns [ErrNoDefault] (in lenient mode the
	// first policy by name is used instead, with a warning).
	Default redstream.Limiter
	// DefaultName is the name Default is registered under ("" when it is not a policy).
	DefaultName string
}

// RateLimitSettings are the values of redis-streaming.ratelimit (keys in parentheses).
type RateLimitSettings struct {
	// Enabled (enabled, default false) builds the limiters; when false nothing is built,
	// as the Java starter's auto-configuration is off.
	Enabled bool
	// Backend (backend, default "memory") is "memory" or "redis"; policies without a
	// backend of their own use it.
	Backend string
	// WindowMs (window-ms, default 1000) and Limit (limit, default 100) define the single
	// sliding-window limiter built when there are no policies.
	WindowMs int64
	Limit    int64
	// KeyPrefix (key-prefix, default "streaming:rl") starts the Redis keys of the single
	// limiter; a Redis policy without its own key-prefix uses KeyPrefix + ":" + its name.
	KeyPrefix string
	// DefaultName (default-name, default "default") names the default limiter. With
	// policies it must name one of them (in lenient mode: else the first by name).
	DefaultName string
	// FailurePolicy (failure-policy, default fail-closed; redstream's addition) is what
	// Redis limiters do when Redis fails: "fail-closed", "fail-open" or "fallback" (decide
	// with an in-process limiter of the same spec). Policies may override it.
	FailurePolicy redstream.FailurePolicy
	// Redis (timeout-ms, breaker.*, java-compatible, local-denials; redstream's
	// additions) configures the Redis limiters' deadline, circuit breaker and key layout;
	// policies may override each key.
	Redis RedisLimiterSettings
	// Policies (policies.<name>) in document order.
	Policies []PolicySettings
}

// PolicySettings are the values of one redis-streaming.ratelimit.policies.<name> entry.
type PolicySettings struct {
	// Name is the policy's key under policies, as written.
	Name string
	// Algorithm (algorithm, default sliding): sliding, token-bucket, leaky-bucket, and
	// redstream's fixed and sliding-counter. An unknown name is an error (lenient mode:
	// a warning, and sliding).
	Algorithm redstream.Algorithm
	// Backend (backend): memory or redis; default the section's backend.
	Backend string
	// WindowMs (window-ms, default 1000) and Limit (limit, default 100) configure the
	// window algorithms.
	WindowMs int64
	Limit    int64
	// Capacity (capacity, default 100) and RatePerSecond (rate-per-second, default 100)
	// configure the buckets.
	Capacity      float64
	RatePerSecond float64
	// KeyPrefix (key-prefix) of a Redis policy; default the section's key-prefix + ":" +
	// Name.
	KeyPrefix string
	// FailurePolicy (failure-policy); default the section's.
	FailurePolicy redstream.FailurePolicy
	// Redis (timeout-ms, breaker.*, java-compatible, local-denials) of a Redis policy;
	// each key defaults to the section's.
	Redis RedisLimiterSettings
	// Limits (limits.<name>, redstream's addition) makes the policy a multi-limit: every
	// request must pass every limit, all-or-nothing. Each limit takes algorithm, window-ms,
	// limit, capacity and rate-per-second; the policy's backend, key-prefix,
	// failure-policy and Redis keys apply to all of them.
	Limits []PolicySettings
}

// Spec returns the policy's limiter spec (of a single-limit policy).
func (p PolicySettings) Spec() redstream.Spec {
	switch p.Algorithm {
	case redstream.AlgorithmTokenBucket:
		return redstream.TokenBucket(p.Capacity, p.RatePerSecond)
	case redstream.AlgorithmLeakyBucket:
		return redstream.LeakyBucket(p.Capacity, p.RatePerSecond)
	}
	return redstream.Spec{Algorithm: p.Algorithm, Window: time.Duration(p.WindowMs) * time.Millisecond, Limit: p.Limit}
}

// The section as bound from the file. Ranges are checked by redstream.Spec.Params.
type (
	limitYAML struct {
		Algorithm     string  `yaml:"algorithm"`
		WindowMs      int64   `yaml:"window-ms" default:"1000"`
		Limit         int64   `yaml:"limit" default:"100"`
		Capacity      float64 `yaml:"capacity" default:"100"`
		RatePerSecond float64 `yaml:"rate-per-second" default:"100"`
	}
	policyYAML struct {
		limitYAML
		Backend       string     `yaml:"backend"`
		KeyPrefix     string     `yaml:"key-prefix"`
		FailurePolicy string     `yaml:"failure-policy"`
		Limits        yamlx.Node `yaml:"limits"`
		limiterRedisYAML
	}
	sectionYAML struct {
		Enabled       *bool      `yaml:"enabled"`
		Backend       string     `yaml:"backend" default:"memory"`
		WindowMs      int64      `yaml:"window-ms" default:"1000"`
		Limit         int64      `yaml:"limit" default:"100"`
		KeyPrefix     string     `yaml:"key-prefix" default:"streaming:rl"`
		DefaultName   string     `yaml:"default-name"`
		FailurePolicy string     `yaml:"failure-policy"`
		Policies      yamlx.Node `yaml:"policies"`
		limiterRedisYAML
	}
)

// algorithms maps relaxed algorithm names to algorithms.
var algorithms = map[string]redstream.Algorithm{
	"sliding":        redstream.AlgorithmSlidingWindow,
	"slidingwindow":  redstream.AlgorithmSlidingWindow,
	"slidinglog":     redstream.AlgorithmSlidingWindow,
	"tokenbucket":    redstream.AlgorithmTokenBucket,
	"leakybucket":    redstream.AlgorithmLeakyBucket,
	"fixed":          redstream.AlgorithmFixedWindow,
	"fixedwindow":    redstream.AlgorithmFixedWindow,
	"slidingcounter": redstream.AlgorithmSlidingCounter,
}

const algorithmNames = "sliding, token-bucket, leaky-bucket, fixed or sliding-counter"

func isBucket(a redstream.Algorithm) bool {
	return a == redstream.AlgorithmTokenBucket || a == redstream.AlgorithmLeakyBucket
}

func (l *loader) loadRateLimit(root yamlx.Node) (*RateLimit, error) {
	sec, err := section(root, RateLimitPath)
	if err != nil {
		return nil, err
	}
	s, nodes, err := l.section(sec)
	if err != nil {
		return nil, err
	}
	empty, _ := redstream.NewRegistry(nil)
	rl := &RateLimit{Settings: s, Registry: empty, Default: allowAll{}}
	if !s.Enabled {
		if len(s.Policies) > 0 {
			pol, _, _ := sec.Get("policies")
			why := "enabled is missing"
			if en, ok, _ := sec.Get("enabled"); ok {
				why = fmt.Sprintf("enabled is false (line %d)", en.Line())
			}
			if err := l.strict(pol, "policies are set but %s, so none would be built; set enabled: true, or remove the policies", why); err != nil {
				return nil, err
			}
			l.warn(pol, fmt.Sprintf("policies are set but %s; no limiter is built and Default admits every request", why))
		}
		return rl, nil
	}
	if err := l.checkRedisSection(sec, s); err != nil {
		return nil, err
	}
	defaultName := s.DefaultName
	noDefault := false
	if len(s.Policies) > 0 && !slices.ContainsFunc(s.Policies, func(p PolicySettings) bool { return p.Name == defaultName }) {
		names := make([]string, len(s.Policies))
		for i, p := range s.Policies {
			names[i] = p.Name
		}
		slices.Sort(names)
		dn, set, _ := sec.Get("default-name")
		switch {
		case set:
			what := fmt.Sprintf("default-name %q names no policy", defaultName)
			if err := l.strict(dn, "%s; set it to one of: %s", what, strings.Join(names, ", ")); err != nil {
				return nil, err
			}
			l.warn(dn, fmt.Sprintf("%s; using %q, the first policy by name", what, names[0]))
			defaultName = names[0]
		case l.opts.Lenient:
			pol, _, _ := sec.Get("policies")
			l.warn(pol, fmt.Sprintf("default-name is not set and no policy is named %q; using %q, the first policy by name", DefaultName, names[0]))
			defaultName = names[0]
		default:
			// The file is valid (limiters are looked up by name); Default says what is
			// missing when called.
			noDefault = true
		}
	}
	b := builder{opts: l.opts, l: l}
	limiters := map[string]redstream.Limiter{}
	if len(s.Policies) == 0 {
		single := PolicySettings{
			Name: s.DefaultName, Algorithm: DefaultAlgorithm, Backend: s.Backend,
			WindowMs: s.WindowMs, Limit: s.Limit, KeyPrefix: s.KeyPrefix, FailurePolicy: s.FailurePolicy, Redis: s.Redis,
		}
		if err := l.checkSpec(sec, single); err != nil {
			return nil, err
		}
		lim, err := b.build(single, sec)
		if err != nil {
			return nil, err
		}
		limiters[s.DefaultName] = lim
	}
	prefixes := map[string]int{} // Redis key prefix -> index of the policy using it
	for i, p := range s.Policies {
		if p.Backend == BackendRedis {
			if j, dup := prefixes[p.KeyPrefix]; dup && !sameLimits(s.Policies[j], p) {
				return nil, nodes[i].Errorf("key-prefix %q is also used by policy %q with other limits; their Redis keys would collide", p.KeyPrefix, s.Policies[j].Name)
			}
			prefixes[p.KeyPrefix] = i
		}
		lim, err := b.build(p, nodes[i])
		if err != nil {
			return nil, err
		}
		limiters[p.Name] = lim
	}
	if rl.Registry, err = redstream.NewRegistry(limiters); err != nil {
		return nil, sec.Errorf("%v", err)
	}
	if noDefault {
		rl.Default = errLimiter{ErrNoDefault}
		return rl, nil
	}
	rl.Default, _ = rl.Registry.Get(defaultName)
	rl.DefaultName = defaultName
	rl.Settings.DefaultName = defaultName
	return rl, nil
}

// ErrNoDefault is returned by RateLimit.Default when the section has policies, no
// default-name and no policy named "default": there is no default limiter to decide with.
// The policies themselves are in RateLimit.Registry. It matches redstream.ErrInvalidConfig.
var ErrNoDefault = fmt.Errorf("%w: config: no default limiter: redis-streaming.ratelimit.default-name is not set and no policy is named %q", redstream.ErrInvalidConfig, DefaultName)

// errLimiter is a Default that cannot decide: every call returns err.
type errLimiter struct{ err error }

func (e errLimiter) Allow(context.Context, string) (redstream.Decision, error) {
	return redstream.Decision{}, e.err
}

func (e errLimiter) AllowAt(context.Context, string, time.Time) (redstream.Decision, error) {
	return redstream.Decision{}, e.err
}

func (e errLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return redstream.Decision{}, e.err
}

// allowAll is Default when rate limiting is off: it admits every valid request.
type allowAll struct{}

func (allowAll) Allow(ctx context.Context, key string) (redstream.Decision, error) {
	return allowAll{}.AllowN(ctx, key, time.Time{}, 1)
}

func (allowAll) AllowAt(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	return allowAll{}.AllowN(ctx, key, now, 1)
}

func (allowAll) AllowN(_ context.Context, key string, _ time.Time, n int64) (redstream.Decision, error) {
	switch {
	case key == "":
		return redstream.Decision{}, redstream.ErrEmptyKey
	case n <= 0:
		return redstream.Decision{}, redstream.ErrInvalidCost
	}
	return redstream.Decision{Allowed: true}, nil
}

// sameLimits reports whether two policies apply the same limits.
func sameLimits(a, b PolicySettings) bool {
	if len(a.Limits) != len(b.Limits) || a.Spec() != b.Spec() {
		return false
	}
	for i := range a.Limits {
		if a.Limits[i].Spec() != b.Limits[i].Spec() {
			return false
		}
	}
	return true
}

// section reads the section's settings; nodes holds the node of each policy.
func (l *loader) section(sec yamlx.Node) (RateLimitSettings, []yamlx.Node, error) {
	var y sectionYAML
	if err := yamlx.Bind(sec, &y, l.bindOptions()); err != nil {
		return RateLimitSettings{}, nil, err
	}
	s := RateLimitSettings{
		Enabled: y.Enabled != nil && *y.Enabled, WindowMs: y.WindowMs, Limit: y.Limit,
		KeyPrefix: y.KeyPrefix, DefaultName: y.DefaultName,
	}
	var err error
	if s.Backend, err = l.backend(sec, y.Backend, DefaultBackend); err != nil {
		return s, nil, err
	}
	if s.KeyPrefix, err = l.keyPrefix(sec, y.KeyPrefix, DefaultKeyPrefix); err != nil {
		return s, nil, err
	}
	if strings.TrimSpace(s.DefaultName) == "" {
		s.DefaultName = DefaultName
	}
	if s.FailurePolicy, err = l.failurePolicy(sec, y.FailurePolicy, redstream.FailClosed); err != nil {
		return s, nil, err
	}
	if s.Redis, err = l.redisSettings(sec, y.limiterRedisYAML, DefaultRedisLimiterSettings()); err != nil {
		return s, nil, err
	}
	entries, err := y.Policies.Entries()
	if err != nil {
		return s, nil, err
	}
	var nodes []yamlx.Node
	for _, e := range entries {
		p, err := l.policy(e, sec, s)
		if err != nil {
			return s, nil, err
		}
		s.Policies = append(s.Policies, p)
		nodes = append(nodes, e)
	}
	return s, nodes, nil
}

func (l *loader) policy(n, sec yamlx.Node, s RateLimitSettings) (PolicySettings, error) {
	p := PolicySettings{Name: n.Name()}
	if strings.TrimSpace(p.Name) == "" {
		return p, n.Errorf("a policy needs a name")
	}
	if n.IsNull() {
		return p, n.Errorf("must be a mapping of the policy's settings")
	}
	var y policyYAML
	if err := yamlx.Bind(n, &y, l.bindOptions()); err != nil {
		return p, err
	}
	var err error
	if p.Backend, err = l.backend(n, y.Backend, s.Backend); err != nil {
		return p, err
	}
	if p.KeyPrefix, err = l.keyPrefix(n, y.KeyPrefix, s.KeyPrefix+":"+p.Name); err != nil {
		return p, err
	}
	if p.FailurePolicy, err = l.failurePolicy(n, y.FailurePolicy, s.FailurePolicy); err != nil {
		return p, err
	}
	if p.Redis, err = l.redisSettings(n, y.limiterRedisYAML, s.Redis); err != nil {
		return p, err
	}
	entries, err := y.Limits.Entries()
	if err != nil {
		return p, err
	}
	if y.Limits.Exists() && !y.Limits.IsNull() {
		if len(entries) == 0 {
			return p, y.Limits.Errorf("must list at least one limit")
		}
		for _, key := range []string{"algorithm", "window-ms", "limit", "capacity", "rate-per-second"} {
			if v, ok, _ := n.Get(key); ok {
				if err := l.strict(v, "does not apply to a policy with limits (each limit sets its own); move it into a limit"); err != nil {
					return p, err
				}
				l.warn(v, "does not apply to a policy with limits; ignored")
			}
		}
		for _, e := range entries {
			if e.IsNull() {
				return p, e.Errorf("must be a mapping of the limit's settings")
			}
			var ly limitYAML
			if err := yamlx.Bind(e, &ly, l.bindOptions()); err != nil {
				return p, err
			}
			lim := PolicySettings{Name: e.Name(), Backend: p.Backend, KeyPrefix: p.KeyPrefix, FailurePolicy: p.FailurePolicy, Redis: p.Redis}
			if err := l.limitFields(e, ly, &lim); err != nil {
				return p, err
			}
			p.Limits = append(p.Limits, lim)
		}
		return p, l.checkRedisPolicy(n, sec, p)
	}
	if err := l.limitFields(n, y.limitYAML, &p); err != nil {
		return p, err
	}
	return p, l.checkRedisPolicy(n, sec, p)
}

// limitFields sets the algorithm and its parameters of p from y and checks the spec.
func (l *loader) limitFields(n yamlx.Node, y limitYAML, p *PolicySettings) error {
	p.Algorithm = DefaultAlgorithm
	p.WindowMs, p.Limit, p.Capacity, p.RatePerSecond = y.WindowMs, y.Limit, y.Capacity, y.RatePerSecond
	if a, ok, _ := n.Get("algorithm"); ok {
		alg, known := algorithms[yamlx.Normalize(strings.TrimSpace(y.Algorithm))]
		if !known {
			if err := l.strict(a, "unknown algorithm %q; want %s", y.Algorithm, algorithmNames); err != nil {
				return err
			}
			l.warn(a, fmt.Sprintf("unknown algorithm %q; using sliding (window-ms %d, limit %d)", y.Algorithm, p.WindowMs, p.Limit))
			alg = DefaultAlgorithm
		}
		p.Algorithm = alg
	}
	// Keys of the other family of algorithms would be silently ignored.
	other := []string{"capacity", "rate-per-second"}
	uses := "window-ms and limit"
	if isBucket(p.Algorithm) {
		other, uses = []string{"window-ms", "limit"}, "capacity and rate-per-second"
	}
	for _, key := range other {
		if v, ok, _ := n.Get(key); ok {
			if err := l.strict(v, "does not apply to the %s algorithm, which uses %s", p.Algorithm, uses); err != nil {
				return err
			}
			l.warn(v, fmt.Sprintf("does not apply to the %s algorithm; ignored", p.Algorithm))
		}
	}
	return l.checkSpec(n, *p)
}

// checkSpec validates the policy's spec (redstream.Spec.Params, the engines' own check) and
// reports an error at the key it is about.
func (l *loader) checkSpec(n yamlx.Node, p PolicySettings) error {
	if !isBucket(p.Algorithm) && p.WindowMs > maxWindowMs {
		return l.at(n, "window-ms", "is too large: %d ms (at most %d)", p.WindowMs, maxWindowMs)
	}
	_, err := p.Spec().Core()
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "redstream: invalid configuration: ")
	key := ""
	switch {
	case isBucket(p.Algorithm) && strings.HasPrefix(msg, "capacity"):
		key = "capacity"
	case isBucket(p.Algorithm) && strings.HasPrefix(msg, "rate"):
		key = "rate-per-second"
	case !isBucket(p.Algorithm) && strings.HasPrefix(msg, "window"):
		key = "window-ms"
	case !isBucket(p.Algorithm) && strings.HasPrefix(msg, "limit ="):
		key = "limit"
	}
	if key == "" {
		return n.Errorf("%s: %s", p.Algorithm, msg)
	}
	return l.at(n, key, "%s", msg)
}

// maxWindowMs is the largest window-ms that converts to a time.Duration.
const maxWindowMs = int64(1<<63-1) / int64(time.Millisecond)

// at returns an error at the (dotted) key of mapping n: naming the environment variable
// when the value came from one, at the key's line when the file sets it, else at n.
func (l *loader) at(n yamlx.Node, key, format string, args ...any) error {
	path := n.Path + "." + key
	if name, ok := l.fromEnv[path]; ok {
		return &yamlx.Error{Path: path + " (environment " + name + ")", Msg: fmt.Sprintf(format, args...)}
	}
	if v, _, _ := n.Lookup(key); v.Exists() {
		return v.Errorf(format, args...)
	}
	return n.Errorf("%s: %s", key, fmt.Sprintf(format, args...))
}

func (l *loader) backend(n yamlx.Node, s, def string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return def, nil
	case BackendMemory:
		return BackendMemory, nil
	case BackendRedis:
		return BackendRedis, nil
	}
	return def, l.at(n, "backend", "must be memory or redis, got %q", s)
}

func (l *loader) keyPrefix(n yamlx.Node, s, def string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return def, nil // the Java starter falls back on a blank prefix too
	}
	if strings.ContainsAny(s, "{}") {
		return def, l.at(n, "key-prefix", "must not contain '{' or '}' (they delimit Redis Cluster hash tags), got %q", s)
	}
	return s, nil
}

func (l *loader) failurePolicy(n yamlx.Node, s string, def redstream.FailurePolicy) (redstream.FailurePolicy, error) {
	if strings.TrimSpace(s) == "" {
		return def, nil
	}
	p, err := redstream.ParseFailurePolicy(strings.TrimSpace(s))
	if err != nil {
		return def, l.at(n, "failure-policy", "must be fail-closed, fail-open or fallback, got %q", s)
	}
	return p, nil
}

// builder builds the engines of policies.
type builder struct {
	opts Options
	l    *loader
}

// build returns the policy's limiter wrapped by metrics.Named. n is the policy's node, for
// warnings.
func (b builder) build(p PolicySettings, n yamlx.Node) (redstream.Limiter, error) {
	backend := p.Backend
	if backend == BackendRedis && b.opts.Redis == nil {
		b.l.warn(n, fmt.Sprintf("backend is redis but no Redis client was given (Options.Redis); policy %q uses memory", p.Name))
		backend = BackendMemory
	}
	var (
		lim redstream.Limiter
		err error
	)
	if len(p.Limits) > 0 {
		lim, err = b.multi(p, backend)
	} else {
		lim, err = b.single(p.Spec(), p, backend)
	}
	if err != nil {
		return nil, n.Errorf("%v", err)
	}
	return metrics.Named(p.Name, lim)
}

func (b builder) single(spec redstream.Spec, p PolicySettings, backend string) (redstream.Limiter, error) {
	if backend == BackendMemory {
		return memory.NewLimiter(spec, b.opts.Memory)
	}
	l, err := redisbackend.NewLimiter(b.opts.Redis, spec, p.Redis.Options(p.KeyPrefix))
	return withPolicy(l, err, p, func() (redstream.Limiter, error) { return memory.NewLimiter(spec, b.opts.Memory) })
}

func (b builder) multi(p PolicySettings, backend string) (redstream.Limiter, error) {
	limits := make([]redstream.Limit, len(p.Limits))
	for i, l := range p.Limits {
		limits[i] = redstream.Limit{Name: l.Name, Spec: l.Spec()}
	}
	build := func(specs []redstream.Spec) (redstream.Limiter, error) {
		mem := func() (redstream.Limiter, error) { return memory.NewMultiLimiter(specs, b.opts.Memory) }
		if backend == BackendMemory {
			return mem()
		}
		l, err := redisbackend.NewMultiLimiter(b.opts.Redis, specs, p.Redis.Options(p.KeyPrefix))
		return withPolicy(l, err, p, mem)
	}
	return redstream.Multi(build, limits...)
}

// withPolicy wraps the Redis limiter l (built with error err) in p's failure policy;
// fallback builds the in-process limiter of FailFallback.
func withPolicy(l *redisbackend.Limiter, err error, p PolicySettings, fallback func() (redstream.Limiter, error)) (redstream.Limiter, error) {
	if err != nil {
		return nil, err
	}
	var fb redstream.Limiter
	if p.FailurePolicy == redstream.FailFallback {
		if fb, err = fallback(); err != nil {
			return nil, err
		}
	}
	return redstream.WithFailurePolicy(l, p.FailurePolicy, fb)
}
