package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/engine"
)

// Default key prefixes, one per engine. A blank Options.KeyPrefix selects the engine's
// default; the first two are the Java starter's.
const (
	DefaultTokenBucketPrefix    = "streaming:tb"
	DefaultSlidingWindowPrefix  = "streaming:rl"
	DefaultLeakyBucketPrefix    = "streaming:lb"
	DefaultSlidingCounterPrefix = "streaming:sc"
	DefaultFixedWindowPrefix    = "streaming:fw"
	DefaultMultiPrefix          = "streaming:ml"
	DefaultDedupPrefix          = "streaming:dedup"
)

// DefaultExpiryMargin is how long a limiter key outlives the moment its state is back to
// the initial one, by default.
const DefaultExpiryMargin = time.Second

// ErrTooLarge is returned for a key or element larger than Redis accepts in one argument
// (512 MB with Redis's default proto-max-bulk-len). It is bad input: no failure policy
// applies.
var ErrTooLarge = errors.New("redisbackend: too large")

var errInvalidConfig = redstream.ErrInvalidConfig

// Options configures a limiter. The zero value is valid: the engine's default key prefix,
// fail-closed, DefaultExpiryMargin.
type Options struct {
	// KeyPrefix starts every Redis key of the limiter; keys are
	// "<KeyPrefix>:{<key>}:<Fingerprint of the Spec>", so limiters of different Specs
	// never share state, and limiters of one Spec and prefix share it across processes.
	// Blank selects the engine's default (DefaultTokenBucketPrefix, ...). It may not
	// contain '{' or '}'.
	KeyPrefix string
	// FailurePolicy is what a decision does when Redis fails (error, timeout, script
	// error): redstream.FailClosed (default) returns the error with a denied Decision,
	// FailOpen admits, FailFallback asks Fallback. Bad input is never subject to it.
	FailurePolicy redstream.FailurePolicy
	// Fallback decides when Redis fails under FailFallback, typically an in-process
	// memory limiter with the same Spec. Required with FailFallback, nil otherwise.
	Fallback redstream.Limiter
	// ExpiryMargin is how long a key outlives the moment its state is back to the
	// initial one (default DefaultExpiryMargin; rounded up to whole milliseconds). Redis
	// expires keys by its own clock: with explicit times that run slower than the
	// server's clock, or clients whose clocks disagree, a larger margin keeps state alive
	// for requests that arrive "late".
	ExpiryMargin time.Duration
	// Logger receives the limiter's state changes, never one line per request (default
	// slog.Default()). Warn: Redis failed (error or timeout) after answering, or on the
	// first call, with the error and what decisions do now (fail-closed, fail-open, or the
	// fallback limiter). Info: Redis answers again after a failure. A limiter logs once
	// per change, however many calls fail meanwhile; a caller cancelling its own context
	// is not a failure.
	Logger *slog.Logger

	// JavaCompatible makes the limiter read and write the Java implementation's Redis
	// keys and values instead of redstream's, so that Go and Java processes share one
	// limit: keys "<KeyPrefix>:{<key>}" (sorted set) and "<KeyPrefix>:{<key>}:seq" for the
	// sliding window, "<KeyPrefix>:{<key>}:tb" (hash of tokens and ts) for the token
	// bucket, decided with the Java side's arithmetic in milliseconds (see java.go). Only
	// those two algorithms have a Java layout: any other Spec (and a sliding window that is
	// not a whole number of milliseconds), and NewMultiLimiter, are errors wrapping
	// redstream.ErrInvalidConfig. ExpiryMargin does not apply: keys expire as the Java side
	// sets them. Default false: redstream's own keys, which carry the Spec's Fingerprint and
	// never meet the Java implementation's.
	JavaCompatible bool
}

// Limiter is a rate limiter whose state lives in Redis: one Spec, or several limits on one
// key (NewMultiLimiter). Each decision runs one Lua script, atomically, in one round trip.
// A Limiter is safe for concurrent use; it holds no state of its own besides its
// configuration, so any number of processes may share the same keys.
type Limiter struct {
	client   rueidis.Client
	specs    []redstream.Spec
	script   *script
	prefix   string
	multi    bool     // built by NewMultiLimiter: one multi.lua call per key
	roles    []string // one key role per limit ("" for a single limit)
	params   []string // the script's fixed ARGV after now and n
	limit    int64    // the largest admissible cost
	policy   redstream.FailurePolicy
	fallback redstream.Limiter
	log      *slog.Logger
	failing  atomic.Bool // Redis failed on the last decision that reached it
	java     bool        // Options.JavaCompatible: the Java layout's keys and scripts
}

var _ redstream.Limiter = (*Limiter)(nil)

// NewLimiter returns a limiter of spec on client. It validates spec (errors wrap
// redstream.ErrInvalidConfig) and opts. The client stays the caller's: the limiter never
// closes it.
func NewLimiter(client rueidis.Client, spec redstream.Spec, opts Options) (*Limiter, error) {
	p, err := spec.Core()
	if err != nil {
		return nil, fmt.Errorf("redisbackend: %w", err)
	}
	as := algScripts[p.Name()]
	l, err := newLimiter(client, opts, as.prefix)
	if err != nil {
		return nil, err
	}
	l.specs = []redstream.Spec{spec}
	l.roles = []string{specRole(p)}
	l.limit = p.Max()
	l.params = append(append(algParams(p), l.params...), as.extra...)
	l.script = as.script
	if opts.JavaCompatible {
		if err := l.useJava(spec, p); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// NewMultiLimiter returns a limiter applying every spec to each key, all-or-nothing, in one
// script: a request is admitted only if every limit admits it, and only then does every
// limit record it. Decisions are combined as core.Combine does. A cost above the smallest
// limit is ErrCostTooLarge. Wrap it with redstream.Multi to name the limits. The client
// stays the caller's.
func NewMultiLimiter(client rueidis.Client, specs []redstream.Spec, opts Options) (*Limiter, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("redisbackend: %w: no limits", errInvalidConfig)
	}
	if opts.JavaCompatible {
		return nil, errJavaMulti
	}
	l, err := newLimiter(client, opts, DefaultMultiPrefix)
	if err != nil {
		return nil, err
	}
	l.specs = append([]redstream.Spec(nil), specs...)
	l.multi = true
	l.limit = core.MaxCount // l.params holds the margin, the multi script's ARGV[3]
	for i, s := range specs {
		p, err := s.Core()
		if err != nil {
			return nil, fmt.Errorf("redisbackend: limit %d (%v): %w", i, s, err)
		}
		l.limit = min(l.limit, p.Max())
		l.roles = append(l.roles, limitRole(i, p))
		l.params = append(l.params, algScripts[p.Name()].code)
		ps := algParams(p)
		for len(ps) < 3 {
			ps = append(ps, "0")
		}
		l.params = append(l.params, ps...)
	}
	l.script = scriptMulti
	return l, nil
}

func newLimiter(client rueidis.Client, opts Options, prefix string) (*Limiter, error) {
	if client == nil {
		return nil, fmt.Errorf("redisbackend: %w: nil client", errInvalidConfig)
	}
	if !isBlank(opts.KeyPrefix) {
		prefix = opts.KeyPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	switch opts.FailurePolicy {
	case redstream.FailClosed, redstream.FailOpen:
		if opts.Fallback != nil {
			return nil, fmt.Errorf("redisbackend: %w: a Fallback limiter is only used with FailFallback", errInvalidConfig)
		}
	case redstream.FailFallback:
		if opts.Fallback == nil {
			return nil, fmt.Errorf("redisbackend: %w: FailFallback needs a Fallback limiter", errInvalidConfig)
		}
	default:
		return nil, fmt.Errorf("redisbackend: %w: unknown failure policy %d", errInvalidConfig, int(opts.FailurePolicy))
	}
	margin := opts.ExpiryMargin
	switch {
	case margin < 0:
		return nil, fmt.Errorf("redisbackend: %w: ExpiryMargin = %v, want >= 0", errInvalidConfig, margin)
	case margin == 0:
		margin = DefaultExpiryMargin
	case margin > 365*24*time.Hour:
		return nil, fmt.Errorf("redisbackend: %w: ExpiryMargin = %v, want at most a year", errInvalidConfig, margin)
	}
	ms := (margin + time.Millisecond - 1) / time.Millisecond
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Limiter{
		log:      log,
		client:   client,
		prefix:   prefix,
		params:   []string{strconv.FormatInt(int64(ms), 10)},
		policy:   opts.FailurePolicy,
		fallback: opts.Fallback,
	}, nil
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			return false
		}
	}
	return true
}

// algParams returns the script parameters of p, in ARGV order after now and n.
func algParams(p core.Limit) []string {
	ints := p.Ints()
	s := make([]string, len(ints))
	for i, x := range ints {
		s[i] = strconv.FormatInt(x, 10)
	}
	return s
}

// Specs returns the limiter's specs (one, unless built by NewMultiLimiter) in a new slice.
func (l *Limiter) Specs() []redstream.Spec { return append([]redstream.Spec(nil), l.specs...) }

// KeyPrefix returns the prefix of the limiter's Redis keys.
func (l *Limiter) KeyPrefix() string { return l.prefix }

// Keys returns the Redis keys holding key's state, one per limit (for inspection, MEMORY
// USAGE or deletion); in the Java layout of the sliding window, the sorted set and its
// counter.
func (l *Limiter) Keys(key string) []string {
	return limiterKeys(l.prefix, key, l.roles, l.java)
}

// Allow is shorthand for AllowN(ctx, key, time.Time{}, 1): cost 1 at the Redis server's TIME.
func (l *Limiter) Allow(ctx context.Context, key string) (redstream.Decision, error) {
	return l.AllowN(ctx, key, time.Time{}, 1)
}

// AllowAt is shorthand for AllowN(ctx, key, now, 1).
func (l *Limiter) AllowAt(ctx context.Context, key string, now time.Time) (redstream.Decision, error) {
	return l.AllowN(ctx, key, now, 1)
}

// AllowN decides a request of cost n for key at now (the zero time reads the Redis server's
// TIME inside the script) in one round trip. Bad input returns an error and no Redis call:
// redstream.ErrEmptyKey, ErrInvalidCost (n <= 0), ErrCostTooLarge (n above the limit),
// ErrInvalidTime, or ErrTooLarge for a key Redis cannot hold. A Redis failure follows the
// limiter's FailurePolicy; under FailClosed the error names the script and the Decision
// is denied.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := l.check(key, now, n); err != nil {
		return redstream.Decision{}, err
	}
	keys := l.Keys(key)
	d, err := l.parse(l.script.exec(ctx, l.client, keys, l.args(now, n)))
	if err != nil {
		return l.fail(ctx, key, now, n, err)
	}
	l.answered()
	return d, nil
}

// check validates a request before any Redis call.
func (l *Limiter) check(key string, now time.Time, n int64) error {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return fmt.Errorf("redisbackend: %w", err)
	}
	if n > l.limit {
		return fmt.Errorf("redisbackend: %w: n = %d, limit = %d", redstream.ErrCostTooLarge, n, l.limit)
	}
	return l.checkKey(key)
}

// args returns the script's ARGV for one request.
func (l *Limiter) args(now time.Time, n int64) []string {
	a := make([]string, 0, 2+len(l.params))
	if now.IsZero() {
		a = append(a, "")
	} else {
		a = append(a, strconv.FormatInt(now.UnixMicro(), 10))
	}
	a = append(a, strconv.FormatInt(n, 10))
	return append(a, l.params...)
}

// parse turns the reply of a one-key script call into a Decision.
func (l *Limiter) parse(r rueidis.RedisResult) (redstream.Decision, error) {
	if err := r.Error(); err != nil {
		return redstream.Decision{}, l.script.wrap(err)
	}
	vs, err := r.AsIntSlice()
	if err != nil || len(vs) != 6*l.limits() {
		return redstream.Decision{}, l.script.wrap(fmt.Errorf("unexpected reply %v (%v)", r, err))
	}
	if l.limits() == 1 {
		return engine.Decision(coreDecision(vs)), nil
	}
	ds := make([]core.Decision, l.limits())
	for i := range ds {
		ds[i] = coreDecision(vs[6*i:])
	}
	return engine.Decision(core.Combine(ds)), nil
}

// parseN turns the reply of a script call deciding k keys into k Decisions.
func (l *Limiter) parseN(r rueidis.RedisResult, k int) ([]redstream.Decision, error) {
	if k == 1 {
		d, err := l.parse(r)
		return []redstream.Decision{d}, err
	}
	if err := r.Error(); err != nil {
		return nil, l.script.wrap(err)
	}
	vs, err := r.AsIntSlice()
	if err != nil || len(vs) != 6*k {
		return nil, l.script.wrap(fmt.Errorf("unexpected reply for %d keys (%v)", k, err))
	}
	ds := make([]redstream.Decision, k)
	for i := range ds {
		ds[i] = engine.Decision(coreDecision(vs[6*i:]))
	}
	return ds, nil
}

// coreDecision reads one decision of a reply. Remaining is never negative, whatever the
// script computed.
func coreDecision(v []int64) core.Decision {
	return core.Decision{Allowed: v[0] == 1, Limit: v[1], Remaining: max(v[2], 0), RetryAfter: v[3], ResetAfter: v[4], Delay: v[5]}
}

// fail applies the failure policy to a Redis error.
func (l *Limiter) fail(ctx context.Context, key string, now time.Time, n int64, err error) (redstream.Decision, error) {
	l.failed(ctx, err)
	switch l.policy {
	case redstream.FailOpen:
		return redstream.Decision{Allowed: true}, nil
	case redstream.FailFallback:
		// The fallback keeps its own state; a cancelled context still lets it decide, since
		// it typically does no I/O.
		return l.fallback.AllowN(context.WithoutCancel(ctx), key, now, n)
	}
	return redstream.Decision{}, err
}

// failed records a Redis failure, logging it if Redis answered until now. A context the
// caller cancelled says nothing about Redis.
func (l *Limiter) failed(ctx context.Context, err error) {
	if errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled) {
		return
	}
	if l.failing.CompareAndSwap(false, true) {
		then := "decisions fail closed (denied, with the error)"
		switch l.policy {
		case redstream.FailOpen:
			then = "decisions fail open (admitted)"
		case redstream.FailFallback:
			then = "decisions fall back to the fallback limiter"
		}
		l.log.LogAttrs(ctx, slog.LevelWarn, "redisbackend: Redis failed; "+then,
			slog.String("prefix", l.prefix), slog.String("policy", l.policy.String()), slog.Any("error", err))
	}
}

// answered records a decision Redis made, logging the recovery after a failure. Its cost
// on the healthy path is one atomic load.
func (l *Limiter) answered() {
	if l.failing.Load() && l.failing.CompareAndSwap(true, false) {
		l.log.LogAttrs(context.Background(), slog.LevelInfo, "redisbackend: Redis answers again; decisions are made in Redis",
			slog.String("prefix", l.prefix), slog.String("policy", l.policy.String()))
	}
}

// Reset deletes key's state, so its next request sees a new key.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if key == "" {
		return fmt.Errorf("redisbackend: %w", redstream.ErrEmptyKey)
	}
	if err := checkSize("key", len(key)+len(l.prefix)); err != nil {
		return err
	}
	if err := l.client.Do(ctx, l.client.B().Del().Key(l.Keys(key)...).Build()).Error(); err != nil {
		return fmt.Errorf("redisbackend: reset: %w", err)
	}
	return nil
}
