package redisbackend

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
	"pgregory.net/rapid"
)

// localSpecs are the specs the local-denial conformance draws from: small limits, so that
// denials are frequent, and periods from a millisecond to an hour.
func drawLocalSpec(rt *rapid.T, alg redstream.Algorithm) redstream.Spec {
	switch alg {
	case redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket:
		capacity := float64(rapid.IntRange(1, 6).Draw(rt, "capacity"))
		if rapid.IntRange(0, 3).Draw(rt, "fractional") == 0 {
			capacity = rapid.Float64Range(1, 6).Draw(rt, "capacity")
		}
		rate := rapid.SampledFrom([]float64{0.001, 0.25, 1, 3, 7.5, 100, 1000, 250000}).Draw(rt, "rate")
		return redstream.Spec{Algorithm: alg, Capacity: capacity, Rate: rate}
	}
	window := rapid.SampledFrom([]time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond,
		time.Second, 13 * time.Second, time.Hour}).Draw(rt, "window")
	return redstream.Spec{Algorithm: alg, Window: window, Limit: rapid.Int64Range(1, 6).Draw(rt, "limit")}
}

// localCase runs one generated sequence through two limiters of spec on c, one with local
// denials and one without, in lockstep, and fails on the first decision or error that
// differs. It returns how many decisions the first answered locally and how many it made.
func localCase(rt *rapid.T, c rueidis.Client, alg redstream.Algorithm) (local, total int) {
	spec := drawLocalSpec(rt, alg)
	p, err := spec.Core()
	if err != nil {
		rt.Fatalf("invalid spec %v: %v", spec, err)
	}
	prefix := uniq("ld")
	with, err := NewLimiter(c, spec, Options{KeyPrefix: prefix + ":with"})
	if err != nil {
		rt.Fatal(err)
	}
	without, err := NewLimiter(c, spec, Options{KeyPrefix: prefix + ":without", DisableLocalDenials: true})
	if err != nil {
		rt.Fatal(err)
	}
	defer metrics.RateLimit.UnregisterMetric(metrics.Name("redis_streaming_rl_local_denied_total", "prefix", with.prefix))
	per := p.Period()
	limit := p.Max()
	cost := rapid.Int64Range(1, limit).Draw(rt, "cost") // the abusive client's usual cost
	now := t0.UnixMicro() + rapid.Int64Range(0, 1e12).Draw(rt, "start")
	keys := []string{"a", "b{x}"}
	var last redstream.Decision
	ctx := context.Background()
	steps := rapid.IntRange(1, 80).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		switch rapid.IntRange(0, 14).Draw(rt, "step") {
		case 0, 1, 2, 3: // no time passes
		case 4, 5: // a small step
			now += rapid.Int64Range(1, max(1, per/8)).Draw(rt, "dt")
		case 6: // at, or 1 µs around, the last RetryAfter
			now += max(0, last.RetryAfter.Microseconds()+rapid.Int64Range(-1, 1).Draw(rt, "around"))
		case 7: // just before the last ResetAfter
			now += max(0, last.ResetAfter.Microseconds()-rapid.Int64Range(0, 1).Draw(rt, "before"))
		case 8: // time goes backwards
			now -= rapid.Int64Range(1, max(1, per/2)).Draw(rt, "back")
		case 9: // about one period
			now += rapid.Int64Range(per/2, per*2).Draw(rt, "dt")
		case 10: // an aligned boundary
			now += per - now%per
		case 11: // a long gap
			now += rapid.Int64Range(per*3, per*50).Draw(rt, "gap")
		case 12: // Reset of one key, by this limiter
			k := rapid.SampledFrom(keys).Draw(rt, "resetkey")
			if err := with.Reset(ctx, k); err != nil {
				rt.Fatalf("step %d: Reset: %v", i, err)
			}
			if err := without.Reset(ctx, k); err != nil {
				rt.Fatalf("step %d: Reset: %v", i, err)
			}
			continue
		case 13, 14: // a batch: 1 to 4 keys, repeats included, at now
			batch := rapid.SliceOfN(rapid.SampledFrom(keys), 1, 4).Draw(rt, "batch")
			n := cost
			if rapid.Bool().Draw(rt, "batchcost") {
				n = rapid.Int64Range(1, limit).Draw(rt, "n")
			}
			at := time.UnixMicro(now)
			before := with.local.denied.Get()
			got, gerr := with.AllowBatch(ctx, batch, at, n)
			want, werr := without.AllowBatch(ctx, batch, at, n)
			if gerr != nil || werr != nil {
				rt.Fatalf("step %d AllowBatch(%q, %d, n=%d): errors %v, %v", i, batch, now, n, gerr, werr)
			}
			for j := range want {
				if got[j] != want[j] {
					rt.Fatalf("step %d AllowBatch(%q, %d, n=%d), key %d:\n   with local denials %+v\nwithout local denials %+v",
						i, batch, now, n, j, got[j], want[j])
				}
			}
			local += int(with.local.denied.Get() - before)
			total += len(batch)
			if len(want) > 0 {
				last = want[len(want)-1]
			}
			continue
		}
		key := rapid.SampledFrom(keys).Draw(rt, "key")
		n := cost
		switch rapid.IntRange(0, 7).Draw(rt, "costkind") {
		case 0:
			n = rapid.Int64Range(1, limit).Draw(rt, "n")
		case 1:
			n = min(limit, cost+1)
		}
		at := time.UnixMicro(now)
		before := with.local.denied.Get()
		got, gerr := with.AllowN(ctx, key, at, n)
		want, werr := without.AllowN(ctx, key, at, n)
		if (gerr == nil) != (werr == nil) {
			rt.Fatalf("step %d AllowN(%q, %d, n=%d): error %v, without local denials %v", i, key, now, n, gerr, werr)
		}
		if got != want {
			rt.Fatalf("step %d AllowN(%q, %d, n=%d) (local: %v):\n   with local denials %+v\nwithout local denials %+v",
				i, key, now, n, with.local.denied.Get() > before, got, want)
		}
		if with.local.denied.Get() > before {
			local++
		}
		total++
		last = want
	}
	return local, total
}

// TestLocalDenialsConform is the local-denial conformance mode: on random sequences at
// explicit times (repeated costs, steps at and around RetryAfter, backward steps, gaps,
// Resets, batches with repeated keys), a limiter with local denials gives exactly the
// decisions of one without, on miniredis, a real redis-server and a real 3-master cluster,
// for every algorithm.
func TestLocalDenialsConform(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			checks := checks(b.name != "miniredis")
			for _, alg := range redstream.Algorithms() {
				if _, ok := localKinds[string(alg)]; !ok {
					// No local denials (the concurrency limit: a release frees units before
					// RetryAfter, so a denial proves nothing about later requests).
					continue
				}
				t.Run(string(alg), func(t *testing.T) {
					var local, total, cases int
					for cases < checks && !t.Failed() {
						rapid.Check(t, func(rt *rapid.T) {
							l, n := localCase(rt, c, alg)
							local += l
							total += n
							cases++
						})
					}
					t.Logf("%s on %s: %d cases, %d decisions, %d answered locally, 0 differences", alg, b.name, cases, total, local)
					if local == 0 {
						t.Errorf("no decision was answered locally: the test proves nothing")
					}
				})
			}
		})
	}
}

// TestLocalDenialsHotKey checks the abusive-client path end to end: after the first denial
// the requests are answered without Redis (the server sees no more calls), with the exact
// decisions, counted in the local-denials metric and, through metrics.Named, as denials.
func TestLocalDenialsHotKey(t *testing.T) {
	c, m := miniClient(t)
	prefix := uniq("ldhot")
	l := mustLimiter(t, c, redstream.TokenBucket(3, 1), Options{KeyPrefix: prefix})
	named, err := metrics.Named(prefix, l)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if d, err := named.AllowN(ctx, "k", t0, 1); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want admitted", i, d, err)
		}
	}
	d, err := named.AllowN(ctx, "k", t0, 1)
	if err != nil || d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("4th request: %+v, %v; want denied for 1s", d, err)
	}
	calls := m.CommandCount()
	for i := 1; i <= 100; i++ {
		at := t0.Add(time.Duration(i) * 9 * time.Millisecond)
		d, err := named.AllowN(ctx, "k", at, 1)
		want := redstream.Decision{Limit: 3, RetryAfter: time.Second - time.Duration(i)*9*time.Millisecond,
			ResetAfter: 3*time.Second - time.Duration(i)*9*time.Millisecond}
		if err != nil || d != want {
			t.Fatalf("request at +%v: %+v, %v; want %+v", at.Sub(t0), d, err, want)
		}
	}
	if got := m.CommandCount() - calls; got != 0 {
		t.Errorf("%d Redis commands for 100 locally denied requests, want 0", got)
	}
	if got := metrics.LocalDeniedCounter(prefix).Get(); got != 100 {
		t.Errorf("%s = %d, want 100", "redis_streaming_rl_local_denied_total", got)
	}
	_, denied, _ := metrics.RateLimitCounters(prefix)
	if got := denied.Get(); got != 101 {
		t.Errorf("named limiter's denials = %d, want 101 (1 from Redis, 100 local)", got)
	}
	// A second later the request goes to Redis again and is admitted.
	if d, err := named.AllowN(ctx, "k", t0.Add(time.Second), 1); err != nil || !d.Allowed {
		t.Fatalf("at RetryAfter: %+v, %v; want admitted", d, err)
	}
	if m.CommandCount() == calls {
		t.Errorf("the request at RetryAfter did not reach Redis")
	}
}

// TestLocalDenialsReset checks that the limiter's own Reset forgets the key's denial at
// once, and that a limiter with DisableLocalDenials (and a multi-limiter) keeps none.
func TestLocalDenialsReset(t *testing.T) {
	c, m := miniClient(t)
	ctx := context.Background()
	l := mustLimiter(t, c, redstream.FixedWindow(time.Hour, 1), Options{KeyPrefix: uniq("ldreset")})
	if d, _ := l.AllowN(ctx, "k", t0, 1); !d.Allowed {
		t.Fatalf("first request denied")
	}
	if d, _ := l.AllowN(ctx, "k", t0, 1); d.Allowed {
		t.Fatalf("second request admitted")
	}
	if l.local.len() != 1 {
		t.Fatalf("%d local entries after a denial, want 1", l.local.len())
	}
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, err := l.AllowN(ctx, "k", t0, 1); err != nil || !d.Allowed {
		t.Fatalf("after Reset: %+v, %v; want admitted", d, err)
	}
	for _, tt := range []struct {
		name string
		l    *Limiter
	}{
		{"disabled", mustLimiter(t, c, redstream.FixedWindow(time.Hour, 1), Options{KeyPrefix: uniq("ldoff"), DisableLocalDenials: true})},
		{"multi", func() *Limiter {
			l, err := NewMultiLimiter(c, []redstream.Spec{redstream.FixedWindow(time.Hour, 1)}, Options{KeyPrefix: uniq("ldmulti")})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.l.AllowN(ctx, "k", t0, 1)
			calls := m.CommandCount()
			for i := 0; i < 3; i++ {
				if d, err := tt.l.AllowN(ctx, "k", t0, 1); err != nil || d.Allowed {
					t.Fatalf("%+v, %v; want denied", d, err)
				}
			}
			if m.CommandCount()-calls < 3 {
				t.Errorf("%d Redis commands for 3 requests, want one each", m.CommandCount()-calls)
			}
			if tt.l.local != nil {
				t.Errorf("has a local denial table")
			}
		})
	}
}

// TestLocalDenialsServerTime checks local denials of requests at the server's TIME on a real
// redis-server: before each request a probe reads the server's TIME and the key's TAT, and
// a local denial must be one the server would still give at the probe's (earlier) time,
// with a RetryAfter no longer than the server's wait from the probe. Either failing proves
// a local answer denied what Redis would have admitted.
//
// A local answer counts the time since the denial it repeats on this process's monotonic
// clock, and Redis counts it on its wall clock: a step of the machine's wall clock (a VM's
// time sync) moves one and not the other. The probes measure that: each brackets the
// server's TIME between two monotonic readings, so the offset between the clocks at a probe
// lies in [lo, hi]. A local answer may then exceed the server's wait by at most the offset's
// growth since the denial it repeats: hi at this probe minus lo at the probe before the
// denial (the two probes' round trips when the clocks agree, plus any step).
func TestLocalDenialsServerTime(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	const rate = 20 // T = 50 ms, capacity 2: tau = 100 ms
	l := mustLimiter(t, c, redstream.TokenBucket(2, rate), Options{KeyPrefix: uniq("ldtime")})
	key := l.Keys("k")[0]
	probe := rueidis.NewLuaScript("local t = redis.call('TIME'); return {t[1] * 1000000 + t[2], tonumber(redis.call('GET', KEYS[1]) or 0)}")
	local, rounds := 0, 0
	var denialLo, tol int64 // lo at the probe before Redis's latest denial; the latest tolerance
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		before := monoMicros()
		vs, err := probe.Exec(ctx, c, []string{key}, nil).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		after := monoMicros()
		serverNow, tat := vs[0], vs[1]
		lo, hi := serverNow-after, serverNow-before
		deniedBefore := l.local.denied.Get()
		d, err := l.AllowN(ctx, "k", time.Time{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		rounds++
		if l.local.denied.Get() == deniedBefore {
			if !d.Allowed {
				denialLo = lo // Redis denied: the entry local answers repeat from now on
			}
			continue
		}
		local++
		tol = max(0, hi-denialLo)
		const interval, tau = 1e6 / rate, 2 * 1e6 / rate
		wait := max(tat, serverNow) + interval - tau - serverNow // µs until Redis admits, from the probe
		if wait+tol <= 0 {
			t.Fatalf("local denial when Redis admits: probe at %d µs, TAT %d, clocks' tolerance %d µs", serverNow, tat, tol)
		}
		if d.RetryAfter.Microseconds() > wait+tol {
			t.Fatalf("local RetryAfter %v exceeds Redis's wait %dµs from the probe by more than the clocks' tolerance %dµs", d.RetryAfter, wait, tol)
		}
	}
	t.Logf("%d requests, %d answered locally; the latest clocks' tolerance %d µs", rounds, local, tol)
	if local == 0 {
		t.Fatalf("no request was answered locally")
	}
}

// TestLocalDenialsBounded checks that the table holds at most localDenialEntries keys
// however many are denied, and still answers for the newest.
func TestLocalDenialsBounded(t *testing.T) {
	p, _ := redstream.FixedWindow(time.Hour, 1).Core()
	lt := newLocalTable(p, uniq("ldbound"), localDenialEntries)
	denial := redstream.Decision{Limit: 1, RetryAfter: time.Minute, ResetAfter: time.Minute}
	for i := 0; i < 10*localDenialEntries; i++ {
		_, _, st := lt.lookup("k"+strconv.Itoa(i), t0, 1)
		lt.record("k"+strconv.Itoa(i), t0, 1, st, denial)
		if i%1000 == 0 || i%2 == 0 {
			// Server-time denials too, which run out on the monotonic clock.
			_, _, st := lt.lookup("m"+strconv.Itoa(i), time.Time{}, 1)
			lt.record("m"+strconv.Itoa(i), time.Time{}, 1, st, redstream.Decision{Limit: 1, RetryAfter: time.Microsecond})
		}
	}
	if n := lt.len(); n > localDenialEntries || n < localDenialEntries/2 {
		t.Fatalf("%d entries after %d denied keys, want at most %d (and most of it used)", n, 10*localDenialEntries, localDenialEntries)
	}
	last := "k" + strconv.Itoa(10*localDenialEntries-1)
	if d, ok, _ := lt.lookup(last, t0.Add(time.Second), 1); !ok || d.RetryAfter != time.Minute-time.Second {
		t.Fatalf("newest key: %+v, %v; want answered locally", d, ok)
	}
}

// TestLocalDenialsAllocs keeps the locally answered path allocation-free.
func TestLocalDenialsAllocs(t *testing.T) {
	c, _ := miniClient(t)
	ctx := context.Background()
	l := mustLimiter(t, c, redstream.TokenBucket(1, 0.01), Options{KeyPrefix: uniq("ldalloc")})
	l.AllowN(ctx, "k", t0, 1)
	l.AllowN(ctx, "k", t0, 1)
	if a := testing.AllocsPerRun(1000, func() { l.AllowN(ctx, "k", t0, 1) }); a != 0 {
		t.Errorf("%v allocations per local denial, want 0", a)
	}
}

// TestLocalDenialsHammer runs many goroutines on a few hot keys (under -race in CI): local
// and Redis answers mixed never admit more than the bucket holds.
func TestLocalDenialsHammer(t *testing.T) {
	c, _ := miniClient(t)
	ctx := context.Background()
	l := mustLimiter(t, c, redstream.TokenBucket(5, 0.0001), Options{KeyPrefix: uniq("ldhammer")})
	var admitted [3]atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := i % 3
				d, err := l.AllowN(ctx, "k"+strconv.Itoa(k), time.Time{}, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for k := range admitted {
		if got := admitted[k].Load(); got > 5 {
			t.Errorf("key %d: %d admitted, want at most 5", k, got)
		}
	}
	if l.local.denied.Get() == 0 {
		t.Errorf("no local denial under the hammer")
	}
}

// TestLocalDenialsDuringOutage stops a real redis-server after a denial: the denied key is
// still denied, locally and without an error, until its RetryAfter; any other request meets
// the outage (fail-closed: an error).
func TestLocalDenialsDuringOutage(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	l := mustLimiter(t, c, redstream.FixedWindow(time.Minute, 1), Options{KeyPrefix: uniq("ldout")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d, err := l.AllowN(ctx, "k", t0, 1); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	if d, err := l.AllowN(ctx, "k", t0, 1); err != nil || d.Allowed {
		t.Fatalf("second request: %+v, %v; want denied", d, err)
	}
	srv.Stop()
	want := redstream.Decision{Limit: 1, RetryAfter: 30 * time.Second, ResetAfter: 30 * time.Second}
	if d, err := l.AllowN(ctx, "k", t0.Add(30*time.Second), 1); err != nil || d != want {
		t.Errorf("denied key with Redis down: %+v, %v; want %+v from the local denial", d, err, want)
	}
	if d, err := l.AllowN(ctx, "k", t0.Add(time.Minute), 1); err == nil || d.Allowed {
		t.Errorf("denied key after its RetryAfter, Redis down: %+v, %v; want the outage's error", d, err)
	}
	if d, err := l.AllowN(ctx, "other", t0, 1); err == nil || d.Allowed {
		t.Errorf("other key with Redis down: %+v, %v; want the outage's error", d, err)
	}
}

// TestLocalShardSize keeps each shard on its own 64-byte cache line (64-bit platforms).
func TestLocalShardSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("shard padding is sized for 64-bit platforms")
	}
	if s := unsafe.Sizeof(localShard{}); s%64 != 0 {
		t.Errorf("localShard is %d bytes, want a multiple of 64", s)
	}
}

// BenchmarkLocalDenials measures the table alone: a request a local denial answers (hit),
// and the lookup a request Redis must decide pays first (miss), at explicit times and at
// the server's TIME (which reads the monotonic clock), serial and parallel.
func BenchmarkLocalDenials(b *testing.B) {
	p, _ := redstream.TokenBucket(1, 0.001).Core()
	lt := newLocalTable(p, uniq("ldbench"), localDenialEntries)
	denial := redstream.Decision{Limit: 1, RetryAfter: time.Hour, ResetAfter: time.Hour}
	_, _, st := lt.lookup("hot", t0, 1)
	lt.record("hot", t0, 1, st, denial)
	_, _, st = lt.lookup("hot", time.Time{}, 1)
	lt.record("hot", time.Time{}, 1, st, denial) // replaces the explicit-time entry
	_, _, st = lt.lookup("hot-explicit", t0, 1)
	lt.record("hot-explicit", t0, 1, st, denial)
	for _, bc := range []struct {
		name string
		key  string
		now  time.Time
		hit  bool
	}{
		{"hit/explicit-time", "hot-explicit", t0.Add(time.Second), true},
		{"hit/server-time", "hot", time.Time{}, true},
		{"miss/explicit-time", "cold", t0, false},
		{"miss/server-time", "cold", time.Time{}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, _ := lt.lookup(bc.key, bc.now, 1); ok != bc.hit {
					b.Fatalf("lookup answered %v, want %v", ok, bc.hit)
				}
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lt.lookup(bc.key, bc.now, 1)
				}
			})
		})
	}
}

// TestDeniedKeys: the keys denied from memory, most denied first, with every denial counted
// (Redis's and the local ones), none once admitted or reset, and none without local
// denials.
func TestDeniedKeys(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	l := mustLimiter(t, client, redstream.TokenBucket(2, 0.001), Options{KeyPrefix: uniq("denied")})
	for key, n := range map[string]int{"hot": 10, "warm": 3, "ok": 1} {
		for range n {
			if _, err := l.AllowN(ctx, key, time.Time{}, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := l.DeniedKeys(10)
	if len(got) != 2 || got[0].Key != "hot" || got[0].Denials != 8 || got[1].Key != "warm" || got[1].Denials != 1 {
		t.Fatalf("DeniedKeys = %+v, want hot (8 denials) then warm (1)", got)
	}
	if got[0].Retry <= 0 || got[0].Retry > 1001*time.Second {
		t.Errorf("hot's denial lasts %v, want within the bucket's 1000 s", got[0].Retry)
	}
	if one := l.DeniedKeys(1); len(one) != 1 || one[0].Key != "hot" {
		t.Errorf("DeniedKeys(1) = %+v", one)
	}
	if err := l.Reset(ctx, "hot"); err != nil {
		t.Fatal(err)
	}
	if got := l.DeniedKeys(10); len(got) != 1 || got[0].Key != "warm" {
		t.Errorf("after Reset(hot): %+v, want warm alone", got)
	}
	off := mustLimiter(t, client, redstream.TokenBucket(1, 0.001), Options{KeyPrefix: uniq("denied-off"), DisableLocalDenials: true})
	for range 3 {
		if _, err := off.AllowN(ctx, "k", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := off.DeniedKeys(10); len(got) != 0 {
		t.Errorf("without local denials: %+v", got)
	}
}
