package redstream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// waitJitter is the fraction of RetryAfter by which Wait's sleeps are spread (1/waitJitter),
// and waitFloor the sleep after a denial that names no wait.
const (
	waitJitter = 8
	waitFloor  = time.Millisecond
)

// Wait blocks until l admits a request of cost n for key at the engine's clock, and returns
// the admitting decision. After each denial it sleeps the decision's RetryAfter (the
// exact time after which the same request could pass) plus a random jitter of up to an
// eighth of it, then asks again; it makes one AllowN per attempt and nothing else.
//
// ctx bounds the wait: Wait never sleeps past ctx's deadline. When a denial's RetryAfter
// ends after the deadline, Wait returns at once that denial and an error wrapping
// context.DeadlineExceeded that says how long the key asked to wait; when ctx is done
// while sleeping, it returns the last denial and ctx.Err(). Errors of AllowN (bad input,
// a backend failure) are returned as they come, with AllowN's decision.
//
// Fairness: waiters are not queued. The jitter keeps waiters denied together from asking
// again at the same instant (no thundering herd on the key), and a waiter asks again no
// sooner than its request could pass; but a request that arrives while others sleep may be
// admitted before them, and among waiters the one whose sleep ends first goes first. Under
// sustained contention a waiter can be overtaken repeatedly: bound it with ctx.
func Wait(ctx context.Context, l Limiter, key string, n int64) (Decision, error) {
	for {
		d, err := l.AllowN(ctx, key, time.Time{}, n)
		if err != nil || d.Allowed {
			return d, err
		}
		sleep := d.RetryAfter
		if sleep <= 0 {
			sleep = waitFloor
		}
		if j := int64(sleep / waitJitter); j > 0 {
			sleep += time.Duration(rand.Int64N(j + 1))
		}
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left < d.RetryAfter {
				return d, fmt.Errorf("redstream: Wait: key %q admits cost %d in %v, after the context's deadline (in %v): %w",
					key, n, d.RetryAfter, left.Round(time.Microsecond), context.DeadlineExceeded)
			}
			sleep = min(sleep, left)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return d, ctx.Err()
		case <-t.C:
		}
	}
}
