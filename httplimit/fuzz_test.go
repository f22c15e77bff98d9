package httplimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/httplimit"
)

// FuzzHeaders: whatever the policy name (from configuration: any bytes) and the numbers of
// the decision, two stacked middlewares write RateLimit-Policy and RateLimit fields that
// parse as the draft's structured-field lists, with each name escaped or replaced but kept.
func FuzzHeaders(f *testing.F) {
	f.Add("api", int64(100), int64(60_000), int64(42), int64(17_000))
	f.Add(`we"ird\\`, int64(1), int64(0), int64(-5), int64(-1))
	f.Add("n\x00\xff\n", int64(1<<62), int64(1<<62), int64(1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, name string, quota, windowMs, remaining, resetMs int64) {
		if name == "" || quota <= 0 || windowMs < 0 || windowMs > int64(time.Duration(1<<62)/time.Millisecond) || resetMs > int64(time.Duration(1<<62)/time.Millisecond) {
			t.Skip("rejected by New, or not a duration")
		}
		d := redstream.Decision{Allowed: true, Limit: quota, Remaining: remaining, ResetAfter: time.Duration(resetMs) * time.Millisecond}
		mk := func(n string) *httplimit.Middleware {
			m, err := httplimit.New(httplimit.Options{Limiter: &fakeLimiter{d: d}, Key: byUser,
				Policies: []httplimit.Policy{{Name: n, Quota: quota, Window: time.Duration(windowMs) * time.Millisecond}}})
			if err != nil {
				t.Fatalf("New(%q): %v", n, err)
			}
			return m
		}
		h := mk("outer-" + name).Wrap(mk(name).Wrap(okHandler))
		rec := get(t, h, "u")
		pol, err := parseSFList(strings.Join(rec.Header().Values("RateLimit-Policy"), ", "))
		if err != nil {
			t.Fatalf("RateLimit-Policy %q: %v", rec.Header().Values("RateLimit-Policy"), err)
		}
		rl, err := parseSFList(strings.Join(rec.Header().Values("RateLimit"), ", "))
		if err != nil {
			t.Fatalf("RateLimit %q: %v", rec.Header().Values("RateLimit"), err)
		}
		if len(pol) != 2 || len(rl) != 2 || pol[1].name != rl[1].name || len(pol[1].name) != len(name) {
			t.Fatalf("policies %+v, items %+v for name %q", pol, rl, name)
		}
		if q := pol[1].params["q"]; q <= 0 {
			t.Fatalf("q = %d", q)
		}
		if r := rl[1].params["r"]; r < 0 {
			t.Fatalf("r = %d", r)
		}
	})
}
