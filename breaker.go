package redstream

import "time"

// BreakerOptions configures the circuit breaker of a Redis component: the limiters and
// deduplicators of package redisbackend (Options.Breaker, DedupOptions.Breaker) and the
// cache (cache.Config.Breaker); package config reads it from YAML through its tags
// (breaker.failures, breaker.window-ms, ...). The zero value is the default breaker: it
// opens after 3 consecutive failures, or when half of at least 20 calls in 10 s failed;
// while open, calls fail at once with an error wrapping [ErrCircuitOpen], without reaching
// Redis; after a cool-down of 1 s one probe call reaches Redis, and closes the breaker when
// it succeeds or opens it for another cool-down when it fails. Each component's
// documentation says which failed calls count (a call that did not answer in time, could
// not be sent or read, or got the error reply of a server that cannot serve).
//
// The breaker counts causes, not calls: when a connection drops, the calls in flight on it
// fail at once with one connection-level error (EOF, a reset connection), and those
// failures count as one. On a Redis Cluster each master has a breaker of its own, chosen by
// the key's hash slot: a failing master fails fast the keys it serves, and the keys of the
// other masters keep working.
type BreakerOptions struct {
	// Disabled turns the breaker off: every call reaches Redis and, against a hung
	// server, waits for its timeout. YAML: disabled. Default false.
	Disabled bool `yaml:"disabled"`
	// Failures is the number of consecutive failures that opens the breaker; negative
	// disables this rule. On a cluster it counts each master's failures apart.
	// YAML: failures. Default (0) 3.
	Failures int `yaml:"failures"`
	// ErrorRate, in (0, 1], opens the breaker when that fraction of the calls of the last
	// Window failed, once MinCalls calls were made; negative disables this rule.
	// YAML: error-rate. Default (0) 0.5.
	ErrorRate float64 `yaml:"error-rate"`
	// MinCalls is the number of calls in Window below which ErrorRate is not judged.
	// YAML: min-calls. Default (0) 20.
	MinCalls int `yaml:"min-calls"`
	// Window is the period ErrorRate is measured over. YAML: window-ms (milliseconds, or
	// a duration such as "10s"). Default (0) 10 s.
	Window time.Duration `yaml:"window-ms" unit:"ms"`
	// CoolDown is how long the open breaker fails calls before a probe; it bounds how long
	// calls keep failing fast after Redis is back. YAML: cool-down-ms. Default (0) 1 s.
	CoolDown time.Duration `yaml:"cool-down-ms" unit:"ms"`
	// Probes is the number of concurrent probe calls once the cool-down is over, and the
	// number of successful probes that close the breaker. YAML: probes. Default (0) 1.
	Probes int `yaml:"probes"`
	// OnStateChange, when set, is called after each transition of the breaker,
	// synchronously on the goroutine whose call caused it; keep it fast and do not call
	// the component from it. It is not read from YAML.
	OnStateChange func(BreakerChange) `yaml:"-"`
	// OnFailure, when set, is called with each counted failure of a Redis call (not with
	// the fast failures of an open breaker), synchronously on the caller's goroutine; keep
	// it fast. It is not read from YAML.
	OnFailure func(error) `yaml:"-"`
}

// BreakerChange is one transition of a circuit breaker, given to
// BreakerOptions.OnStateChange.
type BreakerChange struct {
	// Node is the address (host:port) of the cluster master whose breaker changed; empty
	// for a single server, and on a cluster for the breaker of the keys whose master is
	// not known yet (before the component's first CLUSTER SLOTS answers).
	Node string
	// From and To are the states before and after.
	From, To BreakerState
	// Err is the failure that opened the breaker; nil when it half-opens or closes.
	Err error
	// At is when the transition happened.
	At time.Time
}
