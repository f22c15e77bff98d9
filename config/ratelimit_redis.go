package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/redisbackend"
)

// Defaults of the Redis limiter keys (timeout-ms, breaker.*, local-denials), those of
// package redisbackend.
const (
	DefaultTimeoutMs         = int64(redisbackend.DefaultTimeout / time.Millisecond)
	DefaultBreakerFailures   = health.DefaultFailures
	DefaultBreakerErrorRate  = health.DefaultErrorRate
	DefaultBreakerMinCalls   = health.DefaultMinCalls
	DefaultBreakerWindowMs   = int64(health.DefaultWindow / time.Millisecond)
	DefaultBreakerCoolDownMs = int64(health.DefaultCoolDown / time.Millisecond)
	DefaultBreakerProbes     = health.DefaultProbes
	DefaultLocalDenials      = true
)

// RedisLimiterSettings are the keys of a Redis limiter's deadline, circuit breaker and key
// layout (redstream's additions), set on the section (the default of every policy and of
// the single limiter) or on a policy; a policy's key overrides the section's, and each
// breaker key is inherited on its own. They do not apply to the memory backend.
type RedisLimiterSettings struct {
	// TimeoutMs (timeout-ms, default 100) bounds the Redis call of each decision, in
	// milliseconds, whatever the caller's context allows; past it the failure policy
	// answers. -1 leaves the caller's context alone to bound the call.
	TimeoutMs int64
	// Breaker (breaker.*) configures the limiter's circuit breaker.
	Breaker BreakerSettings
	// JavaCompatible (java-compatible, default false) reads and writes the Java
	// implementation's keys, so that Go and Java processes share one limit. Only a
	// single-limit sliding or token-bucket policy has a Java layout.
	JavaCompatible bool
	// LocalDenials (local-denials, default true) lets the limiter answer requests that a
	// remembered denial proves denied without a Redis call. A multi-limit or
	// java-compatible limiter has none, whatever this says.
	LocalDenials bool
}

// BreakerSettings are the keys of breaker (redisbackend.BreakerOptions), with their
// defaults filled in.
type BreakerSettings struct {
	// Disabled (disabled, default false) turns the breaker off.
	Disabled bool
	// Failures (failures, default 3) consecutive failures open the breaker; -1 disables
	// this rule (on a cluster, one failing master then cannot open it for every key
	// unless it makes ErrorRate of the calls fail).
	Failures int
	// ErrorRate (error-rate, default 0.5), in (0, 1], opens the breaker when that fraction
	// of the calls of the last WindowMs failed, once MinCalls were made; -1 disables it.
	ErrorRate float64
	// MinCalls (min-calls, default 20) is the number of calls below which ErrorRate is not
	// judged.
	MinCalls int
	// WindowMs (window-ms, default 10000) is the period ErrorRate is measured over, in
	// milliseconds.
	WindowMs int64
	// CoolDownMs (cool-down-ms, default 1000) is how long the open breaker fails calls at
	// once before a probe reaches Redis, in milliseconds.
	CoolDownMs int64
	// Probes (probes, default 1) is the number of concurrent probes after the cool-down,
	// and of successful ones that close the breaker.
	Probes int
}

// DefaultRedisLimiterSettings returns the settings of a section that sets none of the keys.
func DefaultRedisLimiterSettings() RedisLimiterSettings {
	return RedisLimiterSettings{
		TimeoutMs: DefaultTimeoutMs, LocalDenials: DefaultLocalDenials,
		Breaker: BreakerSettings{
			Failures: DefaultBreakerFailures, ErrorRate: DefaultBreakerErrorRate, MinCalls: DefaultBreakerMinCalls,
			WindowMs: DefaultBreakerWindowMs, CoolDownMs: DefaultBreakerCoolDownMs, Probes: DefaultBreakerProbes,
		},
	}
}

// Options returns the redisbackend.Options of these settings with keyPrefix.
func (r RedisLimiterSettings) Options(keyPrefix string) redisbackend.Options {
	timeout := time.Duration(r.TimeoutMs) * time.Millisecond
	if r.TimeoutMs < 0 {
		timeout = -1
	}
	b := r.Breaker
	return redisbackend.Options{
		KeyPrefix: keyPrefix, Timeout: timeout, JavaCompatible: r.JavaCompatible, DisableLocalDenials: !r.LocalDenials,
		Breaker: redisbackend.BreakerOptions{
			Disabled: b.Disabled, Failures: b.Failures, ErrorRate: b.ErrorRate, MinCalls: b.MinCalls,
			Window: time.Duration(b.WindowMs) * time.Millisecond, CoolDown: time.Duration(b.CoolDownMs) * time.Millisecond,
			Probes: b.Probes,
		},
	}
}

// The keys as bound from the file; nil: not set here (inherited).
type (
	breakerYAML struct {
		Disabled   *bool    `yaml:"disabled"`
		Failures   *int     `yaml:"failures"`
		ErrorRate  *float64 `yaml:"error-rate"`
		MinCalls   *int     `yaml:"min-calls"`
		WindowMs   *int64   `yaml:"window-ms"`
		CoolDownMs *int64   `yaml:"cool-down-ms"`
		Probes     *int     `yaml:"probes"`
	}
	limiterRedisYAML struct {
		TimeoutMs      *int64      `yaml:"timeout-ms"`
		Breaker        breakerYAML `yaml:"breaker"`
		JavaCompatible *bool       `yaml:"java-compatible"`
		LocalDenials   *bool       `yaml:"local-denials"`
	}
)

// redisKeys are the keys of limiterRedisYAML, for the checks of where they apply.
var redisKeys = []string{"timeout-ms", "breaker", "java-compatible", "local-denials"}

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

// redisSettings returns def overridden by the keys y sets on mapping n, each checked.
func (l *loader) redisSettings(n yamlx.Node, y limiterRedisYAML, def RedisLimiterSettings) (RedisLimiterSettings, error) {
	r := def
	if v := y.TimeoutMs; v != nil {
		if *v != -1 && (*v < 1 || *v > maxWindowMs) {
			return r, l.at(n, "timeout-ms", "must be a number of milliseconds from 1 to %d, or -1 to leave the caller's context alone to bound each call; got %d", maxWindowMs, *v)
		}
		r.TimeoutMs = *v
	}
	if v := y.JavaCompatible; v != nil {
		r.JavaCompatible = *v
	}
	if v := y.LocalDenials; v != nil {
		r.LocalDenials = *v
	}
	b, by := &r.Breaker, y.Breaker
	if v := by.Disabled; v != nil {
		b.Disabled = *v
	}
	if v := by.Failures; v != nil {
		if *v != -1 && *v < 1 {
			return r, l.at(n, "breaker.failures", "must be at least 1 consecutive failure, or -1 to disable the rule; got %d", *v)
		}
		b.Failures = *v
	}
	if v := by.ErrorRate; v != nil {
		if *v != -1 && (*v <= 0 || *v > 1) {
			return r, l.at(n, "breaker.error-rate", "must be a fraction in (0, 1], or -1 to disable the rule; got %v", *v)
		}
		b.ErrorRate = *v
	}
	if v := by.MinCalls; v != nil {
		if *v < 1 {
			return r, l.at(n, "breaker.min-calls", "must be at least 1; got %d", *v)
		}
		b.MinCalls = *v
	}
	for _, d := range []struct {
		key string
		v   *int64
		dst *int64
	}{{"breaker.window-ms", by.WindowMs, &b.WindowMs}, {"breaker.cool-down-ms", by.CoolDownMs, &b.CoolDownMs}} {
		if d.v == nil {
			continue
		}
		if *d.v < 1 || *d.v > maxWindowMs {
			return r, l.at(n, d.key, "must be a number of milliseconds from 1 to %d; got %d", maxWindowMs, *d.v)
		}
		*d.dst = *d.v
	}
	if v := by.Probes; v != nil {
		if *v < 1 {
			return r, l.at(n, "breaker.probes", "must be at least 1; got %d", *v)
		}
		b.Probes = *v
	}
	if bn, ok, _ := n.Get("breaker"); ok && !b.Disabled && b.Failures == -1 && b.ErrorRate == -1 {
		if err := l.strict(bn, "failures and error-rate are both -1, so the breaker would never open; set disabled: true instead"); err != nil {
			return r, err
		}
		l.warn(bn, "failures and error-rate are both -1: the breaker never opens")
	}
	if by.Disabled != nil && *by.Disabled {
		bn, _, _ := n.Get("breaker")
		entries, _ := bn.Entries()
		for _, e := range entries {
			if yamlx.Normalize(e.Name()) == "disabled" {
				continue
			}
			if err := l.strict(e, "does not apply: the breaker is disabled"); err != nil {
				return r, err
			}
			l.warn(e, "does not apply: the breaker is disabled; ignored")
		}
	}
	return r, nil
}

// checkRedisPolicy checks that the Redis limiter keys of policy p (node n, section node sec)
// apply to it: none on the memory backend (strict: an error; lenient: a warning), and
// java-compatible only on a single sliding or token-bucket limit (always an error: the
// engine has no Java layout for anything else).
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
		return nil
	}
	for _, v := range setRedisKeys(sec) {
		if err := l.strict(v, "does not apply: no limiter of the section uses the redis backend"); err != nil {
			return err
		}
		l.warn(v, "does not apply: no limiter of the section uses the redis backend; ignored")
	}
	return nil
}

// Describe returns the settings in one line, as `redstream config check` prints them:
// "timeout-ms 100, breaker {failures 3, ...}, java-compatible false, local-denials true".
func (r RedisLimiterSettings) Describe() string {
	var b strings.Builder
	if r.TimeoutMs < 0 {
		b.WriteString("timeout-ms -1 (the caller's context)")
	} else {
		fmt.Fprintf(&b, "timeout-ms %d", r.TimeoutMs)
	}
	br := r.Breaker
	if br.Disabled {
		b.WriteString(", breaker disabled")
	} else {
		fmt.Fprintf(&b, ", breaker {failures %d, error-rate %g, min-calls %d, window-ms %d, cool-down-ms %d, probes %d}",
			br.Failures, br.ErrorRate, br.MinCalls, br.WindowMs, br.CoolDownMs, br.Probes)
	}
	fmt.Fprintf(&b, ", java-compatible %v, local-denials %v", r.JavaCompatible, r.LocalDenials)
	return b.String()
}
