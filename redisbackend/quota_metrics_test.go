package redisbackend

import (
	"context"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
)

// TestQuotaCounters: on a real redis-server, the leased-quota counters of a limiter's prefix
// move by exactly what its leases did, step by step: a cold key's plain admission, a lease's
// take, admissions from it, a renewal that gives back the unused units before the lease's
// end, one after its end (given back by a window algorithm, whose window is still current;
// not by a token bucket), and a denied call. For the window algorithms the state in Redis then
// holds exactly Granted - Returned admissions.
func TestQuotaCounters(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		spec        redstream.Spec
		backLate    bool // a give-back after the lease's end returns its units
		countsState bool // Peek's Remaining is the limit minus the units the key holds, minus 1
	}{
		{redstream.TokenBucket(1000, 1000), false, false},
		{redstream.FixedWindow(time.Hour, 1000), true, true},
		{redstream.SlidingCounter(time.Hour, 1000), true, true},
	} {
		t.Run(string(tc.spec.Algorithm), func(t *testing.T) {
			prefix := uniq("leasemetrics")
			// Duration 1 s, MaxShare 0.1: a lease's life is 750 ms, its slice at most 100.
			l, err := NewLimiter(c, tc.spec, Options{KeyPrefix: prefix, Quota: QuotaOptions{Enabled: true, Duration: time.Second, MaxShare: 0.1}})
			if err != nil {
				t.Fatal(err)
			}
			twin, err := NewLimiter(c, tc.spec, Options{KeyPrefix: prefix, DisableLocalDenials: true})
			if err != nil {
				t.Fatal(err)
			}
			q := metrics.LeasedQuotaCounters(prefix)
			t0 := time.UnixMicro(1_767_225_600_000_000).Add(time.Minute) // a minute into an hour's window
			allow := func(key string, at time.Time, want bool) {
				t.Helper()
				d, err := l.AllowN(ctx, key, at, 1)
				if err != nil || d.Allowed != want {
					t.Fatalf("AllowN(%s, %v): %+v, %v; want allowed %v", key, at.Sub(t0), d, err, want)
				}
			}
			check := func(step string, calls, granted, returned, local uint64) {
				t.Helper()
				got := [4]uint64{q.Calls.Get(), q.Granted.Get(), q.Returned.Get(), q.LocalAllowed.Get()}
				if want := [4]uint64{calls, granted, returned, local}; got != want {
					t.Fatalf("after %s: calls, granted, returned, local allowed = %v, want %v", step, got, want)
				}
			}
			check("nothing", 0, 0, 0, 0)
			allow("k", t0, true)
			check("a cold key's request (a plain admission)", 1, 1, 0, 0)
			b := t0.Add(100 * time.Microsecond)
			allow("k", b, true)
			check("the second request (a lease of the share, 100)", 2, 101, 0, 0)
			for i := range 9 {
				allow("k", b.Add(time.Duration(i+1)*100*time.Microsecond), true)
			}
			check("9 requests from the lease", 2, 101, 0, 9)
			// 800 ms after the take: past the lease's life, before its end. 10 used in 800 ms
			// asks for 1 + 10 * 1 s / 800 ms = 13; the 90 unused go back.
			d := b.Add(800 * time.Millisecond)
			allow("k", d, true)
			check("a renewal before the lease's end", 3, 114, 90, 9)
			// 3 s later: 1 of 13 used asks for the request's cost alone; the 12 unused are sent
			// back after the lease's end.
			late := uint64(0)
			if tc.backLate {
				late = 12
			}
			e := d.Add(3 * time.Second)
			allow("k", e, true)
			check("a renewal after the lease's end", 4, 115, 90+late, 9)
			if tc.countsState {
				p, err := l.PeekN(ctx, "k", e, 1)
				if err != nil {
					t.Fatal(err)
				}
				if held := uint64(tc.spec.Limit - p.Remaining - 1); held != 115-90-late {
					t.Errorf("the key holds %d units in Redis, want granted - returned = %d", held, 115-90-late)
				}
			}
			// A key another process used up: the call is a denial and takes nothing.
			if dd, err := twin.AllowN(ctx, "full", t0, l.limit); err != nil || !dd.Allowed {
				t.Fatalf("twin: %+v, %v", dd, err)
			}
			allow("full", t0.Add(time.Microsecond), false)
			check("a denied call", 5, 115, 90+late, 9)
		})
	}
}
