package redisbackend

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
	"github.com/redstream-go/redstream/metrics"
)

// DefaultQuotaDuration is the default of QuotaOptions.Duration.
const DefaultQuotaDuration = 100 * time.Millisecond

// DefaultQuotaMaxShare is the default of QuotaOptions.MaxShare.
const DefaultQuotaMaxShare = 0.1

// maxLeaseDuration bounds QuotaOptions.Duration.
const maxLeaseDuration = time.Minute

// leaseEntries is how many keys' leases one limiter holds in process; a full table
// forgets an entry for each new one (its lease's unused units stay spent).
const leaseEntries = 8192

// QuotaOptions configures leased quota (Options.Quota): a limiter takes a slice of a hot
// key's budget from Redis in one script call and admits requests from it in process until
// the slice is spent or the lease ends, so a key under its limit costs one round trip per
// lease instead of one per request. The zero value leaves leases off. Across processes the
// limit holds exactly: a lease takes its units from the key's state as a request of that
// cost would, and what it did not use is given back (or, if its process died, stays spent).
// See "Leased quota" in the package documentation for what each algorithm does. The
// counters of metrics.LeasedQuotaCounters (redis_streaming_rl_quota_*_total, label prefix:
// the limiter's key prefix) show the leases at work. The yaml tags are the keys of a
// rate-limit policy's quota.* in package config.
type QuotaOptions struct {
	// Enabled turns leases on. Default false. A leaky bucket (its decisions carry a
	// shaping delay), a sliding log (it records each admission's time), a multi-limit
	// limiter and a JavaCompatible one refuse it: NewLimiter returns an error wrapping
	// redstream.ErrInvalidConfig.
	Enabled bool `yaml:"enabled"`
	// Duration is the longest a lease lasts (default DefaultQuotaDuration, at most a
	// minute). A window algorithm's lease also ends with its window; a token bucket's
	// lasts at most the bucket's full refill time (Capacity / Rate).
	Duration time.Duration `yaml:"duration-ms" unit:"ms"`
	// MaxShare is the largest part of the limit one lease takes, in (0, 1] (default
	// DefaultQuotaMaxShare): the most a process holds of a key's budget, so that other
	// processes, and the key once it cools, are not starved. A lease is sized by the rate
	// the process admitted on the key during its previous lease, times Duration: a cold
	// key takes just the request's cost, as without leases.
	MaxShare float64 `yaml:"max-share"`
}

// quotaCodes names the algorithms leases support, by their code in quota.lua (optional: an
// algorithm of core's registry it lacks refuses Options.Quota); leaseRefused says why an
// algorithm has none, where the reason is known (TestQuotaTables ranges over the registry).
var (
	quotaCodes = map[string]string{
		"token-bucket":    "tb",
		"fixed":           "fw",
		"sliding-counter": "sc",
	}
	leaseRefused = map[string]string{
		"leaky-bucket": "its decisions carry a shaping delay, which a lease's admissions cannot",
		"sliding":      "its log records the time of each admission, which a lease's admissions would not be",
	}
)

var scriptQuota = newScript("quota.lua")

// quotaTable is a limiter's leases, one entry per key, in shards. A nil table (leases
// off) holds nothing.
type quotaTable struct {
	limit    int64
	window   int64    // a window algorithm's window (µs); 0 for the token bucket
	share    int64    // the largest slice
	dur      int64    // QuotaOptions.Duration, µs
	args     []string // quota.lua's ARGV[4..9]
	perShard int
	seed     maphash.Seed
	calls    atomic.Int64 // quota.lua calls made (for tests)
	counters metrics.QuotaCounters
	shards   [localShards]leaseShard
}

type leaseShard struct {
	mu sync.Mutex
	m  map[string]*leaseEntry
}

// leaseEntry is one key's lease. mu is held while the key's lease is renewed (one Redis
// call), so the requests of a hot key share one call.
type leaseEntry struct {
	mu sync.Mutex
	lease
}

// lease is a lease's state, guarded by its entry's mu.
type lease struct {
	mono    bool  // the lease serves requests at the server's TIME (t0 on the monotonic clock)
	t0      int64 // µs: the taking request's explicit now, or its send time (monotonic)
	life    int64 // µs after t0 the lease admits (a quarter short of its end, for the give-back)
	end     int64 // µs: the lease's end on the script's clock (the give-back's ARGV)
	granted int64 // units taken (0: no lease)
	left    int64 // units not admitted yet
	rem     int64 // the take's Remaining
	reset   int64 // the take's ResetAfter (µs)
	at      int64 // µs: the take's now on the script's clock
}

// newQuotaTable returns the lease table of a single-limit limiter of p with key prefix
// prefix, or an error wrapping redstream.ErrInvalidConfig naming the field, or nil when o
// leaves leases off.
func newQuotaTable(p core.Limit, o QuotaOptions, prefix, margin string) (*quotaTable, error) {
	if !o.Enabled {
		return nil, nil
	}
	code, ok := quotaCodes[p.Name()]
	if !ok {
		why := leaseRefused[p.Name()]
		if why == "" {
			why = "quota.lua does not decide it"
		}
		return nil, fmt.Errorf("redisbackend: %w: Quota.Enabled: algorithm %s has no leases: %s", errInvalidConfig, p.Name(), why)
	}
	d := o.Duration
	switch {
	case d == 0:
		d = DefaultQuotaDuration
	case d < time.Microsecond || d > maxLeaseDuration:
		return nil, fmt.Errorf("redisbackend: %w: Quota.Duration = %v, want in [1µs, %v]", errInvalidConfig, d, maxLeaseDuration)
	}
	share := o.MaxShare
	switch {
	case share == 0:
		share = DefaultQuotaMaxShare
	case !(share > 0 && share <= 1):
		return nil, fmt.Errorf("redisbackend: %w: Quota.MaxShare = %v, want in (0, 1]", errInvalidConfig, share)
	}
	t := &quotaTable{limit: p.Max(), dur: d.Microseconds(), seed: maphash.MakeSeed(), perShard: max(1, leaseEntries/localShards),
		counters: metrics.LeasedQuotaCounters(prefix)}
	if code != "tb" {
		t.window = coreops.Ints(p)[0] // fixed_window.lua's and sliding_counter.lua's W
	}
	t.share = max(1, int64(math.Floor(float64(t.limit)*share)))
	t.args = append(append([]string{code}, paddedParams(p)...), margin, strconv.FormatInt(t.dur, 10))
	for i := range t.shards {
		t.shards[i].m = make(map[string]*leaseEntry)
	}
	return t, nil
}

// entry returns key's entry, made on first use.
func (t *quotaTable) entry(key string) *leaseEntry {
	s := &t.shards[maphash.String(t.seed, key)%localShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		if len(s.m) >= t.perShard {
			for k := range s.m { // the map's random order
				delete(s.m, k)
				break
			}
		}
		e = &leaseEntry{}
		s.m[key] = e
	}
	return e
}

// forget drops key's entry (Reset).
func (t *quotaTable) forget(key string) {
	if t == nil {
		return
	}
	s := &t.shards[maphash.String(t.seed, key)%localShards]
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// len returns the number of entries (for tests).
func (t *quotaTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// leaseClock is a request's time on a lease's axis: the explicit now in µs, or the
// monotonic clock's µs for a request at the server's TIME.
func leaseClock(now time.Time) (at int64, mono bool) {
	if now.IsZero() {
		return monoMicros(), true
	}
	return now.UnixMicro(), false
}

// elapsed is how long after e's take a request at at is, counted as localdeny counts it on
// the monotonic clock (1 µs more and 1/1024 longer, so a slow local clock still ends the
// lease first); -1 for a request on the other axis or before the take.
func (e *lease) elapsed(at int64, mono bool) int64 {
	if e.mono != mono || at < e.t0 {
		return -1
	}
	el := at - e.t0
	if mono {
		el += 1 + el>>10
	}
	return el
}

// spend admits a request of cost n at at from e's lease, if it lasts and holds n units.
func (e *lease) spend(t *quotaTable, at int64, mono bool, n int64) (redstream.Decision, bool) {
	el := e.elapsed(at, mono)
	if e.granted == 0 || el < 0 || el >= e.life || e.left < n {
		return redstream.Decision{}, false
	}
	e.left -= n
	t.counters.LocalAllowed.Inc()
	return engine.Decision(core.Decision{Allowed: true, Limit: t.limit, Remaining: e.rem + e.left, ResetAfter: max(0, e.reset-el)}), true
}

// want is the slice a request of cost n at at asks for: n plus what the key's previous
// lease admitted per Duration (0 for a key seen for the first time or cold), at most
// the larger of n and the table's share.
func (t *quotaTable) want(e *lease, at int64, mono bool, n int64) int64 {
	w := n
	if el := e.elapsed(at, mono); e.granted > 0 && el > 0 {
		used := e.granted - e.left
		w += int64(math.Min(float64(used)*float64(t.dur)/float64(el), float64(t.share)))
	}
	return min(w, max(n, t.share))
}

// leaseArgs returns quota.lua's ARGV for a request of cost n at now asking for want units,
// giving back what e did not admit (nothing when e served the other clock: its end is not on
// the script's clock of now).
func (t *quotaTable) leaseArgs(e *lease, now time.Time, n, want int64) []string {
	a := make([]string, 0, 12)
	if now.IsZero() {
		a = append(a, "")
	} else {
		a = append(a, strconv.FormatInt(now.UnixMicro(), 10))
	}
	a = append(a, strconv.FormatInt(n, 10), strconv.FormatInt(want, 10))
	a = append(a, t.args...)
	back, used, end := e.giveBack(now)
	return append(a, strconv.FormatInt(back, 10), strconv.FormatInt(used, 10), strconv.FormatInt(end, 10))
}

// giveBack returns what a call at now gives back of e: its unused and used units and its
// end, or zeros when it has nothing unused or served the other clock (its end is not on the
// script's clock of now).
func (e *lease) giveBack(now time.Time) (back, used, end int64) {
	if e.granted > 0 && e.left > 0 && e.mono == now.IsZero() {
		return e.left, e.granted - e.left, e.end
	}
	return 0, 0, 0
}

// returned is how many of the units back that a call gave back from e (a lease ending at
// e.end on the script's clock) quota.lua returned, by the reply's now: a token bucket's
// while now < end, a window's while now is in the lease's window. (A key another client
// deleted or moved to a later window meanwhile keeps them though: quota.lua's reply does not
// say.)
func (t *quotaTable) returned(e *lease, back, now int64) int64 {
	if back == 0 {
		return 0
	}
	if t.window == 0 {
		if now < e.end {
			return back
		}
		return 0
	}
	start := (e.end - 1) - (e.end-1)%t.window
	if now >= start && now < start+t.window {
		return back
	}
	return 0
}

// allowLeased decides a request of cost n for key at now from key's lease, renewing the
// lease (one Redis call) when it has ended or cannot cover n. sent is what local denials
// need to record a denial.
func (l *Limiter) allowLeased(ctx context.Context, key string, now time.Time, n int64, sent localStart) (redstream.Decision, error) {
	t := l.quota
	e := t.entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	at, mono := leaseClock(now)
	if d, ok := e.spend(t, at, mono, n); ok {
		return d, nil
	}
	args := t.leaseArgs(&e.lease, now, n, t.want(&e.lease, at, mono, n))
	if mono {
		at = monoMicros() // the moment the call is sent: the lease's time starts no later
	}
	prev := e.lease
	back, _, _ := prev.giveBack(now)
	// Whatever the call's outcome, the previous lease is over: its give-back is sent (a
	// call that failed may have run it), so it must never be sent again.
	e.granted, e.left = 0, 0
	t.calls.Add(1)
	t.counters.Calls.Inc()
	vs, err := l.runLease(ctx, key, args)
	if err != nil {
		return redstream.Decision{}, err
	}
	t.counters.Returned.Add(int(t.returned(&prev, back, vs[7])))
	cd := coreDecision(vs)
	e.at = vs[7]
	if granted := vs[6]; cd.Allowed && granted >= n {
		t.counters.Granted.Add(int(granted))
		life := vs[8] - vs[7]
		e.lease = lease{mono: mono, t0: at, life: life - life/4, end: vs[8], granted: granted, left: granted - n, rem: cd.Remaining, reset: cd.ResetAfter, at: vs[7]}
		cd.Remaining += e.left
	} else {
		cd.Allowed = false
	}
	d := engine.Decision(cd)
	l.local.record(key, now, n, sent, d)
	return d, nil
}

// runLease runs quota.lua on key's state with args under the limiter's guard, as AllowN
// runs its script (Limiter.call), and returns the reply's 9 integers.
func (l *Limiter) runLease(ctx context.Context, key string, args []string) ([]int64, error) {
	r, err := l.call(ctx, scriptQuota, l.Keys(key), args)
	if err != nil {
		return nil, err
	}
	vs, err := r.AsIntSlice()
	if err == nil && len(vs) != 9 {
		err = fmt.Errorf("%w %v", errUnexpectedReply, vs)
	}
	if err != nil {
		return nil, scriptQuota.wrap(err)
	}
	return vs, nil
}
