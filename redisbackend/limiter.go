package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
	"github.com/redstream-go/redstream/internal/failure"
)

// Default key prefixes. A blank Options.KeyPrefix selects DefaultKeyPrefix, whatever the
// algorithm (keys end with the Spec's fingerprint, so algorithms never share state), as
// the configuration's key-prefix does; both are the Java starter's defaults.
const (
	DefaultKeyPrefix   = "streaming:rl"
	DefaultDedupPrefix = "streaming:dedup"
)

// javaTokenBucketPrefix is what a blank prefix selects for a JavaCompatible token bucket:
// the Java class's own default, so both sides meet on the same keys.
const javaTokenBucketPrefix = "streaming:tb"

// DefaultExpiryMargin is how long a limiter key outlives the moment its state is back to
// the initial one, by default.
const DefaultExpiryMargin = time.Second

// ErrTooLarge is returned for a key or element larger than Redis accepts in one argument
// (512 MB with Redis's default proto-max-bulk-len). It is bad input
// (see redstream.WithFailurePolicy): no failure policy applies.
var ErrTooLarge error = &badInput{"redisbackend: too large"}

// badInput is an error caused by the caller's arguments; redstream.WithFailurePolicy
// recognises it by its BadInput method.
type badInput struct{ msg string }

func (e *badInput) Error() string  { return e.msg }
func (e *badInput) BadInput() bool { return true }

// ErrNotConnected is returned, wrapped, by the engines of a [Connector] until it has made
// its client. It is a backend failure: failure policies apply to it.
var ErrNotConnected = errors.New("redisbackend: not connected to Redis yet")

var errInvalidConfig = redstream.ErrInvalidConfig

// Options configures a limiter. The zero value is valid: DefaultKeyPrefix,
// DefaultExpiryMargin, DefaultTimeout and the default circuit breaker. A limiter returns
// Redis failures as errors (fail-closed); redstream.WithFailurePolicy wraps it to fail
// open or fall back to an in-process limiter instead.
type Options struct {
	// KeyPrefix starts every Redis key of the limiter; keys are
	// "<KeyPrefix>:{<key>}:<fingerprint of the Spec>", so limiters of different Specs
	// never share state, and limiters of one Spec and prefix share it across processes.
	// Blank selects DefaultKeyPrefix (for a JavaCompatible token bucket, the Java class's
	// "streaming:tb"). It may not contain '{' or '}'.
	KeyPrefix string
	// ExpiryMargin is how long a key outlives the moment its state is back to the
	// initial one (default DefaultExpiryMargin; rounded up to whole milliseconds). Redis
	// expires keys by its own clock: with explicit times that run slower than the
	// server's clock, or clients whose clocks disagree, a larger margin keeps state alive
	// for requests that arrive "late".
	ExpiryMargin time.Duration
	// Timeout bounds the Redis call of each decision (and of Reset; AllowBatch gets one
	// Timeout per 128 keys), whatever the caller's context allows: rueidis would otherwise wait for its write timeout (10 s
	// by default) on a hung server. Default DefaultTimeout (100 ms); negative leaves the
	// caller's context alone to bound the call. A caller's sooner deadline still applies.
	// Past it the decision returns an error wrapping context.DeadlineExceeded, which a
	// failure policy answers.
	Timeout time.Duration
	// Breaker configures the limiter's circuit breaker (redstream.BreakerOptions; the zero
	// value is the default breaker), which turns an outage into one failed call per
	// cool-down instead of one timeout per decision. A failure is a Redis call that did
	// not answer within Timeout, could not be sent or read (connection refused, reset), or
	// got the error reply of a server that cannot serve (LOADING, BUSY, READONLY, OOM,
	// CLUSTERDOWN, ...). A script's runtime error on one key proves the server alive and is
	// not a failure; neither is a call whose caller cancelled its own context. A call that
	// outlived the caller's own deadline is a failure when that deadline left it at least
	// 10 ms, so that callers with deadlines shorter than Timeout open the breaker on a hung
	// server too. The same holds for a deduplicator (DedupOptions.Breaker).
	Breaker redstream.BreakerOptions
	// Logger receives the limiter's state changes, never one line per request (default
	// slog.Default()). Warn: the circuit breaker opened (Redis failed, by error or
	// timeout, Breaker.Failures times in a row or at Breaker.ErrorRate), with the last
	// error. Info: the breaker closed again (Redis answers). A limiter logs once per
	// change, however many calls fail meanwhile; a caller cancelling its own context is
	// not a failure. With Breaker.Disabled nothing is logged.
	Logger *slog.Logger

	// JavaCompatible makes the limiter read and write the Java implementation's Redis
	// keys and values instead of redstream's, so that Go and Java processes share one
	// limit: keys "<KeyPrefix>:{<key>}" (sorted set) and "<KeyPrefix>:{<key>}:seq" for the
	// sliding window, "<KeyPrefix>:{<key>}:tb" (hash of tokens and ts) for the token
	// bucket, decided with the Java side's arithmetic in milliseconds (see java.go). Only
	// those two algorithms have a Java layout: any other Spec (and a sliding window that is
	// not a whole number of milliseconds), and NewMultiLimiter, are errors wrapping
	// redstream.ErrInvalidConfig. ExpiryMargin does not apply: keys expire as the Java side
	// sets them. Default false: redstream's own keys, which carry the Spec's fingerprint and
	// never meet the Java implementation's.
	JavaCompatible bool
	// Previous and Carry keep the state of keys across a change of the limiter's specs:
	// Previous lists the specs this limiter replaces, one per spec of the limiter (index
	// for index; a zero Spec, or the spec itself, for a limit that did not change), and
	// Carry (core.CarryAsIs or core.CarryProportional) how a key's state carries over.
	// The first decision or reservation (ReserveN) on a key whose state under the new spec
	// does not exist yet seeds it from the key of the previous spec (same KeyPrefix and user
	// key, so the same hash tag and cluster slot), atomically in the request's script
	// (carry.lua, or reserve.lua in carry.lua's layout); the previous
	// key is left to processes still deciding with the previous spec and expires on its
	// own. Each key is seeded once: from then on its new key exists. See core.Carry for
	// what each strategy keeps per algorithm. Empty Previous, or core.CarryReset (the default), starts every key
	// afresh. A pair coreops.CheckCarry refuses (another algorithm, another window,
	// a changed sliding log) is an error wrapping redstream.ErrInvalidConfig, and so is
	// Previous with JavaCompatible or on NewConcurrencyLimiter. A carrying limiter decides one key per script call (AllowBatch
	// pipelines them); Peek reads the new keys as they are and seeds nothing.
	Previous []redstream.Spec
	Carry    core.Carry
	// DisableLocalDenials turns local denials off: by default a limiter remembers each
	// key's latest denial (up to 8,192 keys) and answers the requests
	// that denial proves denied without a Redis call, with the Decision Redis would give
	// (see "Local denials" in the package documentation). A multi-limit limiter and a
	// JavaCompatible one have none.
	DisableLocalDenials bool
	// Quota configures leased quota for hot keys under their limit (see QuotaOptions and
	// "Leased quota" in the package documentation). The zero value leaves it off.
	Quota QuotaOptions
	// DisableCoalescing turns coalesced decisions off: by default, AllowN calls that
	// arrive while 4 decisions of the same server (of the same slot on a cluster) are in
	// flight wait for one to return and then go together, as one pipeline of batch calls (see
	// "Coalesced decisions" in the package documentation). Off, every AllowN is its own
	// script call. A multi-limit limiter, one with leased quota or carrying state from
	// Previous specs, and one with a negative Timeout never coalesce.
	DisableCoalescing bool
}

// Limiter is a rate limiter whose state lives in Redis: one Spec, or several specs on one
// key (NewMultiLimiter). Each decision runs one Lua script, atomically, in one round trip.
// A Limiter is safe for concurrent use. Besides its configuration it holds only the state of
// its circuit breaker and its table of local denials (see Options.DisableLocalDenials), which
// Redis's state proves; the rate-limit state is all in Redis, so any number of processes may
// share the same keys.
type Limiter struct {
	link
	specs  []redstream.Spec
	script *script
	prefix string
	multi  bool     // runs multi.lua: one call per key
	roles  []string // one key role per limit ("" for a single limit)
	codes  []string // each limit's code in multi.lua and peek.lua (core.Algorithm.Code)
	params []string // the script's fixed ARGV after now and n
	limit  int64    // the largest admissible cost
	g      guard
	java   bool        // Options.JavaCompatible: the Java layout's keys and scripts
	local  *localTable // local denials (localdeny.go); nil when off
	margin string      // the expiry margin (ms), the scripts' ARGV (reserve.lua, settle.lua, carry.lua)
	// oldRoles are the key roles of the previous specs (Options.Previous, carry.go), ""
	// for a limit without one; nil when the limiter carries no state.
	oldRoles []string
	quota    *quotaTable // leased quota (quota.go); nil when off
	gathers  *gathers    // coalesced decisions (coalesce.go); nil when off
}

var _ redstream.Limiter = (*Limiter)(nil)

// NewLimiter returns a limiter of spec on client. It validates spec (errors wrap
// redstream.ErrInvalidConfig) and opts. The client stays the caller's: the limiter never
// closes it.
func NewLimiter(client rueidis.Client, spec redstream.Spec, opts Options) (*Limiter, error) {
	if client == nil {
		return nil, fmt.Errorf("redisbackend: %w: nil client", errInvalidConfig)
	}
	l, err := newSingle(spec, opts)
	if err != nil {
		return nil, err
	}
	return l.attach(client), nil
}

// newSingle returns a limiter of spec without a client.
func newSingle(spec redstream.Spec, opts Options) (*Limiter, error) {
	p, err := spec.Core()
	if err != nil {
		return nil, failure.Prefixed("redisbackend", err)
	}
	as, viaMulti, err := singleScript(p.Name())
	if err != nil {
		return nil, err
	}
	peekCode, err := codeIn(scriptPeek, p.Name())
	if err != nil {
		return nil, err
	}
	prefix := DefaultKeyPrefix
	if opts.JavaCompatible && spec.Algorithm == redstream.AlgorithmTokenBucket {
		prefix = javaTokenBucketPrefix
	}
	l, err := newLimiterOf(opts, prefix)
	if err != nil {
		return nil, err
	}
	margin := l.params[0] // newLimiterOf's: the expiry margin
	l.specs = []redstream.Spec{spec}
	l.roles = []string{specRole(p)}
	l.codes = []string{peekCode}
	l.limit = p.Max()
	if viaMulti {
		// multi.lua with one limit: ARGV margin, code, Ints padded; one key per call.
		l.multi = true
		l.params = append(append(l.params, peekCode), paddedParams(p)...)
	} else {
		l.params = append(append(algParams(p), l.params...), as.extra...)
	}
	l.script = as.script
	if opts.JavaCompatible {
		if err := l.useJava(spec, p); err != nil {
			return nil, err
		}
	}
	// Local denials rebuild core's decisions; a JavaCompatible limiter decides with the
	// Java side's arithmetic, so it always asks Redis.
	if !opts.DisableLocalDenials && !opts.JavaCompatible {
		l.local = newLocalTable(p, l.prefix, localDenialEntries)
	}
	if err := l.useCarry(opts); err != nil {
		return nil, err
	}
	if opts.Quota.Enabled && opts.JavaCompatible {
		return nil, fmt.Errorf("redisbackend: %w: Quota.Enabled: a JavaCompatible limiter has no leased quota (the Java side would not see it)", errInvalidConfig)
	}
	if opts.Quota.Enabled && len(opts.Previous) > 0 {
		return nil, fmt.Errorf("redisbackend: %w: Quota.Enabled: a limiter carrying state from Previous specs has no leased quota (quota.lua does not seed)", errInvalidConfig)
	}
	if l.quota, err = newQuotaTable(p, opts.Quota, l.prefix, margin); err != nil {
		return nil, err
	}
	if !opts.DisableCoalescing && !l.multi && l.quota == nil && l.g.timeout > 0 {
		l.gathers = new(gathers)
	}
	return l, nil
}

// NewMultiLimiter returns a limiter applying every spec to each key, all-or-nothing, in one
// script: a request is admitted only if every spec admits it, and only then does every
// spec record it. Decisions are combined as core.Combine does. A cost above the smallest
// limit is ErrCostTooLarge. Wrap it with redstream.Multi to name the specs (rules). The
// client stays the caller's.
func NewMultiLimiter(client rueidis.Client, specs []redstream.Spec, opts Options) (*Limiter, error) {
	if client == nil {
		return nil, fmt.Errorf("redisbackend: %w: nil client", errInvalidConfig)
	}
	l, err := newMulti(specs, opts)
	if err != nil {
		return nil, err
	}
	return l.attach(client), nil
}

// newMulti returns a multi-limiter of specs without a client.
func newMulti(specs []redstream.Spec, opts Options) (*Limiter, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("redisbackend: %w: no limits", errInvalidConfig)
	}
	if opts.JavaCompatible {
		return nil, errJavaMulti
	}
	if opts.Quota.Enabled {
		return nil, fmt.Errorf("redisbackend: %w: Quota.Enabled: a multi-limit limiter has no leased quota", errInvalidConfig)
	}
	l, err := newLimiterOf(opts, DefaultKeyPrefix)
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
		code, err := codeIn(scriptMulti, p.Name())
		if err != nil {
			return nil, fmt.Errorf("redisbackend: limit %d (%v): %w", i, s, err)
		}
		if _, err := codeIn(scriptPeek, p.Name()); err != nil {
			return nil, fmt.Errorf("redisbackend: limit %d (%v): %w", i, s, err)
		}
		l.limit = min(l.limit, p.Max())
		l.roles = append(l.roles, limitRole(i, p))
		l.codes = append(l.codes, code)
		l.params = append(append(l.params, code), paddedParams(p)...)
	}
	l.script = scriptMulti
	if err := l.useCarry(opts); err != nil {
		return nil, err
	}
	return l, nil
}

// attach gives l its client.
func (l *Limiter) attach(c rueidis.Client) *Limiter {
	l.link = link{client: c, caps: capsOf(c)}
	l.g.bind(l.link)
	return l
}

// newLimiterOf validates opts into a limiter without a client.
func newLimiterOf(opts Options, prefix string) (*Limiter, error) {
	if !isBlank(opts.KeyPrefix) {
		prefix = opts.KeyPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
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
	g, err := newGuard(opts.Timeout, opts.Breaker, log, "redisbackend: limiter",
		"decisions fail at once (redstream.ErrCircuitOpen) and follow the failure policy", slog.String("prefix", prefix))
	if err != nil {
		return nil, err
	}
	return &Limiter{
		prefix: prefix,
		params: []string{strconv.FormatInt(int64(ms), 10)},
		margin: strconv.FormatInt(int64(ms), 10),
		g:      g,
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
	ints := coreops.Ints(p)
	s := make([]string, len(ints))
	for i, x := range ints {
		s[i] = strconv.FormatInt(x, 10)
	}
	return s
}

// paddedParams returns the script parameters of p padded with "0" to the three of each
// limit of multi.lua and peek.lua.
func paddedParams(p core.Limit) []string {
	ps := algParams(p)
	for len(ps) < 3 {
		ps = append(ps, "0")
	}
	return ps
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

// AllowN decides a request of cost n for key at now (the zero time reads the Redis server's
// TIME inside the script) in one round trip. Bad input returns an error and no Redis call:
// redstream.ErrEmptyKey, ErrInvalidCost (n <= 0), ErrCostTooLarge (n above the limit),
// ErrInvalidTime, or ErrTooLarge for a key Redis cannot hold. A Redis failure returns an
// error naming the script with a denied Decision: context.DeadlineExceeded past
// Options.Timeout, redstream.ErrCircuitOpen at once while the breaker is open,
// ErrNotConnected before a Connector's client exists, or Redis's error.
// redstream.WithFailurePolicy turns these into admissions or fallback decisions.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	if err := l.check(key, now, n); err != nil {
		return redstream.Decision{}, err
	}
	d, local, sent := l.local.lookup(key, now, n)
	if local {
		return d, nil
	}
	if l.quota != nil {
		return l.allowLeased(ctx, key, now, n, sent)
	}
	c, cp, err := l.get()
	if err != nil {
		return redstream.Decision{}, l.script.wrap(err)
	}
	keys := l.callKeys(key)
	if l.gathers != nil { // coalesced decisions (coalesce.go)
		g := l.gathers.of(c, keys[0])
		if w := g.enter(decisionReq{key: key, now: now, n: n, st: sent}); w != nil {
			return l.wait(ctx, g, w)
		}
		defer l.handOn(g)
	}
	return l.allowOne(ctx, c, cp, keys, key, now, n, sent)
}

// allowOne decides key in a script call of its own.
func (l *Limiter) allowOne(ctx context.Context, c rueidis.Client, cp *caps, keys []string, key string, now time.Time, n int64, sent localStart) (redstream.Decision, error) {
	cctx, cancel, t, err := l.g.begin(ctx, keys[0])
	if err != nil {
		return redstream.Decision{}, l.script.wrap(err)
	}
	var d redstream.Decision
	var r rueidis.RedisResult
	if l.g.suspected() {
		r, err = bounded(cctx, func() rueidis.RedisResult { return l.decide(cctx, c, cp, keys, now, n) })
	} else {
		r = l.decide(cctx, c, cp, keys, now, n)
	}
	cancel.done()
	if err == nil {
		d, err = l.parse(r)
	} else {
		err = l.script.wrap(err)
	}
	if err = l.g.end(ctx, t, err); err != nil {
		return redstream.Decision{}, err
	}
	l.local.record(key, now, n, sent, d)
	return d, nil
}

// decide runs the decision script on keys, and once more if its error proves it never
// reached Redis (see once).
func (l *Limiter) decide(ctx context.Context, c rueidis.Client, cp *caps, keys []string, now time.Time, n int64) rueidis.RedisResult {
	r := l.script.exec(ctx, c, cp, keys, l.args(now, n))
	if retryable(ctx, r.Error()) {
		r = l.script.exec(ctx, c, cp, keys, l.args(now, n))
	}
	return r
}

// DeniedKeys returns up to n of the keys the limiter now denies from memory (local denials:
// a key denied by Redis whose next requests the limiter answers itself until the denial's
// RetryAfter), most denied first: the hot keys over their limit, for an operator (the
// console's limits page lists them). It reads the process's table only, never Redis, and
// is empty with Options.DisableLocalDenials, for multi-limit and JavaCompatible limiters,
// and for algorithms without local denials.
func (l *Limiter) DeniedKeys(n int) []DeniedKey { return l.local.top(n) }

// BreakerState returns the state of the limiter's circuit breaker (BreakerClosed when
// Options.Breaker.Disabled); on a cluster, the worst of its masters' breakers (open when
// any is open). metrics.Named exports it as a gauge.
func (l *Limiter) BreakerState() redstream.BreakerState { return l.g.state() }

// check validates a request before any Redis call.
func (l *Limiter) check(key string, now time.Time, n int64) error {
	if err := engine.CheckRequest(key, now, n); err != nil {
		return failure.Prefixed("redisbackend", err)
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
	ms, err := r.ToArray()
	if err == nil && len(ms) != 6*l.limits() {
		err = fmt.Errorf("%d integers, want %d", len(ms), 6*l.limits())
	}
	if err != nil {
		return redstream.Decision{}, l.script.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
	}
	if l.limits() == 1 { // read in place: a decision's reply costs no allocation
		var vs [6]int64
		if err := readInts(ms, vs[:]); err != nil {
			return redstream.Decision{}, l.script.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
		}
		return engine.Decision(coreDecision(vs[:])), nil
	}
	vs := make([]int64, len(ms))
	if err := readInts(ms, vs); err != nil {
		return redstream.Decision{}, l.script.wrap(fmt.Errorf("%w %v (%v)", errUnexpectedReply, r, err))
	}
	ds := make([]core.Decision, l.limits())
	for i := range ds {
		ds[i] = coreDecision(vs[6*i:])
	}
	return engine.Decision(core.Combine(ds)), nil
}

// readInts reads the integers of a reply's array into vs (of ms's length).
func readInts(ms []rueidis.RedisMessage, vs []int64) error {
	for i := range ms {
		v, err := ms[i].AsInt64()
		if err != nil {
			return err
		}
		vs[i] = v
	}
	return nil
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
		return nil, l.script.wrap(fmt.Errorf("%w for %d keys (%v)", errUnexpectedReply, k, err))
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

// Reset deletes key's state, so its next request sees a new key.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if key == "" {
		return fmt.Errorf("redisbackend: %w", redstream.ErrEmptyKey)
	}
	if err := checkSize("key", len(key)+len(l.prefix)); err != nil {
		return err
	}
	defer l.local.reset(key) // after the DEL: denials of requests sent before it are stale
	l.quota.forget(key)
	c, _, err := l.get()
	if err != nil {
		return fmt.Errorf("redisbackend: reset: %w", err)
	}
	keys := l.Keys(key)
	cctx, cancel, t, err := l.g.begin(ctx, keys[0])
	if err != nil {
		return fmt.Errorf("redisbackend: reset: %w", err)
	}
	del := func() error { return c.Do(cctx, c.B().Del().Key(keys...).Build()).Error() }
	if l.g.suspected() {
		var derr error
		if derr, err = bounded(cctx, func() error { return once(cctx, del) }); err == nil {
			err = derr
		}
	} else {
		err = once(cctx, del)
	}
	cancel.done()
	if err = l.g.end(ctx, t, err); err != nil {
		return fmt.Errorf("redisbackend: reset: %w", err)
	}
	return nil
}
