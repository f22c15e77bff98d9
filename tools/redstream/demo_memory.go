package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/memory"
)

func init() {
	registerDemo(demo{
		name:    "memory",
		summary: "in-process limiters (sliding window, token bucket, leaky bucket with Delay) and deduplicators",
		order:   10,
		run:     demoMemory,
	})
}

// demoMemory drives the in-process engines with explicit times, so what it prints is the
// same on every run.
func demoMemory(ctx context.Context, out io.Writer) error {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond

	// Each step is a request at start+at; the demo prints the decision.
	limiterDemo := func(title string, spec redstream.Spec, ats []time.Duration, shaping bool) error {
		l, err := memory.NewLimiter(spec, memory.Options{})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n%s: %v\n", title, spec)
		var line []string
		for _, at := range ats {
			d, err := l.AllowN(ctx, "user:1", start.Add(at), 1)
			if err != nil {
				return err
			}
			switch {
			case !d.Allowed:
				line = append(line, fmt.Sprintf("t+%v DENIED (retry in %v)", at, d.RetryAfter))
			case shaping:
				line = append(line, fmt.Sprintf("t+%v ok, wait %v before sending (leaves at t+%v)", at, d.Delay, at+d.Delay))
			default:
				line = append(line, fmt.Sprintf("t+%v ok (%d left)", at, d.Remaining))
			}
		}
		for _, s := range line {
			fmt.Fprintln(out, "  ", s)
		}
		return nil
	}

	if err := limiterDemo("sliding window, 5 per second",
		redstream.SlidingWindow(time.Second, 5),
		[]time.Duration{0, 100 * ms, 200 * ms, 300 * ms, 400 * ms, 500 * ms, 999 * ms, 1000 * ms}, false); err != nil {
		return err
	}
	burst := make([]time.Duration, 11)
	if err := limiterDemo("token bucket, burst 10, 5 per second",
		redstream.TokenBucket(10, 5), append(burst, 100*ms, 200*ms, 400*ms), false); err != nil {
		return err
	}
	if err := limiterDemo("leaky bucket, capacity 2, leaking 1 per second (Delay shapes the output)",
		redstream.LeakyBucket(2, 1), []time.Duration{0, 0, 0, 1000 * ms, 5000 * ms}, true); err != nil {
		return err
	}

	fmt.Fprintln(out, "\ndeduplicators: CheckAndMark of order-1, order-2, order-1")
	for _, strategy := range []redstream.DedupStrategy{redstream.DedupSet, redstream.DedupBloom, redstream.DedupWindowed} {
		d, err := memory.NewDeduplicator(redstream.DedupSpec{Strategy: strategy, Insertions: 10_000, FPRate: 0.01}, memory.Options{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range []string{"order-1", "order-2", "order-1"} {
			dup, err := d.CheckAndMark(ctx, e)
			if err != nil {
				return err
			}
			if dup {
				seen = append(seen, e+" duplicate")
			} else {
				seen = append(seen, e+" new")
			}
		}
		n, err := d.UniqueCount(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "   %-8s %s; unique %d\n", strategy, strings.Join(seen, ", "), n)
	}

	wd, err := memory.NewDeduplicator(redstream.DedupSpec{Strategy: redstream.DedupWindowed, Window: time.Hour}, memory.Options{})
	if err != nil {
		return err
	}
	w := wd.(redstream.TimedDeduplicator)
	fmt.Fprintln(out, "\nwindowed deduplicator, 1h window (a duplicate sighting refreshes last-seen):")
	for _, at := range []time.Duration{0, 30 * time.Minute, 89 * time.Minute, 150 * time.Minute} {
		dup, err := w.CheckAndMarkAt(ctx, "order-1", start.Add(at))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "   t+%-9v order-1 duplicate=%v\n", at, dup)
	}
	return nil
}
