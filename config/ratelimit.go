package config

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
	"github.com/redstream-go/redstream/metrics"
	"github.com/redstream-go/redstream/redisbackend"
)

// RateLimitPath is the section RateLimit is built from.
const RateLimitPath = "redis-streaming.ratelimit"

// Defaults of the redis-streaming.ratelimit section, those of the Java starter. The
// default of RateLimitSettings.Backend and PolicySettings.Backend is BackendMemory.
const (
	// DefaultWindow is the default of RateLimitSettings.Window and PolicySettings.Window
	// (window-ms: 1000).
	DefaultWindow = time.Second
	// DefaultLimit is the default of RateLimitSettings.Limit and PolicySettings.Limit.
	DefaultLimit = 100
	// DefaultKeyPrefix is the default of RateLimitSettings.KeyPrefix: the Go engine's
	// default too (redisbackend.DefaultKeyPrefix), so one rule gives a limiter's keys.
	DefaultKeyPrefix = redisbackend.DefaultKeyPrefix
	// DefaultName is the default of RateLimitSettings.DefaultName.
	DefaultName = "default"
	// DefaultAlgorithm is the default of PolicySettings.Algorithm, and the algorithm of
	// the single limiter of a section without policies.
	DefaultAlgorithm = redstream.AlgorithmSlidingWindow
	// DefaultCapacity is the default of PolicySettings.Capacity.
	DefaultCapacity = 100.0
	// DefaultRatePerSecond is the default of PolicySettings.RatePerSecond.
	DefaultRatePerSecond = 100.0
)

// The values of RateLimitSettings.Backend and PolicySettings.Backend.
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

// RateLimitSettings are the values of redis-streaming.ratelimit, bound from the file
// through their yaml tags (keys in parentheses), each absent key at its default.
type RateLimitSettings struct {
	// Enabled (enabled, default false) builds the limiters; when false nothing is built,
	// as the Java starter's auto-configuration is off.
	Enabled bool `yaml:"enabled"`
	// Backend (backend, default "memory") is BackendMemory or BackendRedis; policies
	// without a backend of their own use it.
	Backend string `yaml:"backend"`
	// Window (window-ms, default DefaultWindow) and Limit (limit, default DefaultLimit)
	// define the single sliding-window limiter built when there are no policies.
	Window time.Duration `yaml:"window-ms" unit:"ms"`
	Limit  int64         `yaml:"limit"`
	// KeyPrefix (key-prefix, default DefaultKeyPrefix) starts the Redis keys of the single
	// limiter; a Redis policy without its own key-prefix uses KeyPrefix + ":" + its name
	// (a java-compatible one, KeyPrefix itself, as the Java starter does).
	KeyPrefix string `yaml:"key-prefix"`
	// DefaultName (default-name, default DefaultName) names the default limiter. With
	// policies it must name one of them (in lenient mode: else the first by name).
	DefaultName string `yaml:"default-name"`
	// FailurePolicy (failure-policy, default fail-closed; redstream's addition) is what
	// Redis limiters do when Redis fails: "fail-closed", "fail-open" or "fallback" (decide
	// with an in-process limiter of the same spec). Policies may override it.
	FailurePolicy redstream.FailurePolicy `yaml:"failure-policy"`
	// Redis (timeout-ms, breaker.*, java-compatible, local-denials, quota.*; redstream's
	// additions) configures the Redis limiters' deadline, circuit breaker, key layout and
	// leased quota; policies may override each key.
	Redis RedisLimiterSettings `yaml:",inline"`
	// Policies (policies.<name>) in document order.
	Policies []PolicySettings `yaml:"-"`
	// Shadow (shadow, default false; redstream's addition) runs the single limiter, and
	// every policy that does not set its own shadow, in shadow mode (redstream.Shadow):
	// each decision is made and counted (redis_streaming_rl_shadow_denied_total for what
	// it would have denied), and every request is admitted.
	Shadow bool `yaml:"shadow"`
}

// PolicySettings are the values of one redis-streaming.ratelimit.policies.<name> entry,
// bound through their yaml tags; a key the policy does not set has the section's value
// (backend, failure-policy, the Redis keys) or its default.
type PolicySettings struct {
	// Name is the policy's key under policies, as written.
	Name string `yaml:"-"`
	// Algorithm (algorithm, default DefaultAlgorithm): sliding, token-bucket,
	// leaky-bucket, and redstream's fixed and sliding-counter. An unknown name is an error
	// (lenient mode: a warning, and sliding).
	Algorithm redstream.Algorithm `yaml:"algorithm"`
	// Backend (backend): BackendMemory or BackendRedis; default the section's backend.
	Backend string `yaml:"backend"`
	// Window (window-ms, default DefaultWindow) and Limit (limit, default DefaultLimit)
	// configure the window algorithms.
	Window time.Duration `yaml:"window-ms" unit:"ms"`
	Limit  int64         `yaml:"limit"`
	// Capacity (capacity, default DefaultCapacity) and RatePerSecond (rate-per-second,
	// default DefaultRatePerSecond) configure the buckets.
	Capacity      float64 `yaml:"capacity"`
	RatePerSecond float64 `yaml:"rate-per-second"`
	// KeyPrefix (key-prefix) of a Redis policy; default the section's key-prefix + ":" +
	// Name, and for a java-compatible policy the section's key-prefix itself (the Java
	// starter's rule: its policies' keys carry no name).
	KeyPrefix string `yaml:"key-prefix"`
	// FailurePolicy (failure-policy); default the section's.
	FailurePolicy redstream.FailurePolicy `yaml:"failure-policy"`
	// Redis (timeout-ms, breaker.*, java-compatible, local-denials, quota.*) of a Redis
	// policy; each key defaults to the section's.
	Redis RedisLimiterSettings `yaml:",inline"`
	// Limits (limits.<name>, redstream's addition) makes the policy a multi-limit: every
	// request must pass every limit, all-or-nothing. Each limit takes algorithm, window-ms,
	// limit, capacity and rate-per-second; the policy's backend, key-prefix,
	// failure-policy and Redis keys apply to all of them.
	Limits []PolicySettings `yaml:"-"`
	// Shadow (shadow; default the section's) runs the policy in shadow mode
	// (redstream.Shadow): its decisions are made and counted, and every request is
	// admitted. It applies to the whole policy (all its limits).
	Shadow bool `yaml:"shadow"`
	// Previous (previous.*: algorithm, window-ms, limit, capacity, rate-per-second, each
	// defaulting to the policy's own) is the spec a single-limit Redis policy replaces,
	// and Carry (carry: as-is, proportional or reset; default as-is when previous is set)
	// how each key's state under it carries over (redisbackend.Options.Previous and
	// Carry, core.Carry). The zero Spec: no previous spec.
	Previous redstream.Spec `yaml:"-"`
	Carry    core.Carry     `yaml:"carry"`
}

// Spec returns the policy's limiter spec (of a single-limit policy).
// The fields are those of the algorithm's parameter shape (core's registry); an algorithm
// the registry lacks gets every field, and Spec.Core refuses it.
func (p PolicySettings) Spec() redstream.Spec {
	s := redstream.Spec{Algorithm: p.Algorithm}
	row, err := core.Lookup(string(s.Algorithm))
	sh := row.Shape
	if err != nil || sh == core.Bucket {
		s.Capacity, s.Rate = p.Capacity, p.RatePerSecond
	}
	if err != nil || sh == core.Window {
		s.Window, s.Limit = p.Window, p.Limit
	}
	return s
}

// limitKeys are the keys of one limit of a multi-limit policy (limits.<name>).
type limitKeys struct {
	Algorithm     redstream.Algorithm `yaml:"algorithm"`
	Window        time.Duration       `yaml:"window-ms" unit:"ms"`
	Limit         int64               `yaml:"limit"`
	Capacity      float64             `yaml:"capacity"`
	RatePerSecond float64             `yaml:"rate-per-second"`
}

// defaultLimit is a policy's or a limit's algorithm and parameters when it sets none.
var defaultLimit = limitKeys{Algorithm: DefaultAlgorithm, Window: DefaultWindow, Limit: DefaultLimit,
	Capacity: DefaultCapacity, RatePerSecond: DefaultRatePerSecond}

// defaultSettings are the section's values when it sets no key.
func defaultSettings() RateLimitSettings {
	return RateLimitSettings{Backend: BackendMemory, Window: DefaultWindow, Limit: DefaultLimit,
		KeyPrefix: DefaultKeyPrefix, DefaultName: DefaultName, Redis: defaultRedisSettings()}
}

// RedisLimiterSettings are the keys of a Redis limiter's deadline, circuit breaker, key
// layout and leased quota (redstream's additions), set on the section (the default of every
// policy and of the single limiter) or on a policy; a policy's key overrides the section's,
// and each breaker and quota key is inherited on its own. They do not apply to the memory backend. Absent
// keys hold the engine's defaults, written out.
type RedisLimiterSettings struct {
	// Timeout (timeout-ms, default 100 ms: redisbackend.DefaultTimeout) bounds the Redis
	// call of each decision, whatever the caller's context allows; past it the failure
	// policy answers. timeout-ms: -1 (in Go, any negative Timeout) leaves the caller's
	// context alone to bound the call.
	Timeout time.Duration `yaml:"timeout-ms" unit:"ms"`
	// Breaker (breaker.*) configures the limiter's circuit breaker. The file's values are
	// checked more strictly than the engine's: failures and probes at least 1 (or -1 for
	// failures), error-rate in (0, 1] or -1, min-calls at least 1, window-ms and
	// cool-down-ms at least 1 ms.
	Breaker redstream.BreakerOptions `yaml:"breaker"`
	// JavaCompatible (java-compatible, default false) reads and writes the Java
	// implementation's keys, so that Go and Java processes share one limit. Only a
	// single-limit sliding or token-bucket policy has a Java layout.
	JavaCompatible bool `yaml:"java-compatible"`
	// LocalDenials (local-denials, default true) lets the limiter answer requests that a
	// remembered denial proves denied without a Redis call. A multi-limit or
	// java-compatible limiter has none, whatever this says.
	LocalDenials bool `yaml:"local-denials"`
	// Quota (quota.*: enabled, default false; duration-ms, default 100 ms, from 1 ms to a
	// minute; max-share, default 0.1, in (0, 1]) turns on leased quota
	// (redisbackend.Options.Quota): the limiter takes a slice of a hot key's budget in one
	// Redis call and admits from it in process. Only a single-limit token-bucket, fixed or
	// sliding-counter policy that is not java-compatible and has no previous has leases;
	// enabled on any other Redis limiter is an error, in both modes.
	Quota redisbackend.QuotaOptions `yaml:"quota"`
}

// defaultRedisSettings are the Redis limiter keys of a section that sets none: the
// engine's defaults, written out.
func defaultRedisSettings() RedisLimiterSettings {
	return RedisLimiterSettings{
		Timeout: redisbackend.DefaultTimeout, LocalDenials: true,
		Quota: redisbackend.QuotaOptions{Duration: redisbackend.DefaultQuotaDuration, MaxShare: redisbackend.DefaultQuotaMaxShare},
		Breaker: redstream.BreakerOptions{
			Failures: health.DefaultFailures, ErrorRate: health.DefaultErrorRate, MinCalls: health.DefaultMinCalls,
			Window: health.DefaultWindow, CoolDown: health.DefaultCoolDown, Probes: health.DefaultProbes,
		},
	}
}

// options returns the redisbackend.Options of these settings with keyPrefix.
func (r RedisLimiterSettings) options(keyPrefix string) redisbackend.Options {
	o := redisbackend.Options{KeyPrefix: keyPrefix, Timeout: r.Timeout, JavaCompatible: r.JavaCompatible,
		DisableLocalDenials: !r.LocalDenials, Breaker: r.Breaker}
	if r.Quota.Enabled {
		o.Quota = r.Quota
	}
	return o
}

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

// isBucket reports whether a's parameters are the bucket shape (capacity, rate), by core's
// registry.
func isBucket(a redstream.Algorithm) bool {
	row, err := core.Lookup(string(a))
	sh := row.Shape
	return err == nil && sh == core.Bucket
}

func (l *loader) loadRateLimit(root yamlx.Node) (*RateLimit, error) {
	p, err := l.planRateLimit(root)
	if err != nil || p.rl != nil {
		return p.rl, err
	}
	return l.buildRateLimit(p)
}

// rateLimitPlan is a rate-limit section read and checked, ready to build: rl is set when
// there is nothing to build (the section is disabled).
type rateLimitPlan struct {
	sec         yamlx.Node
	s           RateLimitSettings
	nodes       []yamlx.Node // the policies' nodes
	defaultName string
	noDefault   bool // policies without a default: Default fails with ErrNoDefault
	rl          *RateLimit
}

// planRateLimit reads and checks the section, building nothing.
func (l *loader) planRateLimit(root yamlx.Node) (*rateLimitPlan, error) {
	sec, err := section(root, RateLimitPath)
	if err != nil {
		return &rateLimitPlan{}, err
	}
	s, nodes, err := l.section(sec)
	if err != nil {
		return &rateLimitPlan{}, err
	}
	p := &rateLimitPlan{sec: sec, s: s, nodes: nodes, defaultName: s.DefaultName}
	if !s.Enabled {
		empty, _ := redstream.NewRegistry(nil)
		p.rl = &RateLimit{Settings: s, Registry: empty, Default: allowAll{}}
		return p, l.disabledPolicies(sec, s)
	}
	if err := l.checkRedisSection(sec, s); err != nil {
		return p, err
	}
	if err := l.chooseDefault(p); err != nil {
		return p, err
	}
	if len(s.Policies) == 0 {
		if err := l.checkSpec(sec, p.single()); err != nil {
			return p, err
		}
		if s.Backend == BackendRedis && s.Redis.Quota.Enabled {
			// The single limiter is a sliding log, which has no leases.
			return p, l.at(sec, "quota.enabled", "the section's single limiter (no policies): %s", quotaRefused(p.single()))
		}
		return p, nil
	}
	prefixes := map[string]int{} // Redis key prefix -> index of the policy using it
	for i, pol := range s.Policies {
		if pol.Backend != BackendRedis {
			continue
		}
		key := pol.KeyPrefix
		if pol.Redis.JavaCompatible {
			// The Java layouts of the sliding window and the token bucket do not collide.
			key += "\x00" + string(pol.Algorithm)
		}
		if j, dup := prefixes[key]; dup && !sameLimits(s.Policies[j], pol) {
			return p, nodes[i].Errorf("key-prefix %q is also used by policy %q with other limits; their Redis keys would collide", pol.KeyPrefix, s.Policies[j].Name)
		}
		prefixes[key] = i
	}
	return p, nil
}

// disabledPolicies is the error (strict) or warning (lenient) of policies in a disabled
// section.
func (l *loader) disabledPolicies(sec yamlx.Node, s RateLimitSettings) error {
	if len(s.Policies) == 0 {
		return nil
	}
	pol, _, _ := sec.Get("policies")
	why := "enabled is missing"
	if en, ok, _ := sec.Get("enabled"); ok {
		why = fmt.Sprintf("enabled is false (line %d)", en.Line())
	}
	if err := l.strict(pol, "policies are set but %s, so none would be built; set enabled: true, or remove the policies", why); err != nil {
		return err
	}
	l.warn(pol, fmt.Sprintf("policies are set but %s; no limiter is built and Default admits every request", why))
	return nil
}

// chooseDefault sets the plan's default limiter when the section has policies.
func (l *loader) chooseDefault(p *rateLimitPlan) error {
	s, sec := p.s, p.sec
	if len(s.Policies) == 0 || slices.ContainsFunc(s.Policies, func(pol PolicySettings) bool { return pol.Name == p.defaultName }) {
		return nil
	}
	names := make([]string, len(s.Policies))
	for i, pol := range s.Policies {
		names[i] = pol.Name
	}
	slices.Sort(names)
	dn, set, _ := sec.Get("default-name")
	switch {
	case set:
		what := fmt.Sprintf("default-name %q names no policy", p.defaultName)
		if err := l.strict(dn, "%s; set it to one of: %s", what, strings.Join(names, ", ")); err != nil {
			return err
		}
		l.warn(dn, fmt.Sprintf("%s; using %q, the first policy by name", what, names[0]))
		p.defaultName = names[0]
	case l.opts.Lenient:
		pol, _, _ := sec.Get("policies")
		l.warn(pol, fmt.Sprintf("default-name is not set and no policy is named %q; using %q, the first policy by name", DefaultName, names[0]))
		p.defaultName = names[0]
	default:
		// The file is valid (limiters are looked up by name); Default says what is
		// missing when called.
		p.noDefault = true
	}
	return nil
}

// single is the one policy of a section without policies.
func (p *rateLimitPlan) single() PolicySettings {
	s := p.s
	return PolicySettings{
		Name: s.DefaultName, Algorithm: DefaultAlgorithm, Backend: s.Backend,
		Window: s.Window, Limit: s.Limit, KeyPrefix: s.KeyPrefix, FailurePolicy: s.FailurePolicy, Redis: s.Redis,
		Shadow: s.Shadow,
	}
}

// buildRateLimit builds the limiters of a checked plan.
func (l *loader) buildRateLimit(p *rateLimitPlan) (*RateLimit, error) {
	s, sec := p.s, p.sec
	b := builder{opts: l.opts, l: l}
	limiters := map[string]redstream.Limiter{}
	if len(s.Policies) == 0 {
		lim, err := b.build(p.single(), sec)
		if err != nil {
			return nil, err
		}
		limiters[s.DefaultName] = lim
	}
	for i, pol := range s.Policies {
		lim, err := b.build(pol, p.nodes[i])
		if err != nil {
			return nil, err
		}
		limiters[pol.Name] = lim
	}
	rl := &RateLimit{Settings: s, Default: allowAll{}}
	var err error
	if rl.Registry, err = redstream.NewRegistry(limiters); err != nil {
		return nil, sec.Errorf("%v", err)
	}
	if p.noDefault {
		rl.Default = errLimiter{ErrNoDefault}
		return rl, nil
	}
	rl.Default, _ = rl.Registry.Get(p.defaultName)
	rl.DefaultName = p.defaultName
	rl.Settings.DefaultName = p.defaultName
	return rl, nil
}

// ErrNoDefault is returned by RateLimit.Default when the section has policies, no
// default-name and no policy named "default": there is no default limiter to decide with.
// The policies themselves are in RateLimit.Registry. It matches redstream.ErrInvalidConfig.
var ErrNoDefault = fmt.Errorf("%w: config: no default limiter: redis-streaming.ratelimit.default-name is not set and no policy is named %q", redstream.ErrInvalidConfig, DefaultName)

// errLimiter is a Default that cannot decide: every call returns err.
type errLimiter struct{ err error }

func (e errLimiter) AllowN(context.Context, string, time.Time, int64) (redstream.Decision, error) {
	return redstream.Decision{}, e.err
}

// allowAll is Default when rate limiting is off: it admits every valid request.
type allowAll struct{}

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

// section binds the section onto its defaults and each policy onto the section's values,
// then checks what binding does not: the words (backend, algorithm), blank values (the
// default, as the Java starter does), ranges and the keys that do not apply. nodes holds
// the node of each policy.
func (l *loader) section(sec yamlx.Node) (RateLimitSettings, []yamlx.Node, error) {
	y := struct {
		RateLimitSettings
		Policies yamlx.Node `yaml:"policies"`
	}{RateLimitSettings: defaultSettings()}
	if err := yamlx.Bind(sec, &y, l.bindOptions()); err != nil {
		return RateLimitSettings{}, nil, err
	}
	s := y.RateLimitSettings
	def := defaultSettings()
	if strings.TrimSpace(s.DefaultName) == "" {
		s.DefaultName = DefaultName
	}
	if err := l.common(sec, &s.Backend, &s.KeyPrefix, def.Backend, def.KeyPrefix); err != nil {
		return s, nil, err
	}
	if err := l.checkLimiterRedis(sec, s.Redis); err != nil {
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

// common checks the backend and key-prefix bound at n: blank means def.
func (l *loader) common(n yamlx.Node, backend, keyPrefix *string, defBackend, defPrefix string) error {
	switch b := strings.ToLower(strings.TrimSpace(*backend)); b {
	case "":
		*backend = defBackend
	case BackendMemory, BackendRedis:
		*backend = b
	default:
		return l.at(n, "backend", "must be memory or redis, got %q", *backend)
	}
	if strings.TrimSpace(*keyPrefix) == "" {
		*keyPrefix = defPrefix // the Java starter falls back on a blank prefix too
	} else if strings.ContainsAny(*keyPrefix, "{}") {
		return l.at(n, "key-prefix", "must not contain '{' or '}' (they delimit Redis Cluster hash tags), got %q", *keyPrefix)
	}
	return nil
}

// policy binds the policy at n onto the section's values s.
func (l *loader) policy(n, sec yamlx.Node, s RateLimitSettings) (PolicySettings, error) {
	def := PolicySettings{Name: n.Name(), Backend: s.Backend, KeyPrefix: s.KeyPrefix + ":" + n.Name(),
		FailurePolicy: s.FailurePolicy, Redis: s.Redis, Shadow: s.Shadow}
	def.setLimit(defaultLimit)
	if strings.TrimSpace(def.Name) == "" {
		return def, n.Errorf("a policy needs a name")
	}
	if n.IsNull() {
		return def, n.Errorf("must be a mapping of the policy's settings")
	}
	y := struct {
		PolicySettings
		Limits   yamlx.Node `yaml:"limits"`
		Previous yamlx.Node `yaml:"previous"`
	}{PolicySettings: def}
	if err := yamlx.Bind(n, &y, l.bindOptions()); err != nil {
		return def, err
	}
	p := y.PolicySettings
	if err := l.common(n, &p.Backend, &p.KeyPrefix, def.Backend, def.KeyPrefix); err != nil {
		return p, err
	}
	if _, own, _ := n.Get("key-prefix"); !own && p.Redis.JavaCompatible {
		// The Java starter's rule: a policy's keys start with the section's key-prefix
		// (default streaming:rl), without the policy's name, so Go and Java share them.
		p.KeyPrefix = s.KeyPrefix
	}
	if err := l.checkLimiterRedis(n, p.Redis); err != nil {
		return p, err
	}
	entries, err := y.Limits.Entries()
	if err != nil {
		return p, err
	}
	if !y.Limits.Exists() || y.Limits.IsNull() {
		if err := l.limitFields(n, &p); err != nil {
			return p, err
		}
		if err := l.previous(n, y.Previous, &p); err != nil {
			return p, err
		}
		return p, l.checkRedisPolicy(n, sec, p)
	}
	if y.Previous.Exists() {
		return p, y.Previous.Errorf("applies to a single-limit policy; a policy with limits changes them in Go (redisbackend.Options.Previous)")
	}
	if _, set, _ := n.Get("carry"); set {
		return p, l.at(n, "carry", "applies only with previous, to a single-limit policy")
	}
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
	p.setLimit(limitKeys{}) // each limit has its own; the policy has none
	for _, e := range entries {
		if e.IsNull() {
			return p, e.Errorf("must be a mapping of the limit's settings")
		}
		ly := defaultLimit
		if err := yamlx.Bind(e, &ly, l.bindOptions()); err != nil {
			return p, err
		}
		lim := PolicySettings{Name: e.Name(), Backend: p.Backend, KeyPrefix: p.KeyPrefix, FailurePolicy: p.FailurePolicy, Redis: p.Redis}
		lim.setLimit(ly)
		if err := l.limitFields(e, &lim); err != nil {
			return p, err
		}
		p.Limits = append(p.Limits, lim)
	}
	return p, l.checkRedisPolicy(n, sec, p)
}

// setLimit sets the algorithm and parameters of p to k's.
func (p *PolicySettings) setLimit(k limitKeys) {
	p.Algorithm, p.Window, p.Limit, p.Capacity, p.RatePerSecond = k.Algorithm, k.Window, k.Limit, k.Capacity, k.RatePerSecond
}

// limitFields reads the algorithm name bound at n (relaxed), checks that n sets no key of
// the other family of algorithms, and checks the spec.
func (l *loader) limitFields(n yamlx.Node, p *PolicySettings) error {
	written := p.Algorithm
	alg, known := algorithms[yamlx.Normalize(strings.TrimSpace(string(written)))]
	if !known {
		if !l.opts.Lenient {
			return l.at(n, "algorithm", "unknown algorithm %q; want %s", written, algorithmNames)
		}
		a, _, _ := n.Lookup("algorithm")
		l.warn(a, fmt.Sprintf("unknown algorithm %q; using sliding (window-ms %d, limit %d)", written, p.Window.Milliseconds(), p.Limit))
		alg = DefaultAlgorithm
	}
	p.Algorithm = alg
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

// redisKeys are the keys of RedisLimiterSettings, for the checks of where they apply.
var redisKeys = []string{"timeout-ms", "breaker", "java-compatible", "local-denials", "quota"}

// setRedisKeys returns the Redis limiter keys set on mapping n, in redisKeys order.
func setRedisKeys(n yamlx.Node) []yamlx.Node {
	var out []yamlx.Node
	for _, k := range redisKeys {
		if v, ok, _ := n.Get(k); ok {
			out = append(out, v)
		}
	}
	return out
}

// ms writes d in milliseconds when it is a whole number of them.
func ms(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	return d.String()
}

// checkLimiterRedis checks the ranges of the Redis limiter keys r bound at mapping n (those it
// inherited were checked where they were set), and the breaker keys that contradict.
func (l *loader) checkLimiterRedis(n yamlx.Node, r RedisLimiterSettings) error {
	if t := r.Timeout; t != -time.Millisecond && t < time.Millisecond {
		return l.at(n, "timeout-ms", "must be a number of milliseconds from 1 to %d, or -1 to leave the caller's context alone to bound each call; got %s", maxWindowMs, ms(t))
	}
	b := r.Breaker
	switch {
	case b.Failures != -1 && b.Failures < 1:
		return l.at(n, "breaker.failures", "must be at least 1 consecutive failure, or -1 to disable the rule; got %d", b.Failures)
	case b.ErrorRate != -1 && !(b.ErrorRate > 0 && b.ErrorRate <= 1):
		return l.at(n, "breaker.error-rate", "must be a fraction in (0, 1], or -1 to disable the rule; got %v", b.ErrorRate)
	case b.MinCalls < 1:
		return l.at(n, "breaker.min-calls", "must be at least 1; got %d", b.MinCalls)
	case b.Window < time.Millisecond:
		return l.at(n, "breaker.window-ms", "must be a number of milliseconds from 1 to %d; got %s", maxWindowMs, ms(b.Window))
	case b.CoolDown < time.Millisecond:
		return l.at(n, "breaker.cool-down-ms", "must be a number of milliseconds from 1 to %d; got %s", maxWindowMs, ms(b.CoolDown))
	case b.Probes < 1:
		return l.at(n, "breaker.probes", "must be at least 1; got %d", b.Probes)
	}
	if err := l.checkQuotaKeys(n, r.Quota); err != nil {
		return err
	}
	bn, ok, _ := n.Get("breaker")
	if !ok {
		return nil
	}
	if !b.Disabled && b.Failures == -1 && b.ErrorRate == -1 {
		if err := l.strict(bn, "failures and error-rate are both -1, so the breaker would never open; set disabled: true instead"); err != nil {
			return err
		}
		l.warn(bn, "failures and error-rate are both -1: the breaker never opens")
	}
	if _, set, _ := bn.Get("disabled"); set && b.Disabled {
		entries, _ := bn.Entries()
		for _, e := range entries {
			if yamlx.Normalize(e.Name()) == "disabled" {
				continue
			}
			if err := l.strict(e, "does not apply: the breaker is disabled"); err != nil {
				return err
			}
			l.warn(e, "does not apply: the breaker is disabled; ignored")
		}
	}
	return nil
}

// maxQuotaDuration is the longest quota.duration-ms (redisbackend's bound).
const maxQuotaDuration = time.Minute

// checkQuotaKeys checks the ranges of the quota keys q bound at mapping n (those it
// inherited were checked where they were set).
func (l *loader) checkQuotaKeys(n yamlx.Node, q redisbackend.QuotaOptions) error {
	switch d := q.Duration; {
	case d < time.Millisecond || d > maxQuotaDuration:
		return l.at(n, "quota.duration-ms", "must be a number of milliseconds from 1 to %d (a lease's longest life); got %s", maxQuotaDuration.Milliseconds(), ms(d))
	case !(q.MaxShare > 0 && q.MaxShare <= 1):
		return l.at(n, "quota.max-share", "must be a fraction in (0, 1] (the largest part of the limit one lease takes); got %v", q.MaxShare)
	}
	return nil
}

// unusedQuotaKeys reports the keys of mapping n's quota other than enabled, which do not
// apply (why): an error in strict mode, a warning in lenient mode.
func (l *loader) unusedQuotaKeys(n yamlx.Node, why string) error {
	qn, ok, _ := n.Get("quota")
	if !ok {
		return nil
	}
	entries, _ := qn.Entries()
	for _, e := range entries {
		if yamlx.Normalize(e.Name()) == "enabled" {
			continue
		}
		if err := l.strict(e, "does not apply: %s", why); err != nil {
			return err
		}
		l.warn(e, fmt.Sprintf("does not apply: %s; ignored", why))
	}
	return nil
}

// quotaRefused says why policy p (a Redis one) cannot have leased quota, or "" when it can:
// what redisbackend.NewLimiter and NewMultiLimiter refuse, checked here so that a file is
// refused without a Redis client too (TestQuotaRefusalsMatchEngine holds the two together).
func quotaRefused(p PolicySettings) string {
	switch {
	case len(p.Limits) > 0:
		return "a policy with limits (a multi-limit) has no leased quota"
	case p.Redis.JavaCompatible:
		return "a java-compatible policy has no leased quota (the Java processes would not see the leases)"
	case p.Previous != (redstream.Spec{}):
		return "a policy with previous (carrying state from the spec it replaces) has no leased quota"
	case p.Algorithm == redstream.AlgorithmLeakyBucket:
		return "the leaky-bucket algorithm has no leased quota: its decisions carry a shaping delay, which admissions from a lease cannot"
	case p.Algorithm == redstream.AlgorithmSlidingWindow:
		return "the sliding algorithm (an exact log) has no leased quota: it records the time of each admission, which admissions from a lease would not be; use sliding-counter, fixed or token-bucket"
	}
	return ""
}

// checkQuota checks that the leased quota policy p (node n, section node sec) has enabled,
// on the policy or by inheritance, applies to it: an error in both modes, since the engine
// refuses it. Quota keys of a policy without quota enabled are an error (lenient: a
// warning).
func (l *loader) checkQuota(n, sec yamlx.Node, p PolicySettings) error {
	if !p.Redis.Quota.Enabled {
		return l.unusedQuotaKeys(n, "quota is not enabled (set quota.enabled: true)")
	}
	why := quotaRefused(p)
	if why == "" {
		return nil
	}
	_, fromEnv := l.fromEnv[n.Path+".quota.enabled"]
	if qn, ok, _ := n.Get("quota"); fromEnv || ok {
		if _, set, _ := qn.Get("enabled"); fromEnv || set {
			return l.at(n, "quota.enabled", "policy %q: %s", p.Name, why)
		}
	}
	where := fmt.Sprintf("set at %s, line %d", sec.Path+".quota.enabled", sec.LineOf("quota.enabled"))
	if name, ok := l.fromEnv[sec.Path+".quota.enabled"]; ok {
		where = "set by the environment variable " + name
	}
	return n.Errorf("quota.enabled is true (%s) but policy %q: %s; set quota: {enabled: false} on the policy", where, p.Name, why)
}

// checkRedisPolicy checks that the Redis limiter keys of policy p (node n, section node sec)
// apply to it: none on the memory backend (strict: an error; lenient: a warning),
// java-compatible only on a single sliding or token-bucket limit, and quota only where the
// engine has leases (always errors: the engine refuses anything else).
func (l *loader) checkRedisPolicy(n, sec yamlx.Node, p PolicySettings) error {
	if p.Backend != BackendRedis {
		for _, v := range setRedisKeys(n) {
			if err := l.strict(v, "does not apply to the memory backend (policy %q); set backend: redis, or remove it", p.Name); err != nil {
				return err
			}
			l.warn(v, fmt.Sprintf("does not apply to the memory backend (policy %q); ignored", p.Name))
		}
		return nil
	}
	if err := l.checkQuota(n, sec, p); err != nil {
		return err
	}
	if !p.Redis.JavaCompatible {
		return nil
	}
	why := ""
	switch {
	case len(p.Limits) > 0:
		why = "a policy with limits has no Java layout"
	case p.Algorithm != redstream.AlgorithmSlidingWindow && p.Algorithm != redstream.AlgorithmTokenBucket:
		why = fmt.Sprintf("the %s algorithm has no Java layout (only sliding and token-bucket have one)", p.Algorithm)
	}
	if why == "" {
		return nil
	}
	if _, ok, _ := n.Get("java-compatible"); ok {
		return l.at(n, "java-compatible", "%s", why)
	}
	return n.Errorf("java-compatible is true (set at %s, line %d) but %s; set java-compatible: false on the policy",
		sec.Path+".java-compatible", sec.LineOf("java-compatible"), why)
}

// checkRedisSection checks that the section's own Redis limiter keys apply to some limiter.
func (l *loader) checkRedisSection(sec yamlx.Node, s RateLimitSettings) error {
	used := len(s.Policies) == 0 && s.Backend == BackendRedis
	for _, p := range s.Policies {
		used = used || p.Backend == BackendRedis
	}
	if used {
		if s.Redis.Quota.Enabled || slices.ContainsFunc(s.Policies, func(p PolicySettings) bool { return p.Backend == BackendRedis && p.Redis.Quota.Enabled }) {
			return nil
		}
		// The section's quota keys are the defaults of policies enabling it; none does.
		return l.unusedQuotaKeys(sec, "quota is enabled neither here nor on any Redis policy")
	}
	for _, v := range setRedisKeys(sec) {
		if err := l.strict(v, "does not apply: no limiter of the section uses the redis backend"); err != nil {
			return err
		}
		l.warn(v, "does not apply: no limiter of the section uses the redis backend; ignored")
	}
	return nil
}

// parsers read the words of the section for yamlx.Bind.
var parsers = map[reflect.Type]func(string) (any, error){
	reflect.TypeFor[core.Carry](): func(s string) (any, error) {
		switch normalizePolicy(s) {
		case "":
			return nil, nil
		case "asis":
			return core.CarryAsIs, nil
		case "proportional":
			return core.CarryProportional, nil
		case "reset":
			return core.CarryReset, nil
		}
		return nil, fmt.Errorf("must be as-is, proportional or reset, got %q", s)
	},
	reflect.TypeFor[redstream.FailurePolicy](): func(s string) (any, error) {
		if s == "" {
			return nil, nil // the default (the section's)
		}
		p, err := parseFailurePolicy(s)
		if err != nil {
			return nil, fmt.Errorf("must be fail-closed, fail-open or fallback, got %q", s)
		}
		return p, nil
	},
}

// parseFailurePolicy parses "fail-closed", "fail-open" or "fallback" (the String forms of
// redstream.FailurePolicy; case and the separators '-' and '_' are ignored, and "closed",
// "open" are accepted too).
func parseFailurePolicy(s string) (redstream.FailurePolicy, error) {
	switch normalizePolicy(s) {
	case "failclosed", "closed":
		return redstream.FailClosed, nil
	case "failopen", "open":
		return redstream.FailOpen, nil
	case "fallback", "failfallback", "localfallback":
		return redstream.FailFallback, nil
	}
	return 0, fmt.Errorf("config: %w: unknown failure policy %q, want fail-closed, fail-open or fallback", redstream.ErrInvalidConfig, s)
}

// normalizePolicy lowercases s and drops '-', '_' and spaces.
func normalizePolicy(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' || c == '_' || c == ' ':
		case 'A' <= c && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// previous reads the previous spec of the single-limit policy p at n (node prev, absent
// when the policy has none) and its carry strategy, and checks that the change can carry
// state: a Redis policy, the same algorithm, and what coreops.CheckCarry allows.
func (l *loader) previous(n, prev yamlx.Node, p *PolicySettings) error {
	_, carrySet, _ := n.Get("carry")
	if !prev.Exists() || prev.IsNull() {
		if carrySet {
			return l.at(n, "carry", "applies only with previous (the spec the policy replaces)")
		}
		return nil
	}
	if !carrySet {
		p.Carry = core.CarryAsIs
	}
	k := limitKeys{Algorithm: p.Algorithm, Window: p.Window, Limit: p.Limit, Capacity: p.Capacity, RatePerSecond: p.RatePerSecond}
	if err := yamlx.Bind(prev, &k, l.bindOptions()); err != nil {
		return err
	}
	old := PolicySettings{Name: p.Name}
	old.setLimit(k)
	if alg, ok := algorithms[yamlx.Normalize(strings.TrimSpace(string(old.Algorithm)))]; ok {
		old.Algorithm = alg
	}
	if err := l.checkSpec(prev, old); err != nil {
		return err
	}
	p.Previous = old.Spec()
	if p.Backend != BackendRedis {
		if err := l.strict(prev, "does not apply to the memory backend (policy %q): in-process state does not outlive the process that loads the file", p.Name); err != nil {
			return err
		}
		l.warn(prev, fmt.Sprintf("does not apply to the memory backend (policy %q); ignored", p.Name))
		p.Previous, p.Carry = redstream.Spec{}, core.CarryReset
		return nil
	}
	if p.Redis.JavaCompatible {
		return prev.Errorf("does not apply to a java-compatible policy, whose keys carry no spec")
	}
	nl, _ := p.Spec().Core()
	ol, _ := p.Previous.Core()
	if err := coreops.CheckCarry(nl, ol, p.Carry); err != nil {
		return prev.Errorf("%s", strings.TrimPrefix(err.Error(), "redstream: invalid configuration: "))
	}
	return nil
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
	if p.Shadow {
		lim = redstream.Shadow(lim)
	}
	return metrics.Named(p.Name, lim)
}

func (b builder) single(spec redstream.Spec, p PolicySettings, backend string) (redstream.Limiter, error) {
	if backend == BackendMemory {
		return memory.NewLimiter(spec, b.opts.Memory)
	}
	o := p.Redis.options(p.KeyPrefix)
	if p.Previous != (redstream.Spec{}) {
		o.Previous, o.Carry = []redstream.Spec{p.Previous}, p.Carry
	}
	l, err := redisbackend.NewLimiter(b.opts.Redis, spec, o)
	return withPolicy(l, err, p, func() (redstream.Limiter, error) { return memory.NewLimiter(spec, b.opts.Memory) })
}

func (b builder) multi(p PolicySettings, backend string) (redstream.Limiter, error) {
	limits := make([]redstream.Rule, len(p.Limits))
	for i, l := range p.Limits {
		limits[i] = redstream.Rule{Name: l.Name, Spec: l.Spec()}
	}
	build := func(specs []redstream.Spec) (redstream.Limiter, error) {
		mem := func() (redstream.Limiter, error) { return memory.NewMultiLimiter(specs, b.opts.Memory) }
		if backend == BackendMemory {
			return mem()
		}
		l, err := redisbackend.NewMultiLimiter(b.opts.Redis, specs, p.Redis.options(p.KeyPrefix))
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
