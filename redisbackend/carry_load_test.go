package redisbackend

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/memory"
)

// liveSwitch is a limiter that goroutines decide with while it is switched to another,
// as a process switches to a new policy: a decision runs on the limiter current when it
// starts, and the switch waits for the decisions in flight.
type liveSwitch struct {
	mu sync.RWMutex
	l  redstream.Limiter
}

// TestCarryUnderLoad: a policy raised and lowered while 8 goroutines hammer one key admits,
// over the change, exactly what its strategy promises (counted on the previous spec before
// the switch and on the new one after it), on memory, a real redis-server and a real
// 3-master cluster. Times are explicit and no bucket refills during the test, so the
// promise is an exact count; reset shows the over-admission the other strategies prevent.
func TestCarryUnderLoad(t *testing.T) {
	const hour = time.Hour
	type change struct {
		name       string
		old, new   redstream.Spec
		before     int64 // admissions on the previous spec before the switch
		oldL, newL int64
	}
	changes := []change{
		{"fixed raise", redstream.FixedWindow(hour, 20), redstream.FixedWindow(hour, 40), 12, 20, 40},
		{"fixed lower", redstream.FixedWindow(hour, 40), redstream.FixedWindow(hour, 20), 30, 40, 20},
		{"counter raise", redstream.SlidingCounter(hour, 20), redstream.SlidingCounter(hour, 40), 12, 20, 40},
		{"bucket raise", redstream.TokenBucket(20, 0.001), redstream.TokenBucket(40, 0.001), 12, 20, 40},
		{"bucket lower", redstream.TokenBucket(40, 0.001), redstream.TokenBucket(20, 0.001), 30, 40, 20},
	}
	promise := func(c change, carry core.Carry, before int64) int64 {
		consumed := int64(0)
		switch carry {
		case core.CarryAsIs:
			consumed = min(before, c.newL)
		case core.CarryProportional:
			consumed = min((before*c.newL+c.oldL-1)/c.oldL, c.newL)
		}
		return c.newL - consumed
	}
	engines := []struct {
		name  string
		build func(t *testing.T, prefix string, c change, carry core.Carry) (old, next func() redstream.Limiter)
	}{
		{"memory", func(t *testing.T, _ string, c change, carry core.Carry) (func() redstream.Limiter, func() redstream.Limiter) {
			old, err := memory.NewLimiter(c.old, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return func() redstream.Limiter { return old }, func() redstream.Limiter {
				s, err := old.Successor(carry, c.new)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
	}
	for _, b := range backends[1:] {
		engines = append(engines, struct {
			name  string
			build func(t *testing.T, prefix string, c change, carry core.Carry) (old, next func() redstream.Limiter)
		}{b.name, func(t *testing.T, prefix string, c change, carry core.Carry) (func() redstream.Limiter, func() redstream.Limiter) {
			client := b.client(t)
			old, err := NewLimiter(client, c.old, Options{Timeout: 5 * time.Second, KeyPrefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			return func() redstream.Limiter { return old }, func() redstream.Limiter {
				l, err := NewLimiter(client, c.new, Options{Timeout: 5 * time.Second, KeyPrefix: prefix, Previous: []redstream.Spec{c.old}, Carry: carry})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
		}})
	}
	for _, e := range engines {
		for _, c := range changes {
			for _, carry := range []core.Carry{core.CarryAsIs, core.CarryProportional, core.CarryReset} {
				t.Run(fmt.Sprintf("%s/%s/%s", e.name, c.name, carry), func(t *testing.T) {
					old, next := e.build(t, uniq("load"), c, carry)
					before, after := runChange(t, old(), next, c.before)
					if want := promise(c, carry, before); after != want {
						t.Errorf("%d admitted on the previous spec, then %d on the new one; want %d (%s of %d -> %d)",
							before, after, want, carry, c.oldL, c.newL)
					}
				})
			}
		}
	}
}

// runChange hammers one key from 8 goroutines on old until at least target admissions,
// switches to next() while they run, and counts the admissions on each side.
func runChange(t *testing.T, old redstream.Limiter, next func() redstream.Limiter, target int64) (before, after int64) {
	t.Helper()
	ctx := context.Background()
	now := time.Unix(1_900_000_000, 0)
	sw := &liveSwitch{l: old}
	var (
		admittedOld, admittedNew, errs atomic.Int64
		switched                       atomic.Bool
		afterCalls                     atomic.Int64
		wg                             sync.WaitGroup
	)
	const goroutines, afterEach = 8, 20
	ready := make(chan struct{})
	var once sync.Once
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for afterCalls.Load() < goroutines*afterEach {
				sw.mu.RLock()
				onNew := switched.Load()
				d, err := sw.l.AllowN(ctx, "hot", now, 1)
				sw.mu.RUnlock()
				switch {
				case err != nil:
					errs.Add(1)
					return
				case onNew:
					afterCalls.Add(1)
					if d.Allowed {
						admittedNew.Add(1)
					}
				case d.Allowed:
					if admittedOld.Add(1) >= target {
						once.Do(func() { close(ready) })
					}
				}
			}
		}()
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the previous spec never reached its target admissions")
	}
	n := next()
	sw.mu.Lock()
	sw.l = n
	switched.Store(true)
	sw.mu.Unlock()
	wg.Wait()
	if errs.Load() > 0 {
		t.Fatalf("%d decisions failed", errs.Load())
	}
	return admittedOld.Load(), admittedNew.Load()
}
