package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker is the cache's circuit breaker: after breakerThreshold consecutive outage errors
// it opens, and calls fail at once with errBreakerOpen instead of each waiting out
// Config.Timeout; after breakerCooldown one call (the probe) goes to Redis: a success
// closes the breaker, a failure opens it for another cool-down. onChange is called on
// every change of state, outside the lock, in order.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	onChange  func(from, to State, err error)

	st       atomic.Int32 // State, read without the lock on every call
	mu       sync.Mutex
	fails    atomic.Int32 // consecutive outage errors; written under mu
	openedAt time.Time
	probeAt  time.Time // when the last probe was let through (half-open)
	notify   sync.Mutex
}

// State is the state of a Cache's circuit breaker.
type State int32

const (
	// StateClosed: Redis works; every call goes to it.
	StateClosed State = iota
	// StateOpen: Redis failed breakerThreshold times in a row; calls fail at once with an
	// ErrUnavailable error (under LoadOnError the loader answers) until the cool-down ends.
	StateOpen
	// StateHalfOpen: the cool-down ended; one call at a time probes Redis, the others fail
	// at once. A probe's success closes the breaker, its failure opens it again.
	StateHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// allow reports whether a call may go to Redis.
func (b *breaker) allow() bool {
	if State(b.st.Load()) == StateClosed {
		return true
	}
	b.mu.Lock()
	now := b.now()
	var change func()
	ok := false
	switch State(b.st.Load()) {
	case StateClosed:
		ok = true
	case StateOpen:
		if now.Sub(b.openedAt) >= b.cooldown {
			change = b.set(StateHalfOpen, nil)
			b.probeAt, ok = now, true
		}
	case StateHalfOpen:
		// A probe that gave no verdict (its caller's context ended) must not keep the
		// breaker half-open forever: another is let through after a cool-down.
		if now.Sub(b.probeAt) >= b.cooldown {
			b.probeAt, ok = now, true
		}
	}
	b.mu.Unlock()
	b.run(change)
	return ok
}

// success records a call Redis answered.
func (b *breaker) success() {
	if State(b.st.Load()) == StateClosed && b.fails.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.fails.Store(0)
	var change func()
	if State(b.st.Load()) != StateClosed {
		change = b.set(StateClosed, nil)
	}
	b.mu.Unlock()
	b.run(change)
}

// failure records a call that failed with an outage error.
func (b *breaker) failure(err error) {
	b.mu.Lock()
	fails := int(b.fails.Add(1))
	var change func()
	switch State(b.st.Load()) {
	case StateClosed:
		if fails >= b.threshold {
			change = b.set(StateOpen, err)
			b.openedAt = b.now()
		}
	case StateHalfOpen:
		change = b.set(StateOpen, err)
		b.openedAt = b.now()
	}
	b.mu.Unlock()
	b.run(change)
}

// state returns the current state.
func (b *breaker) state() State { return State(b.st.Load()) }

// set changes the state (b.mu held) and returns the notification to run after unlocking.
func (b *breaker) set(to State, err error) func() {
	from := State(b.st.Swap(int32(to)))
	if from == to || b.onChange == nil {
		return nil
	}
	return func() { b.onChange(from, to, err) }
}

// run calls a notification; notifications run one at a time.
func (b *breaker) run(f func()) {
	if f == nil {
		return
	}
	b.notify.Lock()
	defer b.notify.Unlock()
	f()
}

// Thresholds of the circuit breaker.
const (
	// breakerThreshold is the number of consecutive outage errors that open the breaker.
	breakerThreshold = 3
	// breakerCooldown is how long the breaker stays open before a probe.
	breakerCooldown = time.Second
)

// newBreaker returns the cache's breaker: its state is exported as MetricBreakerState,
// and each change goes to Config.OnStateChange and to the log (Warn when Redis starts
// failing, Info when it works again).
func (c *Cache) newBreaker() *breaker {
	b := &breaker{threshold: breakerThreshold, cooldown: breakerCooldown, now: time.Now}
	b.onChange = func(from, to State, err error) {
		switch {
		case to == StateOpen && from == StateClosed:
			c.log.Warn("cache: Redis is failing; circuit breaker open: calls fail fast until a probe succeeds",
				"cache", c.cfg.Name, "on-redis-error", string(c.cfg.OnRedisError), "err", err)
		case to == StateClosed:
			c.log.Info("cache: Redis works again; circuit breaker closed", "cache", c.cfg.Name)
		}
		if c.cfg.OnStateChange != nil {
			c.cfg.OnStateChange(StateChange{Cache: c.cfg.Name, From: from, To: to, Err: err})
		}
	}
	c.m.set.NewGauge(MetricBreakerState+`{name="`+escapeLabel(c.cfg.Name)+`"}`, func() float64 { return float64(b.state()) })
	return b
}

// StateChange is a change of state of a Cache's circuit breaker, given to
// Config.OnStateChange.
type StateChange struct {
	// Cache is Config.Name.
	Cache string
	// From and To are the states before and after.
	From, To State
	// Err is the Redis error that opened the breaker (nil for other changes).
	Err error
}
