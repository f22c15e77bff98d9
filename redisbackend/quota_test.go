package redisbackend

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
)

// leaseSpecs are the specs of the algorithms with leases, with a budget a hot key stays under.
var leaseSpecs = []redstream.Spec{
	redstream.TokenBucket(1e6, 1e5),
	redstream.FixedWindow(time.Second, 1e6),
	redstream.SlidingCounter(time.Second, 1e6),
}

// TestQuotaTables: every algorithm of core's registry either has leases (its registry code in
// quotaCodes) or is refused by NewLimiter with an error naming Quota.Enabled and its reason.
func TestQuotaTables(t *testing.T) {
	c, _ := miniClient(t)
	for _, a := range core.Algorithms() {
		code, ok := quotaCodes[a.Name]
		why, refused := leaseRefused[a.Name]
		if ok && refused {
			t.Errorf("%s: in quotaCodes and in leaseRefused; want at most one", a.Name)
		}
		if ok && code != a.Code {
			t.Errorf("%s: lease code %q, want the registry's %q", a.Name, code, a.Code)
		}
		var spec redstream.Spec
		switch a.Shape {
		case core.Bucket:
			spec = redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Capacity: 10, Rate: 1}
		case core.Window:
			spec = redstream.Spec{Algorithm: redstream.Algorithm(a.Name), Window: time.Second, Limit: 10}
		default:
			// Another shape: quota.lua decides only the bucket and window algorithms it names.
			if ok {
				t.Errorf("%s: in quotaCodes, but quota.lua decides no algorithm of its shape", a.Name)
			}
			continue
		}
		_, err := NewLimiter(c, spec, Options{Quota: QuotaOptions{Enabled: true}})
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v, want leases", a.Name, err)
		case !ok && (!errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "Quota.Enabled")):
			t.Errorf("%s: %v, want ErrInvalidConfig naming Quota.Enabled and %q", a.Name, err, why)
		}
	}
}

// TestQuotaInvalidOptions: bad lease options are errors naming the field.
func TestQuotaInvalidOptions(t *testing.T) {
	c, _ := miniClient(t)
	spec := redstream.FixedWindow(time.Second, 10)
	for _, tc := range []struct {
		name  string
		opts  Options
		field string
	}{
		{"negative duration", Options{Quota: QuotaOptions{Enabled: true, Duration: -time.Second}}, "Quota.Duration"},
		{"long duration", Options{Quota: QuotaOptions{Enabled: true, Duration: time.Hour}}, "Quota.Duration"},
		{"negative share", Options{Quota: QuotaOptions{Enabled: true, MaxShare: -0.5}}, "Quota.MaxShare"},
		{"share above 1", Options{Quota: QuotaOptions{Enabled: true, MaxShare: 1.5}}, "Quota.MaxShare"},
		{"java", Options{JavaCompatible: true, Quota: QuotaOptions{Enabled: true}}, "Quota.Enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec
			if tc.opts.JavaCompatible {
				s = redstream.TokenBucket(10, 1) // one the Java layout has
			}
			_, err := NewLimiter(c, s, tc.opts)
			if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("NewLimiter: %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
	_, err := NewMultiLimiter(c, []redstream.Spec{spec}, Options{Quota: QuotaOptions{Enabled: true}})
	if !errors.Is(err, redstream.ErrInvalidConfig) || !strings.Contains(err.Error(), "Quota.Enabled") {
		t.Errorf("NewMultiLimiter: %v, want ErrInvalidConfig naming Quota.Enabled", err)
	}
}

// evalCalls returns the number of script calls the server ran (INFO commandstats).
func evalCalls(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// TestQuotaHotKeyCalls: a hot key under its limit costs at least 20 times fewer Redis calls
// with leases than without, and admits every request either way.
func TestQuotaHotKeyCalls(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	const requests = 20000
	for _, spec := range leaseSpecs {
		t.Run(string(spec.Algorithm), func(t *testing.T) {
			calls := map[bool]int64{}
			for _, leased := range []bool{false, true} {
				l, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("hot"), Quota: QuotaOptions{Enabled: leased}})
				if err != nil {
					t.Fatal(err)
				}
				before := evalCalls(t, c)
				for i := 0; i < requests; i++ {
					d, err := l.AllowN(context.Background(), "k", time.Time{}, 1)
					if err != nil || !d.Allowed {
						t.Fatalf("request %d (leases %v): %+v, %v; want allowed", i, leased, d, err)
					}
				}
				calls[leased] = evalCalls(t, c) - before
			}
			ratio := float64(calls[false]) / float64(max(calls[true], 1))
			t.Logf("%s: %d requests, %d Redis calls without leases, %d with (%.0fx fewer)", spec, requests, calls[false], calls[true], ratio)
			if calls[false] < requests || ratio < 20 {
				t.Errorf("calls without leases %d (want %d), with %d: %.1fx fewer, want >= 20x", calls[false], requests, calls[true], ratio)
			}
		})
	}
}

// TestQuotaGiveBack: what a lease did not use is given back exactly: a lease of k units, of
// which the process used u, leaves the state a request of cost u would have left (the token
// bucket's at the lease's end), whatever other requests the key saw meanwhile.
func TestQuotaGiveBack(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			for _, spec := range []redstream.Spec{
				redstream.TokenBucket(1000, 100),
				redstream.FixedWindow(time.Second, 1000),
				redstream.SlidingCounter(time.Second, 1000),
			} {
				t.Run(string(spec.Algorithm), func(t *testing.T) { checkGiveBack(t, c, spec, checks(b.name != "miniredis")) })
			}
		})
	}
}

func checkGiveBack(t *testing.T, c rueidis.Client, spec redstream.Spec, cases int) {
	ctx := context.Background()
	leased, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("gb"), Quota: QuotaOptions{Enabled: true, Duration: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("gbref"), DisableLocalDenials: true})
	if err != nil {
		t.Fatal(err)
	}
	// twin decides requests without leases on leased's keys.
	twin, err := NewLimiter(c, spec, Options{KeyPrefix: leased.KeyPrefix(), DisableLocalDenials: true})
	if err != nil {
		t.Fatal(err)
	}
	both := func(key string, at, cost int64) (bool, bool) {
		t.Helper()
		d1, err := twin.AllowN(ctx, key, time.UnixMicro(at), cost)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := plain.AllowN(ctx, key, time.UnixMicro(at), cost)
		if err != nil {
			t.Fatal(err)
		}
		return d1.Allowed, d2.Allowed
	}
	ran := 0
	rng := rand.New(rand.NewPCG(uint64(cases), 7))
	const base = int64(1_700_000_000_000_000)
	for i := 0; i < cases; i++ {
		key := "k" + strconv.Itoa(i)
		t0 := base + rng.Int64N(int64(10*time.Second/time.Microsecond))
		// Some earlier state on both keys.
		for j := rng.IntN(3); j > 0; j-- {
			both(key, t0-rng.Int64N(300_000), 1+rng.Int64N(50))
		}
		k := 1 + rng.Int64N(100)
		vs := leasedRaw(t, leased, key, t0, 1, k, 0, 0, 0)
		if vs[0] != 1 || vs[6] != k {
			continue // the lease was not granted whole: nothing to give back
		}
		end := vs[8]
		used := rng.Int64N(k + 1)
		refAt := t0
		if spec.Algorithm == redstream.AlgorithmTokenBucket {
			refAt = end // a token bucket's lease is recorded at its end
		}
		if used > 0 {
			if d, err := plain.AllowN(ctx, key, time.UnixMicro(refAt), used); err != nil || !d.Allowed {
				t.Fatalf("case %d: the reference's AllowN(%d): %+v, %v", i, used, d, err)
			}
		}
		// Requests of others between the take and the give-back, on both keys.
		at, same := t0, true
		for j := rng.IntN(3); j > 0; j-- {
			at += rng.Int64N((end-at)/2 + 1)
			a, b := both(key, at, 1+rng.Int64N(20))
			same = same && a == b
		}
		if !same {
			continue // the lease's unused units made a difference: the states may differ
		}
		// The give-back, with the next lease's take of 1 at the same time on the reference.
		at += rng.Int64N(max(end-at, 1)) / 2
		vs = leasedRaw(t, leased, key, at, 1, 1, k-used, used, end)
		d, err := plain.AllowN(ctx, key, time.UnixMicro(at), 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (vs[0] == 1) {
			t.Fatalf("case %d: the give-back's take: leased %v, reference %v", i, vs[0] == 1, d.Allowed)
		}
		ran++
		got, want := rawState(t, c, leased.Keys(key)[0]), rawState(t, c, plain.Keys(key)[0])
		if spec.Algorithm == redstream.AlgorithmTokenBucket && used == 0 {
			// Nothing used: the TAT goes back to the lease's end at the earliest, where the
			// reference, which recorded nothing, may be earlier.
			g, _ := strconv.ParseInt(got, 10, 64)
			w, _ := strconv.ParseInt(want, 10, 64)
			if g < w {
				t.Fatalf("case %d (k %d, used 0): TAT %d, want >= the reference's %d", i, k, g, w)
			}
			continue
		}
		if got != want {
			t.Fatalf("case %d (k %d, used %d, t0 %d, end %d, at %d): state %q, want the reference's %q", i, k, used, t0, end, at, got, want)
		}
	}
	if ran < cases/2 {
		t.Errorf("%d of %d cases compared states, want at least half", ran, cases)
	}
}

// leasedRaw runs quota.lua for l on key at at (µs), as allowLeased does.
func leasedRaw(t *testing.T, l *Limiter, key string, at, need, want, back, used, end int64) []int64 {
	t.Helper()
	e := &lease{granted: back + used, left: back, end: end}
	args := l.quota.leaseArgs(e, time.UnixMicro(at), need, want)
	vs, err := l.runLease(context.Background(), key, args)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// rawState returns key's value ("" when absent).
func rawState(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuotaTokenBucketAtEnd: a token bucket's lease is taken as if at its end, so its units,
// admitted at any time before that end, and what other processes take meanwhile, never
// exceed what the bucket admits: a lease of 50 of a full bucket's 100, all admitted just
// before the lease ends, plus everything another process can take then, replay as admitted.
func TestQuotaTokenBucketAtEnd(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			spec := redstream.TokenBucket(100, 1000) // T = 1 ms
			leased, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("atend"), Quota: QuotaOptions{Enabled: true, Duration: 50 * time.Millisecond, MaxShare: 0.5}})
			if err != nil {
				t.Fatal(err)
			}
			other, err := NewLimiter(c, spec, Options{KeyPrefix: leased.KeyPrefix(), DisableLocalDenials: true})
			if err != nil {
				t.Fatal(err)
			}
			t0 := int64(1_700_000_000_000_000)
			vs := leasedRaw(t, leased, "k", t0, 1, 50, 0, 0, 0)
			if vs[0] != 1 || vs[6] != 50 || vs[8] != t0+50_000 {
				t.Fatalf("take: %v, want 50 units until t0 + 50 ms", vs)
			}
			spend := vs[8] - 1
			var times []int64
			for range 50 {
				times = append(times, spend)
			}
			for {
				d, err := other.AllowN(context.Background(), "k", time.UnixMicro(spend), 1)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					break
				}
				times = append(times, spend)
			}
			if over, _ := replay(t, spec, times); over != 0 {
				t.Errorf("%d admissions at the lease's end (50 leased), %d the bucket would have denied", len(times), over)
			}
		})
	}
}

// TestQuotaConcurrent: goroutines of one process sharing a key's leases, with another
// limiter (another process) on the same key, admit exactly the limit of a window between
// them, and every request they make either way is one of the two answers.
func TestQuotaConcurrent(t *testing.T) {
	c := redistest.Client(t)
	spec := redstream.FixedWindow(time.Hour, 5000)
	prefix := uniq("leaseconc")
	var ls []*Limiter
	for range 2 {
		l, err := NewLimiter(c, spec, Options{KeyPrefix: prefix, Quota: QuotaOptions{Enabled: true, Duration: time.Second, MaxShare: 0.05}})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	now := time.UnixMicro(1_700_000_000_000_000).Truncate(time.Hour).Add(time.Minute)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := ls[g%2]
			for i := range 1500 {
				d, err := l.AllowN(context.Background(), "k", now.Add(time.Duration(i)*time.Microsecond), 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 5000 {
		t.Errorf("admitted %d of 12000 requests, want the window's limit 5000", got)
	}
}

// TestQuotaHungServer: while Redis hangs (SIGSTOP), a live lease keeps admitting in process;
// once it has ended, a request fails with the timeout, and the lease is over: the call that
// timed out runs when Redis resumes (its give-back included), and nothing is given back
// twice, so the window never admits more than its limit.
func TestQuotaHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	spec := redstream.FixedWindow(time.Hour, 1000)
	l, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("leasehung"), Timeout: 50 * time.Millisecond,
		Breaker: redstream.BreakerOptions{Disabled: true}, Quota: QuotaOptions{Enabled: true, Duration: time.Second, MaxShare: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.UnixMicro(1_700_000_000_000_000).Truncate(time.Hour)
	admitted := int64(0)
	at := t0
	allow := func() (redstream.Decision, error) {
		at = at.Add(100 * time.Microsecond)
		d, err := l.AllowN(ctx, "k", at, 1)
		if err == nil && d.Allowed {
			admitted++
		}
		return d, err
	}
	for range 20 {
		if d, err := allow(); err != nil || !d.Allowed {
			t.Fatalf("warm-up: %+v, %v", d, err)
		}
	}
	e := l.quota.entry("k")
	e.mu.Lock()
	left, life := e.left, e.life
	e.mu.Unlock()
	if left < 10 {
		t.Fatalf("the lease holds %d units, want at least 10", left)
	}
	resume := hang(t, c)
	for range 5 {
		if d, err := allow(); err != nil || !d.Allowed {
			t.Fatalf("from the lease while Redis hangs: %+v, %v; want admitted in process", d, err)
		}
	}
	at = at.Add(time.Duration(life) * time.Microsecond) // past the lease's life
	if _, err := allow(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the lease, Redis hanging: %v, want the timeout", err)
	}
	resume()
	for range 50 {
		if _, err := allow(); err != nil {
			t.Fatal(err)
		}
	}
	// Let the last lease end, giving back what it did not use.
	at = at.Add(2 * time.Duration(life) * time.Microsecond)
	if _, err := allow(); err != nil {
		t.Fatal(err)
	}
	p, err := l.PeekN(ctx, "k", at, 1)
	if err != nil {
		t.Fatal(err)
	}
	if admitted+p.Remaining > spec.Limit {
		t.Errorf("admitted %d, Redis has %d left: %d, more than the limit %d", admitted, p.Remaining, admitted+p.Remaining, spec.Limit)
	}
	t.Logf("admitted %d, %d left in Redis (%d units of the lease taken by the call that timed out stay spent)", admitted, p.Remaining, spec.Limit-admitted-p.Remaining)
}

// TestQuotaClocksAndReset: a lease serves the clock it was taken on (a request at the other
// one takes its own lease and gives nothing back across clocks), and Reset forgets it.
func TestQuotaClocksAndReset(t *testing.T) {
	c := redistest.Client(t)
	spec := redstream.FixedWindow(time.Hour, 1000)
	l, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("leaseclock"), Quota: QuotaOptions{Enabled: true, Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := func() int64 { return l.quota.calls.Load() }
	for range 50 {
		if d, err := l.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
			t.Fatalf("at the server's TIME: %+v, %v", d, err)
		}
	}
	if got := calls(); got > 3 {
		t.Errorf("50 requests at the server's TIME made %d calls, want a lease to serve most", got)
	}
	before := calls()
	d, err := l.AllowN(ctx, "k", time.Now(), 1)
	if err != nil || !d.Allowed || calls() != before+1 {
		t.Fatalf("at an explicit time: %+v, %v, %d calls; want admitted by Redis", d, err, calls()-before)
	}
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if n := l.quota.len(); n != 0 {
		t.Errorf("%d lease entries after Reset, want 0", n)
	}
	p, err := l.PeekN(ctx, "k", time.Time{}, 1)
	if err != nil || p.Remaining != spec.Limit-1 {
		t.Errorf("after Reset: %+v, %v; want a new key (remaining %d)", p, err, spec.Limit-1)
	}
}

// FuzzLeaseForeignState writes an arbitrary string at a leased limiter's key on a real
// redis-server and runs quota.lua with a give-back: the reply is a sane decision, or
// ErrForeignState with the key left as it was; the give-back never writes a value it could
// not read.
func FuzzLeaseForeignState(f *testing.F) {
	for i := range leaseSpecs {
		for _, v := range []string{"12:3", "12:3:4", "1e308", "nan", "inf", "-5", "99999999999999999999:1", "1:2:x", "1:2:3:4", "", "\x00", "5", "0x10", "1.5",
			// The lease's window (its start is at's): a give-back would write these.
			"1767225600000000:3", "1767225600000000:3:x", "1767225600000000:3:4:5", "1767225600000000:3x", "1767225600000000:3:4",
			"9007199254740993"} {
			f.Add(uint8(i), v)
		}
	}
	c := redistest.Client(f)
	f.Fuzz(func(t *testing.T, which uint8, v string) {
		spec := leaseSpecs[int(which)%len(leaseSpecs)]
		l, err := NewLimiter(c, spec, Options{KeyPrefix: uniq("leasefuzz"), Quota: QuotaOptions{Enabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		k := l.Keys("k")[0]
		ctx := context.Background()
		if err := c.Do(ctx, c.B().Set().Key(k).Value(v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		const at = int64(1_767_225_600_000_000)
		e := &lease{granted: 10, left: 5, end: at + 1000}
		vs, err := l.runLease(ctx, "k", l.quota.leaseArgs(e, time.UnixMicro(at), 1, 10))
		if err != nil {
			if !errors.Is(err, ErrForeignState) {
				t.Fatalf("%v on %q: %v, want a decision or ErrForeignState", spec, v, err)
			}
			if got := rawState(t, c, k); got != v {
				t.Fatalf("%v on %q: the key holds %q after ErrForeignState", spec, v, got)
			}
			return
		}
		d := coreDecision(vs)
		if d.Remaining < 0 || d.RetryAfter < 0 || d.ResetAfter < 0 || d.Allowed && d.RetryAfter != 0 || vs[6] < 0 || vs[6] > 10 || d.Allowed != (vs[6] > 0) || vs[8] < vs[7] {
			t.Fatalf("%v on %q: reply %v", spec, v, vs)
		}
	})
}
