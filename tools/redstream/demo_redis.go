package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/redisbackend"
)

func init() {
	registerDemo(demo{
		name:    "redis",
		summary: "Redis engines (Lua on rueidis): shared limits, multi-limits, batches, dedup, failure policies",
		order:   20,
		run:     demoRedis,
	})
}

// demoRedis runs the Redis engines on the embedded miniredis, with two clients standing in
// for two processes that share state.
func demoRedis(ctx context.Context, out io.Writer) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return err
	}
	defer mr.Close()
	connect := func() (rueidis.Client, error) {
		return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	}
	a, err := connect()
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := connect()
	if err != nil {
		return err
	}
	defer b.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	// 1. The Java starter's token bucket (capacity 5, 2/s) shared by two processes.
	spec := redstream.TokenBucket(5, 2)
	la, err := redisbackend.NewLimiter(a, spec, redisbackend.Options{Timeout: demoTimeout})
	if err != nil {
		return err
	}
	lb, _ := redisbackend.NewLimiter(b, spec, redisbackend.Options{Timeout: demoTimeout})
	fmt.Fprintf(out, "%v on key %s, two clients alternating at one instant:\n  ", spec, la.Keys("user:1")[0])
	for i := 0; i < 8; i++ {
		l := la
		if i%2 == 1 {
			l = lb
		}
		d, err := l.AllowN(ctx, "user:1", t0, 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s ", mark(d.Allowed))
	}
	d, _ := la.AllowN(ctx, "user:1", t0.Add(time.Second), 1)
	fmt.Fprintf(out, "\n  one second later: allowed=%v remaining=%d (2 tokens back, 1 spent)\n", d.Allowed, d.Remaining)

	// 2. The Java starter's sliding window log: 3 per second.
	sw, err := redisbackend.NewLimiter(a, redstream.SlidingWindow(time.Second, 3), redisbackend.Options{Timeout: demoTimeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sliding window 3/s on %s:\n  ", sw.Keys("203.0.113.7")[0])
	for _, at := range []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, time.Second} {
		d, err := sw.AllowN(ctx, "203.0.113.7", t0.Add(at), 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "+%v %s  ", at, mark(d.Allowed))
		if !d.Allowed {
			fmt.Fprintf(out, "(retry after %v)  ", d.RetryAfter)
		}
	}
	fmt.Fprintln(out)

	// 3. Two limits on one key, all-or-nothing, one script.
	multi, err := redisbackend.NewMultiLimiter(a, []redstream.Spec{
		redstream.SlidingWindow(time.Second, 2), redstream.FixedWindow(time.Minute, 3),
	}, redisbackend.Options{Timeout: demoTimeout})
	if err != nil {
		return err
	}
	fmt.Fprint(out, "2/s AND 3/min on one key:\n  ")
	for _, at := range []time.Duration{0, 0, 0, 2 * time.Second, 4 * time.Second} {
		d, _ := multi.AllowN(ctx, "user:1", t0.Add(at), 1)
		fmt.Fprintf(out, "+%v %s (limit %d)  ", at, mark(d.Allowed), d.Limit)
	}
	fmt.Fprintln(out)

	// 4. A batch: many keys in one pipelined round trip.
	fw, _ := redisbackend.NewLimiter(a, redstream.FixedWindow(time.Minute, 1), redisbackend.Options{KeyPrefix: "demo:batch", Timeout: demoTimeout})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i%500) // every key twice
	}
	ds, err := fw.AllowBatch(ctx, keys, t0, 1)
	if err != nil {
		return err
	}
	allowed := 0
	for _, d := range ds {
		if d.Allowed {
			allowed++
		}
	}
	fmt.Fprintf(out, "batch of %d decisions over 500 keys (limit 1 each) in one round trip: %d allowed\n", len(ds), allowed)

	// 5. Deduplication across processes.
	win := redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}
	da, err := redisbackend.NewDeduplicator(a, "dedup:orders", win, redisbackend.DedupOptions{Timeout: demoTimeout})
	if err != nil {
		return err
	}
	db, _ := redisbackend.NewDeduplicator(b, "dedup:orders", win, redisbackend.DedupOptions{Timeout: demoTimeout})
	w1, w2 := da.(redstream.TimedDeduplicator), db.(redstream.TimedDeduplicator)
	d1, _ := w1.CheckAndMarkAt(ctx, "order-1", t0)
	d2, _ := w2.CheckAndMarkAt(ctx, "order-1", t0.Add(30*time.Minute))
	d3, _ := w1.CheckAndMarkAt(ctx, "order-1", t0.Add(90*time.Minute))
	fmt.Fprintf(out, "windowed dedup (1h): order-1 at +0 duplicate=%v, +30m from the other client duplicate=%v, +90m duplicate=%v\n", d1, d2, d3)
	bspec := redstream.DedupSpec{Strategy: redstream.DedupBloom}
	bloom, err := redisbackend.NewDeduplicator(a, "seen-ids", bspec, redisbackend.DedupOptions{Timeout: demoTimeout})
	if err != nil {
		return err
	}
	bp, _ := bspec.BloomParams()
	dups, err := bloom.(interface {
		CheckAndMarkBatch(ctx context.Context, elements []string) ([]bool, error)
	}).CheckAndMarkBatch(ctx, []string{"id-1", "id-2", "id-1"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Bloom dedup (n=%d, p=%g: k=%d, %.2f bits/element, %d KiB): id-1, id-2, id-1 duplicate=%v\n",
		bp.Insertions, bp.FPRate, bp.K, float64(bp.Bits)/float64(bp.Insertions), bp.Bits/8/1024, dups)

	// 6. Failure policies when Redis goes away.
	mr2 := miniredis.NewMiniRedis()
	if err := mr2.Start(); err != nil {
		return err
	}
	down, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr2.Addr()}, DisableCache: true})
	if err != nil {
		mr2.Close()
		return err
	}
	defer down.Close()
	closed, err := redisbackend.NewLimiter(down, spec, redisbackend.Options{Timeout: demoTimeout})
	if err != nil {
		return err
	}
	open, _ := redstream.WithFailurePolicy(closed, redstream.FailOpen, nil)
	fb, err := redstream.WithFailurePolicy(closed, redstream.FailFallback, nil) // an in-process limiter of the same spec
	if err != nil {
		return err
	}
	mr2.Close() // this Redis goes away
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, errClosed := closed.AllowN(dctx, "user:1", t0, 1)
	dOpen, _ := open.AllowN(dctx, "user:1", t0, 1)
	dFb, _ := fb.AllowN(dctx, "user:1", t0, 1)
	if errClosed == nil {
		return fmt.Errorf("fail-closed limiter decided with Redis down")
	}
	fmt.Fprintf(out, "Redis unreachable: fail-closed -> an error naming the script (%v); fail-open -> allowed=%v; fallback (memory) -> allowed=%v remaining=%d\n",
		strings.Contains(errClosed.Error(), "gcra.lua"), dOpen.Allowed, dFb.Allowed, dFb.Remaining)
	return nil
}

// demoTimeout bounds each Redis call of the demo: miniredis runs the scripts in Go, slower
// than Redis, and the demo must not fail on a loaded machine (Redis engines default to
// 100 ms).
const demoTimeout = 2 * time.Second

func mark(allowed bool) string {
	if allowed {
		return "allow"
	}
	return "deny"
}
