package redisbackend

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/failure"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/metrics"
)

// DedupOptions configures a deduplicator. The zero value is valid.
type DedupOptions struct {
	// KeyPrefix starts every Redis key of the deduplicator: "<KeyPrefix>:{<name>}:<role>".
	// Blank selects DefaultDedupPrefix. It may not contain '{' or '}'.
	KeyPrefix string
	// SetTTL, for the set strategy only, expires the whole set this long after its last
	// write (rounded up to whole milliseconds). Zero, the default, keeps the set until
	// Clear, as the Java starter does.
	SetTTL time.Duration
	// Timeout bounds each Redis call of the deduplicator, whatever the caller's context
	// allows (default DefaultTimeout, 100 ms; negative: the caller's context alone). Past
	// it the call returns an error wrapping context.DeadlineExceeded.
	Timeout time.Duration
	// Breaker configures the deduplicator's circuit breaker (redstream.BreakerOptions;
	// failures as for Options.Breaker): while it is open, calls return an error wrapping
	// redstream.ErrCircuitOpen at once.
	Breaker redstream.BreakerOptions
	// Logger receives one Warn when the breaker opens and one Info when it closes again
	// (default slog.Default()). Failures are also counted in
	// redis_streaming_dedup_failures_total{name,reason}, and the breaker's state exported as
	// redis_streaming_dedup_breaker_state{name} (package metrics, set metrics.Dedup).
	Logger *slog.Logger

	// JavaCompatible makes the set deduplicator use the Java implementation's key, the
	// bare name (a set of the elements, SADD), so that Go and Java processes deduplicate
	// together; KeyPrefix must then be blank. The windowed and Bloom deduplicators have no
	// shared Java layout: JavaCompatible is an error wrapping redstream.ErrInvalidConfig
	// for them. Default false: "<KeyPrefix>:{<name>}:set", never the Java key.
	JavaCompatible bool
	// DisableCoalescing turns coalesced checks off: by default, CheckAndMark calls that
	// arrive while 4 calls of the deduplicator are in flight wait for one to return and
	// then go together in one call (see "Coalesced decisions" in the package
	// documentation). Off, every CheckAndMark is its own call. With a negative Timeout,
	// checks never coalesce.
	DisableCoalescing bool
}

// NewDeduplicator returns the deduplicator of spec.Strategy named name (the Java starter's
// factory). Zero fields of spec take redstream's defaults; an unknown strategy or bad
// parameters are errors wrapping redstream.ErrInvalidConfig. Deduplicators with the same
// prefix, name and strategy share their state, across processes. Each is safe for
// concurrent use; CheckAndMark is atomic across processes (exactly one caller sees a new
// element as new); the empty element is never a duplicate and never recorded. The client
// stays the caller's.
//
//   - redstream.DedupSet: exact, a Redis set of every element seen (SADD), kept until Clear
//     or, with DedupOptions.SetTTL, until SetTTL after the last write; memory grows with the
//     distinct elements. UniqueCount is exact (SCARD).
//   - redstream.DedupBloom: a Bloom filter on plain Redis strings (no module), sized by
//     spec.BloomParams (default 1,000,000 expected insertions at a 3% false-positive
//     rate), with the bit positions of core (any runtime computes the same bits) set by a
//     script that checks and adds atomically. No false negatives; a new element is a
//     duplicate with probability about FPRate once Insertions are in. The filter is split
//     into Shards keys, each with its own hash tag, so a large filter spreads over a
//     cluster; keys carry the sizing, so a filter re-created with other parameters starts
//     empty. UniqueCount counts this process's adds that set a bit since it was created or
//     cleared, without touching Redis.
//   - redstream.DedupWindowed: forgets an element spec.Window (default one hour) after it
//     was last seen (core.WindowDedup); CheckAndMark refreshes the last-seen time of a
//     duplicate. State is a sorted set pruned on every write plus a high-water mark, both
//     expiring Window + 60 s after the last write; every operation runs at max(high-water
//     mark, now), and a zero time is the Redis server's TIME. It implements
//     redstream.TimedDeduplicator.
//
// The set and Bloom deduplicators also decide many elements in one round trip with a
// method CheckAndMarkBatch(ctx, elements []string) ([]bool, error), result i for
// elements[i] (found by type assertion, as redstream.AllowBatch finds a batching limiter).
func NewDeduplicator(client rueidis.Client, name string, spec redstream.DedupSpec, opts DedupOptions) (redstream.Deduplicator, error) {
	if err := spec.Validate(); err != nil {
		return nil, failure.Prefixed("redisbackend", err)
	}
	switch spec.Strategy {
	case redstream.DedupSet:
		return newSetDeduplicator(client, name, opts)
	case redstream.DedupBloom:
		return newBloomDeduplicator(client, name, spec, opts)
	}
	return newWindowDeduplicator(client, name, spec.WithDefaults().Window, opts)
}

// dedupBase holds what every deduplicator needs.
type dedupBase struct {
	link
	name   string
	prefix string
	route  string // a Redis key of the deduplicator, whose master's breaker judges its calls
	g      guard
	fails  *failureCounters
	// noCoalesce is DedupOptions.DisableCoalescing.
	noCoalesce bool
}

func newDedupBase(client rueidis.Client, name, kind string, opts DedupOptions) (dedupBase, error) {
	if client == nil {
		return dedupBase{}, fmt.Errorf("redisbackend: %w: nil client", errInvalidConfig)
	}
	b, err := newDedupBaseOf(name, kind, opts)
	if err != nil {
		return b, err
	}
	b.link = link{client: client, caps: capsOf(client)}
	b.g.bind(b.link)
	return b, nil
}

// newDedupBaseOf validates name and opts, without a client.
func newDedupBaseOf(name, kind string, opts DedupOptions) (dedupBase, error) {
	if name == "" {
		return dedupBase{}, fmt.Errorf("redisbackend: %w: empty deduplicator name", errInvalidConfig)
	}
	prefix := DefaultDedupPrefix
	if !isBlank(opts.KeyPrefix) {
		prefix = opts.KeyPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return dedupBase{}, err
	}
	if err := checkSize("deduplicator name", len(name)+len(prefix)); err != nil {
		return dedupBase{}, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	g, err := newGuard(opts.Timeout, opts.Breaker, log, "redisbackend: "+kind+" deduplicator",
		"calls fail at once (redstream.ErrCircuitOpen)", slog.String("prefix", prefix), slog.String("name", name))
	if err != nil {
		return dedupBase{}, err
	}
	if g.br != nil {
		health.RegisterGauge(metrics.Dedup, metrics.Name("redis_streaming_dedup_breaker_state", "name", name), g.state)
	}
	return dedupBase{name: name, prefix: prefix, g: g, fails: newFailureCounters(name), noCoalesce: opts.DisableCoalescing}, nil
}

// do runs one Redis call of the deduplicator, bounded by its timeout and guarded by its
// breaker; f's error is the Redis result's.
func (b *dedupBase) do(ctx context.Context, f func(ctx context.Context, c rueidis.Client, cp *caps) error) error {
	return b.doN(ctx, 1, f)
}

// doN is do for a call that checks as much as k calls: its deadline is k timeouts.
func (b *dedupBase) doN(ctx context.Context, k int, f func(ctx context.Context, c rueidis.Client, cp *caps) error) error {
	c, cp, err := b.get()
	if err != nil {
		b.fails.count(err)
		return err
	}
	cctx, cancel, t, err := b.g.beginN(ctx, b.route, k)
	if err != nil {
		b.fails.count(err)
		return err
	}
	if b.g.suspected() {
		// The callers read what f writes only when do returns nil: f has returned then.
		var ferr error
		if ferr, err = bounded(cctx, func() error { return once(cctx, func() error { return f(cctx, c, cp) }) }); err == nil {
			err = ferr
		}
	} else {
		err = once(cctx, func() error { return f(cctx, c, cp) })
	}
	cancel.done()
	err = b.g.end(ctx, t, err)
	if isBackendFailure(err) {
		b.fails.count(err)
	}
	return err
}

// failureCounters are redis_streaming_dedup_failures_total{name, reason}, one per reason.
type failureCounters struct {
	timeout, err, open, canceled *metrics.Counter
}

func newFailureCounters(name string) *failureCounters {
	c := func(r failure.Reason) *metrics.Counter {
		return metrics.Dedup.GetOrCreateCounter(metrics.Name("redis_streaming_dedup_failures_total", "name", name, "reason", string(r)))
	}
	return &failureCounters{c(failure.Timeout), c(failure.Error), c(failure.BreakerOpen), c(failure.Canceled)}
}

// count counts a failed call by its reason.
func (f *failureCounters) count(err error) {
	switch failure.ReasonOf(err) {
	case failure.Timeout:
		f.timeout.Inc()
	case failure.BreakerOpen:
		f.open.Inc()
	case failure.Canceled:
		f.canceled.Inc()
	default:
		f.err.Inc()
	}
}

// BreakerState returns the state of the deduplicator's circuit breaker (BreakerClosed
// when DedupOptions.Breaker.Disabled).
func (b *dedupBase) BreakerState() redstream.BreakerState { return b.g.state() }

// checkElement validates a non-empty element stored in Redis.
func checkElement(e string) error { return checkSize("element", len(e)) }

// setDedup is the exact deduplicator: a Redis set of every element seen (SADD, so
// check-and-mark is atomic across processes), kept until Clear or, with
// DedupOptions.SetTTL, until SetTTL after the last write. Memory grows with the number of
// distinct elements. It is safe for concurrent use.
type setDedup struct {
	dedupBase
	key    string
	ttl    string       // ms, "0" for none
	gather *dedupGather // nil: every CheckAndMark is its own call
}

var _ redstream.Deduplicator = (*setDedup)(nil)

// newSetDeduplicator returns the set deduplicator named name. The client stays the caller's.
func newSetDeduplicator(client rueidis.Client, name string, opts DedupOptions) (*setDedup, error) {
	b, err := newDedupBase(client, name, "set", opts)
	if err != nil {
		return nil, err
	}
	return newSetDedup(b, opts)
}

func newSetDedup(b dedupBase, opts DedupOptions) (*setDedup, error) {
	name := b.name
	if opts.SetTTL < 0 {
		return nil, fmt.Errorf("redisbackend: %w: SetTTL = %v, want >= 0", errInvalidConfig, opts.SetTTL)
	}
	ms := (opts.SetTTL + time.Millisecond - 1) / time.Millisecond
	key := redisKey(b.prefix, name, roleSet)
	if opts.JavaCompatible {
		k, err := javaDedupKey(name, redstream.DedupSet, opts)
		if err != nil {
			return nil, err
		}
		key = k
	}
	b.route = key
	d := &setDedup{dedupBase: b, key: key, ttl: strconv.FormatInt(int64(ms), 10)}
	d.gather = newDedupGather(b, d.gathered, scriptDedupSet.wrap)
	return d, nil
}

// Key returns the Redis key of the set.
func (d *setDedup) Key() string { return d.key }

// IsDuplicate reports whether element was recorded (SISMEMBER). The empty element never is.
func (d *setDedup) IsDuplicate(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	if err := checkElement(element); err != nil {
		return false, err
	}
	var ok bool
	err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) (err error) {
		ok, err = c.Do(ctx, c.B().Sismember().Key(d.key).Member(element).Build()).AsBool()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return ok, nil
}

// MarkSeen records element. The empty element is never recorded.
func (d *setDedup) MarkSeen(ctx context.Context, element string) error {
	_, err := d.CheckAndMark(ctx, element)
	return err
}

// CheckAndMark records element and reports whether it was already recorded; across
// processes exactly one caller sees a new element as new. The empty element is never a
// duplicate and never recorded.
func (d *setDedup) CheckAndMark(ctx context.Context, element string) (bool, error) {
	if element == "" {
		return false, nil
	}
	if err := checkElement(element); err != nil {
		return false, fmt.Errorf("redisbackend: element 0: %w", err)
	}
	if g := d.gather; g != nil { // coalesced checks (dedupcoalesce.go)
		if w := g.check(element, ""); w != nil {
			return g.answer(ctx, w)
		}
		defer g.done()
	}
	dups, err := d.checkAndMark(ctx, []string{element}, 1)
	if err != nil {
		return false, err
	}
	return dups[0], nil
}

// gathered checks and marks the elements of a gathering (dedupcoalesce.go).
func (d *setDedup) gathered(ws []*dedupWaiter, k int) {
	elems := make([]string, len(ws))
	for i, w := range ws {
		elems[i] = w.q.elem
	}
	dups, err := d.checkAndMark(context.Background(), elems, k)
	fill(ws, dups, err)
}

// CheckAndMarkBatch is CheckAndMark of every element, in order, in one script call (so a
// repeated element is a duplicate the second time). Result i is for elements[i].
func (d *setDedup) CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error) {
	return d.checkAndMark(ctx, elements, 1)
}

// checkAndMark is CheckAndMarkBatch in a call bounded by k timeouts.
func (d *setDedup) checkAndMark(ctx context.Context, elements []string, k int) ([]bool, error) {
	out := make([]bool, len(elements))
	args := make([]string, 1, len(elements)+1)
	args[0] = d.ttl
	idx := make([]int, 0, len(elements))
	for i, e := range elements {
		if e == "" {
			continue
		}
		if err := checkElement(e); err != nil {
			return nil, fmt.Errorf("redisbackend: element %d: %w", i, err)
		}
		args = append(args, e)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return out, nil
	}
	var vs []int64
	err := d.doN(ctx, k, func(ctx context.Context, c rueidis.Client, cp *caps) (err error) {
		r := scriptDedupSet.exec(ctx, c, cp, []string{d.key}, args)
		vs, err = r.AsIntSlice()
		if err == nil && len(vs) != len(idx) {
			err = fmt.Errorf("%w %v", errUnexpectedReply, r)
		}
		return err
	})
	if err != nil {
		return nil, scriptDedupSet.wrap(err)
	}
	for j, i := range idx {
		out[i] = vs[j] == 1
	}
	return out, nil
}

// Remove forgets element.
func (d *setDedup) Remove(ctx context.Context, element string) error {
	if element == "" {
		return nil
	}
	if err := checkElement(element); err != nil {
		return err
	}
	if err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) error {
		return c.Do(ctx, c.B().Srem().Key(d.key).Member(element).Build()).Error()
	}); err != nil {
		return fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return nil
}

// Clear forgets every element (DEL).
func (d *setDedup) Clear(ctx context.Context) error {
	if err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) error {
		return c.Do(ctx, c.B().Del().Key(d.key).Build()).Error()
	}); err != nil {
		return fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return nil
}

// UniqueCount returns the exact number of distinct elements recorded (SCARD).
func (d *setDedup) UniqueCount(ctx context.Context) (int64, error) {
	var n int64
	err := d.do(ctx, func(ctx context.Context, c rueidis.Client, _ *caps) (err error) {
		n, err = c.Do(ctx, c.B().Scard().Key(d.key).Build()).AsInt64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("redisbackend: set dedup: %w", err)
	}
	return n, nil
}
