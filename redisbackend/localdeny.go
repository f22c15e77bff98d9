package redisbackend

import (
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/engine"
	"github.com/redstream-go/redstream/metrics"
)

// localDenialEntries is how many keys' denials one limiter remembers in process
// (see Options.DisableLocalDenials). A full table forgets an entry for each new one, so
// memory stays bounded however many keys are denied.
const localDenialEntries = 8192

// localShards is the number of independently locked parts of a denial table.
const localShards = 32

// Local denials.
//
// A denial changes no state, and until it is admitted again a key's state only moves
// forward: time passes and other requests are admitted. So after Redis denies a request of
// cost n at t0 with RetryAfter r, every request of that key of cost >= n is denied until
// t0+r, and the limiter can answer it without asking Redis. The table below keeps the
// latest denial of each key and answers from it while it lasts. Every field of a local
// answer is the one Redis would give if the key's state has not changed since the
// denial (what a sequence of decisions from this limiter guarantees: an admitted reply
// forgets the key's entry, Reset forgets it too):
//
//   - token and leaky bucket: a request of cost m >= n at t0+e is answered from the
//     stored TAT S = t0 + ResetAfter: RetryAfter = S + m*T - tau - (t0+e), ResetAfter =
//     S - (t0+e), Remaining = (tau - (S - (t0+e))) / T (0 when negative), Delay 0;
//   - fixed window: cost m >= n; Remaining is the window's, unchanged; RetryAfter and
//     ResetAfter are the window's end: r - e;
//   - sliding log and sliding counter: a request is admitted iff Remaining >= n, and
//     Remaining never decreases while nothing is admitted; a denial whose Remaining is
//     n-1 (always so for n = 1) therefore keeps that Remaining until t0+r. Only such
//     denials are kept, and they answer requests of cost exactly n: Remaining unchanged,
//     RetryAfter r - e, ResetAfter (the newest entry's or the window's end) minus e.
//
// Times are on the request's own axis: an explicit now is compared with the denial's
// explicit now (a request earlier than the denial goes to Redis); a request at the
// server's TIME is measured on the process's monotonic clock from the moment the denied
// request was sent (before Redis read its TIME), and that elapsed time is counted 1/1024
// longer, so a local clock running up to ~0.1% slower than the server's still ends every
// local denial before Redis would admit. Such answers' RetryAfter and ResetAfter are then
// at most the request's round trip (plus 0.1% of the elapsed time) shorter than Redis's.
//
// What a local answer cannot see: another client's Reset or DEL of the key (the local
// denial lasts at most the r of the denial it came from), and a key Redis expired before
// the denial ended (only possible when explicit times run slower than the server's clock
// by more than the ExpiryMargin; the local answer then is core's).

// localKind is how an algorithm's denials are answered locally.
type localKind uint8

const (
	localGCRA    localKind = iota + 1 // token and leaky bucket: any cost >= n, from the TAT
	localFixed                        // fixed window: any cost >= n
	localWindows                      // sliding log and counter: cost n, when Remaining = n-1
)

// localEntry is one key's latest denial.
type localEntry struct {
	mono  bool  // t0 is on the monotonic clock (a request at the server's TIME)
	t0    int64 // µs: the denied request's explicit now, or its send time (monotonic)
	n     int64 // the denied cost
	rem   int64 // the denial's Remaining
	retry int64 // µs, the denial's RetryAfter (> 0)
	reset int64 // µs, the denial's ResetAfter
	// denials counts the key's denials since it was last admitted (or entered the table):
	// Redis's and the local ones, for DeniedKeys. Shared by the key's successive entries.
	denials *atomic.Int64
}

type localShard struct {
	mu sync.RWMutex
	m  map[string]localEntry
	_  [32]byte // 64 bytes a shard: shards' locks on separate cache lines
}

// localTable is a limiter's bounded table of local denials. A nil table (local denials
// disabled, or a multi-limit limiter) answers nothing and records nothing.
type localTable struct {
	kind     localKind
	limit    int64 // the decisions' Limit
	interval int64 // GCRA's T (µs)
	tau      int64 // GCRA's tolerance (µs)
	perShard int
	seed     maphash.Seed
	epoch    atomic.Uint64 // bumped by Reset: denials of requests sent before it are not kept
	denied   *metrics.Counter
	shards   [localShards]localShard
}

// localStart is when a request was sent, as a local answer needs it later.
type localStart struct {
	mono  int64 // µs on the monotonic clock; only read for requests at the server's TIME
	epoch uint64
	had   bool // the key had an entry when the request was sent
}

// monoMicros reads the monotonic clock in µs (engine.MonoMicros: the runtime's monotonic
// clock, about half the cost of time.Now); only differences of its readings are used.
func monoMicros() int64 { return engine.MonoMicros() }

// localKinds is the table of the algorithms whose denials the limiter can prove locally,
// and how. It is optional: an algorithm of core's registry it lacks has no local denials
// (every request asks Redis), which is always correct.
var localKinds = map[string]localKind{
	"token-bucket":    localGCRA,
	"leaky-bucket":    localGCRA,
	"fixed":           localFixed,
	"sliding":         localWindows,
	"sliding-counter": localWindows,
}

// newLocalTable returns the denial table of a single-limit limiter of p with key prefix
// prefix, holding at most size entries.
func newLocalTable(p core.Limit, prefix string, size int) *localTable {
	t := &localTable{limit: p.Max(), seed: maphash.MakeSeed(), denied: metrics.LocalDeniedCounter(prefix)}
	kind, ok := localKinds[p.Name()]
	if !ok {
		return nil
	}
	t.kind = kind
	if kind == localGCRA {
		ints := coreops.Ints(p)
		t.interval, t.tau = ints[0], ints[1]
	}
	t.perShard = max(1, size/localShards)
	for i := range t.shards {
		t.shards[i].m = make(map[string]localEntry)
	}
	return t
}

func (t *localTable) shard(key string) *localShard {
	return &t.shards[maphash.String(t.seed, key)%localShards]
}

// lookup answers a request locally when an entry covers it (ok), and otherwise returns what
// record needs to know about the request, sent now.
func (t *localTable) lookup(key string, now time.Time, n int64) (d redstream.Decision, ok bool, st localStart) {
	if t == nil {
		return d, false, st
	}
	st.epoch = t.epoch.Load()
	mono := now.IsZero()
	var at int64
	if mono {
		at = monoMicros()
		st.mono = at
	} else {
		at = now.UnixMicro()
	}
	s := t.shard(key)
	s.mu.RLock()
	e, had := s.m[key]
	s.mu.RUnlock()
	st.had = had
	if !had || e.mono != mono {
		return d, false, st
	}
	el := at - e.t0
	if mono {
		// Both readings are whole µs, rounded down: add 1 so el is never short; then count
		// it 1/1024 longer (see the comment at the top).
		el += 1 + el>>10
	}
	if el < 0 || el >= e.retry {
		return d, false, st
	}
	cd, ok := t.answer(e, el, n)
	if !ok {
		return d, false, st
	}
	t.denied.Inc()
	e.denials.Add(1)
	return engine.Decision(cd), true, st
}

// answer is the decision, el µs after the denial e, of a request of cost n that e covers.
func (t *localTable) answer(e localEntry, el, n int64) (core.Decision, bool) {
	d := core.Decision{Limit: t.limit}
	switch t.kind {
	case localGCRA:
		if n < e.n {
			return d, false
		}
		wait := e.reset - el // S - now, > 0 while the denial lasts
		d.ResetAfter = wait
		d.RetryAfter = wait + n*t.interval - t.tau
		if free := t.tau - wait; free > 0 {
			d.Remaining = free / t.interval
		}
	case localFixed:
		if n < e.n {
			return d, false
		}
		d.Remaining = e.rem
		d.RetryAfter = e.retry - el
		d.ResetAfter = d.RetryAfter
	default:
		if n != e.n {
			return d, false
		}
		d.Remaining = e.rem
		d.RetryAfter = e.retry - el
		d.ResetAfter = e.reset - el
	}
	return d, true
}

// record keeps the denial d of a request of cost n for key at now, sent as st says, and
// forgets the key's entry when d admitted.
func (t *localTable) record(key string, now time.Time, n int64, st localStart, d redstream.Decision) {
	if t == nil {
		return
	}
	if d.Allowed {
		if st.had {
			t.forget(key)
		}
		return
	}
	retry, reset := d.RetryAfter.Microseconds(), d.ResetAfter.Microseconds()
	if retry <= 0 || t.kind == localWindows && d.Remaining != n-1 {
		return
	}
	e := localEntry{mono: now.IsZero(), n: n, rem: d.Remaining, retry: retry, reset: reset}
	if e.mono {
		e.t0 = st.mono
	} else {
		e.t0 = now.UnixMicro()
	}
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.epoch.Load() != st.epoch {
		return // a Reset ran since the request was sent: its denial may predate it
	}
	if old, ok := s.m[key]; ok {
		e.denials = old.denials
	} else {
		if len(s.m) >= t.perShard {
			t.evict(s)
		}
		e.denials = new(atomic.Int64)
	}
	e.denials.Add(1)
	s.m[key] = e
}

// DeniedKey is a key a limiter denies from memory (see Limiter.DeniedKeys).
type DeniedKey struct {
	Key string
	// Denials counts the key's requests denied since it was last admitted (or since the
	// limiter first kept one of its denials): Redis's and those answered in process.
	Denials int64
	// Retry is how long the latest denial lasts from now (at least 0).
	Retry time.Duration
}

// top returns up to n of the table's keys whose denial still lasts (all of those at
// explicit times: their axis is the caller's), most denied first.
func (t *localTable) top(n int) []DeniedKey {
	if t == nil || n <= 0 {
		return nil
	}
	mono, wall := monoMicros(), time.Now().UnixMicro()
	var out []DeniedKey
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for k, e := range s.m {
			at := wall
			if e.mono {
				at = mono
			}
			if left := e.retry - (at - e.t0); left > 0 || !e.mono {
				out = append(out, DeniedKey{Key: k, Denials: e.denials.Load(), Retry: time.Duration(max(left, 0)) * time.Microsecond})
			}
		}
		s.mu.RUnlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Denials != out[j].Denials {
			return out[i].Denials > out[j].Denials
		}
		return out[i].Key < out[j].Key
	})
	return out[:min(n, len(out))]
}

// evict makes room in a full shard: it drops the entries that have run out on the
// monotonic clock among a few it visits (in the map's random order), or else the first.
func (t *localTable) evict(s *localShard) {
	now := monoMicros()
	visited, dropped := 0, false
	var first string
	for k, e := range s.m {
		if visited == 0 {
			first = k
		}
		if e.mono && now-e.t0 >= e.retry {
			delete(s.m, k)
			dropped = true
		}
		if visited++; visited == 8 {
			break
		}
	}
	if !dropped {
		delete(s.m, first)
	}
}

// forget drops key's entry.
func (t *localTable) forget(key string) {
	if t == nil {
		return
	}
	s := t.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// reset forgets key for Reset: its entry, and any denial of a request sent before.
func (t *localTable) reset(key string) {
	if t == nil {
		return
	}
	t.epoch.Add(1)
	t.forget(key)
}

// len returns the number of entries (for tests).
func (t *localTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// lookupBatch answers locally, into out, the requests of a batch (cost n for each of keys at
// now) that local denials cover, and returns the indexes of the others, which Redis must
// decide, with what record needs for each key (indexed like keys).
func (t *localTable) lookupBatch(keys []string, now time.Time, n int64, out []redstream.Decision) (send []int, sts []localStart) {
	send = make([]int, 0, len(keys))
	if t == nil {
		for i := range keys {
			send = append(send, i)
		}
		return send, nil
	}
	sts = make([]localStart, len(keys))
	for i, k := range keys {
		d, ok, st := t.lookup(k, now, n)
		if ok {
			out[i] = d
			continue
		}
		sts[i] = st
		send = append(send, i)
	}
	return send, sts
}

// recordBatch is record for key i of a batch (sts as lookupBatch returned it).
func (t *localTable) recordBatch(keys []string, i int, now time.Time, n int64, sts []localStart, d redstream.Decision) {
	if t == nil {
		return
	}
	t.record(keys[i], now, n, sts[i], d)
}

// groupsOf is groups for the keys of a batch at the indexes send (ascending): the script
// calls deciding them, as indexes into keys.
func (l *Limiter) groupsOf(c rueidis.Client, keys []string, send []int) [][]int {
	if len(send) == len(keys) {
		return l.groups(c, keys)
	}
	sub := make([]string, len(send))
	for j, i := range send {
		sub[j] = keys[i]
	}
	groups := l.groups(c, sub)
	for _, idx := range groups {
		for j := range idx {
			idx[j] = send[idx[j]]
		}
	}
	return groups
}
