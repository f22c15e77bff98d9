package proptest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// modelLeaser is the reference model behind the ConcurrencyLimiter interface, with
// optional bugs: unmutated it must pass; every mutant must be caught.
type modelLeaser struct {
	mu     sync.Mutex
	m      *leaseModel
	byTok  map[uint64]*modelLease
	mutant string
}

func (l *modelLeaser) Acquire(_ context.Context, key string, now time.Time, n int64) (redstream.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, at, err := l.m.acquire(key, now.UnixMicro(), n)
	if err != nil {
		return redstream.Lease{}, err
	}
	lease := redstream.Lease{Decision: decisionOf(d), Key: key}
	if !d.Allowed {
		return lease, nil
	}
	lease.N, lease.Token = n, rand.Uint64N(1<<53-1)+1
	lease.Expiry = time.UnixMicro(at + l.m.limits[l.m.ci].Period())
	if l.mutant == "expiry reported 1µs late" {
		lease.Expiry = lease.Expiry.Add(time.Microsecond)
	}
	ml := &modelLease{at: at, n: n, got: lease}
	l.byTok[lease.Token] = ml
	l.m.leases = append(l.m.leases, ml) // so that the model's pruning ends it too
	return lease, nil
}

// when is the time a release or an extension is judged at: the expiry mutant keeps a lease
// alive 1 µs past its expiry.
func (l *modelLeaser) when(now time.Time) int64 {
	if l.mutant == "lease outlives its expiry by 1µs" {
		return now.UnixMicro() - 1
	}
	return now.UnixMicro()
}

func (l *modelLeaser) Release(_ context.Context, lease redstream.Lease, now time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ml := l.byTok[lease.Token]
	if ml == nil || lease.Key != ml.got.Key {
		return false, nil
	}
	if l.mutant == "release frees one unit too few" {
		if ml.released || !coreops.ReleaseLease(l.m.limits[l.m.ci], &l.m.state(lease.Key)[l.m.ci], ml.at, l.when(now), ml.n-1) {
			return false, nil
		}
		ml.released = true
		return true, nil
	}
	if l.mutant == "second release frees again" && ml.released {
		return coreops.ReleaseLease(l.m.limits[l.m.ci], &l.m.state(lease.Key)[l.m.ci], ml.at, l.when(now), ml.n), nil
	}
	return l.m.release(ml, lease.Key, l.when(now)), nil
}

func (l *modelLeaser) Extend(_ context.Context, lease redstream.Lease, now time.Time) (redstream.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ml := l.byTok[lease.Token]
	if ml == nil {
		return lease, redstream.ErrLeaseLost
	}
	at, ok := l.m.extend(ml, lease.Key, l.when(now))
	if !ok {
		return lease, redstream.ErrLeaseLost
	}
	lease.Expiry = time.UnixMicro(at + l.m.limits[l.m.ci].Period())
	return lease, nil
}

func leaserFactory(mutant string) ConcurrencyFactory {
	return func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error) {
		m := &leaseModel{ci: -1, states: map[string][]core.State{}}
		for i, s := range specs {
			p, err := s.Core()
			if err != nil {
				return nil, err
			}
			if s.Algorithm == redstream.AlgorithmConcurrency {
				m.ci = i
			}
			m.limits = append(m.limits, p)
		}
		if m.ci < 0 {
			return nil, fmt.Errorf("no concurrency spec in %v", specs)
		}
		return &modelLeaser{m: m, byTok: map[uint64]*modelLease{}, mutant: mutant}, nil
	}
}

func TestLeaseModelPasses(t *testing.T) {
	TestConcurrencyLimiter(t, leaserFactory(""), Options{Checks: 300})
}

// TestLeaseMutantsAreCaught: the lease suite fails an engine whose release or expiry is off
// by one.
func TestLeaseMutantsAreCaught(t *testing.T) {
	for _, m := range []string{"release frees one unit too few", "second release frees again",
		"lease outlives its expiry by 1µs", "expiry reported 1µs late"} {
		t.Run(m, func(t *testing.T) {
			failed, out := caught(func(r *recTB) { CheckConcurrencyLimiter(r, leaserFactory(m), 300, 60) })
			if !failed {
				t.Fatalf("mutant %q survived 300 cases", m)
			}
			if !strings.Contains(out, "step ") {
				t.Fatalf("failure output does not show the failing call:\n%s", out)
			}
		})
	}
}
