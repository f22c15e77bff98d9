package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/memory"
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

// RateLimit is what the redis-streaming.ratelimit section built.
type RateLimit struct {
	// Settings are the section's values after defaults.
	Settings RateLimitSettings
	// Registry holds one redstream.NamedLimiter per policy (or, without policies, the
	// single default limiter under DefaultName). Empty when the section is not enabled.
	Registry *redstream.Registry
	// Default is the default limiter: the policy named default-name; else, with a warning,
	// the first registered limiter by name; else a memory sliding window of 1000 ms / 100.
	// Nil when the section is not enabled.
	Default redstream.Limiter
	// DefaultName is the name Default is registered under ("" when not enabled).
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
	// DefaultName (default-name, default "default") names the default limiter.
	DefaultName string
	// FailurePolicy (failure-policy, default fail-closed; redstream's addition) is what
	// Redis limiters do when Redis fails: "fail-closed", "fail-open" or "fallback" (decide
	// with an in-process limiter of the same spec). Policies may override it.
	FailurePolicy redstream.FailurePolicy
	// Policies (policies.<name>) in document order.
	Policies []PolicySettings
}

// PolicySettings are the values of one redis-streaming.ratelimit.policies.<name> entry.
type PolicySettings struct {
	// Name is the policy's key under policies, as written.
	Name string
	// Algorithm (algorithm, default sliding): sliding, token-bucket, leaky-bucket, and
	// redstream's fixed and sliding-counter. An unknown name warns and uses sliding.
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
	// Limits (limits.<name>, redstream's addition) makes the policy a multi-limit: every
	// request must pass every limit, all-or-nothing. Each limit takes algorithm, window-ms,
	// limit, capacity and rate-per-second; the policy's backend, key-prefix and
	// failure-policy apply to all of them.
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

var (
	sectionKeys = []string{"enabled", "backend", "window-ms", "limit", "key-prefix", "default-name", "failure-policy", "policies"}
	policyKeys  = []string{"algorithm", "backend", "window-ms", "limit", "capacity", "rate-per-second", "key-prefix", "failure-policy", "limits"}
	limitKeys   = []string{"algorithm", "window-ms", "limit", "capacity", "rate-per-second"}
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

// reader parses one section, collecting warnings.
type reader struct{ log *slog.Logger }

func (r reader) warn(n yamlx.Node, msg string, args ...any) {
	r.log.Warn("config: "+msg, append([]any{"key", n.Path, "line", n.Line()}, args...)...)
}

func (r reader) warnUnknown(n yamlx.Node, known []string) {
	for _, u := range n.Unknown(known...) {
		r.warn(u, "unknown setting ignored")
	}
}

func loadRateLimit(root yamlx.Node, opts Options) (*RateLimit, error) {
	r := reader{log: opts.logger()}
	sec, _, err := root.Lookup(RateLimitPath)
	if err != nil {
		return nil, err
	}
	s, nodes, err := r.section(sec)
	if err != nil {
		return nil, err
	}
	empty, _ := redstream.NewRegistry(nil)
	rl := &RateLimit{Settings: s, Registry: empty}
	if !s.Enabled {
		if len(s.Policies) > 0 {
			r.warn(sec, "policies are configured but enabled is not true; no limiter is built")
		}
		return rl, nil
	}
	b := builder{opts: opts, r: r}
	limiters := map[string]redstream.Limiter{}
	if len(s.Policies) == 0 {
		single := PolicySettings{
			Name: s.DefaultName, Algorithm: DefaultAlgorithm, Backend: s.Backend,
			WindowMs: s.WindowMs, Limit: s.Limit, KeyPrefix: s.KeyPrefix, FailurePolicy: s.FailurePolicy,
		}
		l, err := b.build(single, sec)
		if err != nil {
			return nil, err
		}
		limiters[s.DefaultName] = l
	}
	prefixes := map[string]int{} // Redis key prefix -> index of the policy using it
	for i, p := range s.Policies {
		if p.Backend == BackendRedis {
			if j, dup := prefixes[p.KeyPrefix]; dup && !sameLimits(s.Policies[j], p) {
				return nil, nodes[i].Errorf("key-prefix %q is also used by policy %q with other limits; their Redis keys would collide", p.KeyPrefix, s.Policies[j].Name)
			}
			prefixes[p.KeyPrefix] = i
		}
		l, err := b.build(p, nodes[i])
		if err != nil {
			return nil, err
		}
		limiters[p.Name] = l
	}
	if rl.Registry, err = redstream.NewRegistry(limiters); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	rl.Default, rl.DefaultName = pickDefault(rl.Registry, s.DefaultName, r, sec)
	return rl, nil
}

// pickDefault returns the limiter named name; else the first registered one by name; else
// a memory sliding window of 1000 ms / 100, the Java starter's order of fallbacks.
func pickDefault(reg *redstream.Registry, name string, r reader, sec yamlx.Node) (redstream.Limiter, string) {
	if l, err := reg.Get(name); err == nil {
		return l, name
	}
	for n, l := range reg.All() {
		r.warn(sec, "default-name matches no policy; using another registered limiter as the default", "default-name", name, "using", n)
		return l, n
	}
	r.warn(sec, "no limiter registered; the default is a memory sliding window of 1000 ms / 100")
	mem, _ := memory.NewLimiter(redstream.SlidingWindow(time.Second, 100), memory.Options{})
	n, _ := redstream.Named(name, mem)
	return n, name
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
func (r reader) section(sec yamlx.Node) (s RateLimitSettings, nodes []yamlx.Node, err error) {
	s, err = r.sectionSettings(sec, &nodes)
	return s, nodes, err
}

func (r reader) sectionSettings(sec yamlx.Node, nodes *[]yamlx.Node) (RateLimitSettings, error) {
	s := RateLimitSettings{
		Backend: DefaultBackend, WindowMs: DefaultWindowMs, Limit: DefaultLimit,
		KeyPrefix: DefaultKeyPrefix, DefaultName: DefaultName,
	}
	if !sec.Exists() {
		return s, nil
	}
	if _, err := sec.Entries(); err != nil {
		return s, err
	}
	r.warnUnknown(sec, sectionKeys)
	var err error
	if s.Enabled, err = getBool(sec, "enabled", s.Enabled); err != nil {
		return s, err
	}
	if s.Backend, err = getBackend(sec, s.Backend); err != nil {
		return s, err
	}
	if s.WindowMs, err = getWindowMs(sec, s.WindowMs); err != nil {
		return s, err
	}
	if s.Limit, err = getCount(sec, "limit", s.Limit); err != nil {
		return s, err
	}
	if s.KeyPrefix, err = getPrefix(sec, s.KeyPrefix); err != nil {
		return s, err
	}
	if s.DefaultName, err = getString(sec, "default-name", s.DefaultName); err != nil {
		return s, err
	}
	if s.DefaultName == "" {
		s.DefaultName = DefaultName
	}
	if s.FailurePolicy, err = getFailurePolicy(sec, s.FailurePolicy); err != nil {
		return s, err
	}
	pols, _, err := sec.Get("policies")
	if err != nil {
		return s, err
	}
	entries, err := pols.Entries()
	if err != nil {
		return s, err
	}
	for _, e := range entries {
		p, err := r.policy(e, s)
		if err != nil {
			return s, err
		}
		s.Policies = append(s.Policies, p)
		*nodes = append(*nodes, e)
	}
	return s, nil
}

func (r reader) policy(n yamlx.Node, s RateLimitSettings) (PolicySettings, error) {
	p := PolicySettings{Name: n.Name(), Backend: s.Backend, FailurePolicy: s.FailurePolicy}
	if p.Name == "" {
		return p, n.Errorf("a policy needs a name")
	}
	if _, err := n.Entries(); err != nil {
		return p, err
	}
	r.warnUnknown(n, policyKeys)
	if err := r.limitFields(n, &p); err != nil {
		return p, err
	}
	var err error
	if p.Backend, err = getBackend(n, p.Backend); err != nil {
		return p, err
	}
	if p.KeyPrefix, err = getPrefix(n, ""); err != nil {
		return p, err
	}
	if p.KeyPrefix == "" {
		p.KeyPrefix = s.KeyPrefix + ":" + p.Name
	}
	if p.FailurePolicy, err = getFailurePolicy(n, p.FailurePolicy); err != nil {
		return p, err
	}
	lims, _, err := n.Get("limits")
	if err != nil {
		return p, err
	}
	entries, err := lims.Entries()
	if err != nil {
		return p, err
	}
	for _, e := range entries {
		if _, err := e.Entries(); err != nil {
			return p, err
		}
		r.warnUnknown(e, limitKeys)
		l := PolicySettings{Name: e.Name(), Backend: p.Backend, KeyPrefix: p.KeyPrefix, FailurePolicy: p.FailurePolicy}
		if err := r.limitFields(e, &l); err != nil {
			return p, err
		}
		p.Limits = append(p.Limits, l)
	}
	if lims.Exists() && len(p.Limits) == 0 {
		return p, lims.Errorf("must list at least one limit")
	}
	return p, nil
}

// limitFields reads algorithm, window-ms, limit, capacity and rate-per-second into p, with
// defaults, and checks that the resulting spec is valid.
func (r reader) limitFields(n yamlx.Node, p *PolicySettings) error {
	p.Algorithm = DefaultAlgorithm
	if a, ok, err := n.Get("algorithm"); err != nil {
		return err
	} else if ok {
		name, err := a.String()
		if err != nil {
			return err
		}
		alg, known := algorithms[yamlx.Normalize(name)]
		if !known {
			r.warn(a, "unknown algorithm; using sliding", "algorithm", name)
			alg = DefaultAlgorithm
		}
		p.Algorithm = alg
	}
	var err error
	if p.WindowMs, err = getWindowMs(n, DefaultWindowMs); err != nil {
		return err
	}
	if p.Limit, err = getCount(n, "limit", DefaultLimit); err != nil {
		return err
	}
	if p.Capacity, err = getCapacity(n, DefaultCapacity); err != nil {
		return err
	}
	if p.RatePerSecond, err = getRate(n, DefaultRatePerSecond); err != nil {
		return err
	}
	if _, err := p.Spec().Params(); err != nil {
		return n.Errorf("%s: %v", p.Algorithm, strings.TrimPrefix(err.Error(), "redstream: "))
	}
	return nil
}

func getBool(n yamlx.Node, key string, def bool) (bool, error) {
	v, ok, err := n.Get(key)
	if err != nil || !ok {
		return def, err
	}
	return v.Bool()
}

func getString(n yamlx.Node, key, def string) (string, error) {
	v, ok, err := n.Get(key)
	if err != nil || !ok {
		return def, err
	}
	return v.String()
}

func getBackend(n yamlx.Node, def string) (string, error) {
	v, ok, err := n.Get("backend")
	if err != nil || !ok {
		return def, err
	}
	s, err := v.String()
	if err != nil {
		return def, err
	}
	switch strings.ToLower(s) {
	case BackendMemory:
		return BackendMemory, nil
	case BackendRedis:
		return BackendRedis, nil
	}
	return def, v.Errorf("must be memory or redis, got %q", s)
}

func getPrefix(n yamlx.Node, def string) (string, error) {
	v, ok, err := n.Get("key-prefix")
	if err != nil || !ok {
		return def, err
	}
	s, err := v.String()
	if err != nil {
		return def, err
	}
	if strings.TrimSpace(s) == "" {
		return def, nil // the Java starter falls back on a blank prefix too
	}
	if strings.ContainsAny(s, "{}") {
		return def, v.Errorf("must not contain '{' or '}' (they delimit Redis Cluster hash tags), got %q", s)
	}
	return s, nil
}

func getFailurePolicy(n yamlx.Node, def redstream.FailurePolicy) (redstream.FailurePolicy, error) {
	v, ok, err := n.Get("failure-policy")
	if err != nil || !ok {
		return def, err
	}
	s, err := v.String()
	if err != nil {
		return def, err
	}
	p, perr := redstream.ParseFailurePolicy(s)
	if perr != nil {
		return def, v.Errorf("must be fail-closed, fail-open or fallback, got %q", s)
	}
	return p, nil
}

const maxWindowMs = core.MaxDuration / 1000

func getWindowMs(n yamlx.Node, def int64) (int64, error) {
	v, ok, err := n.Get("window-ms")
	if err != nil || !ok {
		return def, err
	}
	w, err := v.Int64()
	if err != nil {
		return def, err
	}
	if w <= 0 {
		return def, v.Errorf("must be > 0")
	}
	if w > maxWindowMs {
		return def, v.Errorf("must be at most %d", maxWindowMs)
	}
	return w, nil
}

func getCount(n yamlx.Node, key string, def int64) (int64, error) {
	v, ok, err := n.Get(key)
	if err != nil || !ok {
		return def, err
	}
	c, err := v.Int64()
	if err != nil {
		return def, err
	}
	if c <= 0 {
		return def, v.Errorf("must be > 0")
	}
	if c > core.MaxCount {
		return def, v.Errorf("must be at most %d", core.MaxCount)
	}
	return c, nil
}

func getCapacity(n yamlx.Node, def float64) (float64, error) {
	v, ok, err := n.Get("capacity")
	if err != nil || !ok {
		return def, err
	}
	c, err := v.Float64()
	if err != nil {
		return def, err
	}
	if c < 1 || c > float64(core.MaxCount) {
		return def, v.Errorf("must be in [1, %d]", core.MaxCount)
	}
	return c, nil
}

func getRate(n yamlx.Node, def float64) (float64, error) {
	v, ok, err := n.Get("rate-per-second")
	if err != nil || !ok {
		return def, err
	}
	r, err := v.Float64()
	if err != nil {
		return def, err
	}
	if r <= 0 || r > 1e6 {
		return def, v.Errorf("must be in (0, 1000000]")
	}
	return r, nil
}

// builder builds the engines of policies.
type builder struct {
	opts Options
	r    reader
}

// build returns the policy's limiter wrapped by redstream.Named. n is the policy's node, for
// warnings.
func (b builder) build(p PolicySettings, n yamlx.Node) (redstream.Limiter, error) {
	backend := p.Backend
	if backend == BackendRedis && b.opts.Redis == nil {
		b.r.warn(n, "backend is redis but no Redis client was given; using memory", "policy", p.Name)
		backend = BackendMemory
	}
	var (
		l   redstream.Limiter
		err error
	)
	if len(p.Limits) > 0 {
		l, err = b.multi(p, backend)
	} else {
		l, err = b.single(p.Spec(), p, backend)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", n.Path, err)
	}
	return redstream.Named(p.Name, l)
}

func (b builder) single(spec redstream.Spec, p PolicySettings, backend string) (redstream.Limiter, error) {
	if backend == BackendMemory {
		return memory.NewLimiter(spec, b.opts.Memory)
	}
	ro, err := b.redisOptions(p, func() (redstream.Limiter, error) { return memory.NewLimiter(spec, b.opts.Memory) })
	if err != nil {
		return nil, err
	}
	return redisbackend.NewLimiter(b.opts.Redis, spec, ro)
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
		ro, err := b.redisOptions(p, mem)
		if err != nil {
			return nil, err
		}
		return redisbackend.NewMultiLimiter(b.opts.Redis, specs, ro)
	}
	return redstream.Multi(build, limits...)
}

// redisOptions returns the Redis engine options of p; fallback builds the in-process
// limiter of FailFallback.
func (b builder) redisOptions(p PolicySettings, fallback func() (redstream.Limiter, error)) (redisbackend.Options, error) {
	ro := redisbackend.Options{KeyPrefix: p.KeyPrefix, FailurePolicy: p.FailurePolicy}
	if p.FailurePolicy == redstream.FailFallback {
		fb, err := fallback()
		if err != nil {
			return ro, err
		}
		ro.Fallback = fb
	}
	return ro, nil
}
