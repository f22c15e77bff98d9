package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// clusterNodeOf returns the address of the master of the package's cluster that serves
// slot, and a single-node client to it.
func clusterNodeOf(t *testing.T, slot uint16) (string, rueidis.Client) {
	t.Helper()
	for _, addr := range redistest.ClusterAddrs(t) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		myid, err := c.Do(context.Background(), c.B().ClusterMyid().Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := c.Do(context.Background(), c.B().ClusterSlots().Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range nodes {
			rng, err := r.ToArray()
			if err != nil || len(rng) < 3 {
				t.Fatalf("CLUSTER SLOTS entry %v: %v", r, err)
			}
			lo, _ := rng[0].AsInt64()
			hi, _ := rng[1].AsInt64()
			master, _ := rng[2].ToArray()
			if len(master) < 3 || int64(slot) < lo || int64(slot) > hi {
				continue
			}
			id, _ := master[2].ToString()
			if id == myid {
				return addr, c
			}
		}
	}
	t.Fatalf("no master serves slot %d", slot)
	return "", nil
}

// TestClusterMasterHung: with one master of a real 3-master cluster SIGSTOPped, decisions
// on its keys time out, the hung master's breaker opens after 3, and then its keys fall
// back at once while the healthy masters' keys are decided in Redis (each master has a
// breaker of its own); an engine with Breaker.Failures = -1 keeps deciding the healthy
// masters' keys in Redis too. After SIGCONT decisions are made in Redis again within the
// cool-down.
//
// On a cluster, rueidis may dial the hung node again in the background (a topology
// refresh after the timeouts) and make a call to that node wait for that dial, whatever the
// call's context, up to ClientOption.Dialer.Timeout (5 s by default). The client here sets
// it to 300 ms, as the README advises, and calls on the hung master are allowed that much
// more than the 150 ms.
func TestClusterMasterHung(t *testing.T) {
	const dialTimeout = 300 * time.Millisecond
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: redistest.ClusterAddrs(t), Dialer: net.Dialer{Timeout: dialTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	hungLimit := 150*time.Millisecond + dialTimeout
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	spec := redstream.TokenBucket(1000, 1000)
	eng := mustLimiter(t, c, spec, Options{Timeout: DefaultTimeout, Logger: quiet, KeyPrefix: uniq("cl-hung")})
	rate := mustLimiter(t, c, spec, Options{Timeout: DefaultTimeout, Logger: quiet, KeyPrefix: eng.KeyPrefix(), Breaker: redstream.BreakerOptions{Failures: -1}})
	down := "k0"
	downAddr, node := clusterNodeOf(t, slotOf(eng.Keys(down)[0]))
	up := ""
	for i := 1; up == ""; i++ {
		k := fmt.Sprint("k", i)
		if a, _ := clusterNodeOf(t, slotOf(eng.Keys(k)[0])); a != downAddr {
			up = k
		}
	}
	for _, k := range []string{down, up} {
		if _, err := eng.AllowN(ctx, k, time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the breakers' first CLUSTER SLOTS
	pid := serverPID(t, node)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // well within the cluster's 5 s node timeout: no failover
	l := withPolicy(t, eng, redstream.FailFallback, nil)
	meter := redistest.NewStallMeter(t)
	for i := 0; i < 3; i++ {
		var d redstream.Decision
		var err error
		took, stall := meter.Time(func() { d, err = l.AllowN(ctx, down, time.Time{}, 1) })
		if err != nil || !d.Allowed {
			t.Fatalf("decision %d on the hung master: %+v, %v", i, d, err)
		}
		if took > hungLimit+stall {
			t.Errorf("decision %d on the hung master took %v, want at most %v (the process stalled %v meanwhile)", i, took, hungLimit, stall)
		}
	}
	if eng.BreakerState() != redstream.BreakerOpen {
		t.Fatalf("breaker %v after 3 timeouts, want open", eng.BreakerState())
	}
	took, stall := meter.Time(func() { _, err = eng.AllowN(ctx, down, time.Time{}, 1) })
	if !errors.Is(err, redstream.ErrCircuitOpen) || took > 5*time.Millisecond+stall {
		t.Errorf("the hung master's key with its breaker open: %v in %v (stall %v); want ErrCircuitOpen at once", err, took, stall)
	}
	if _, err := eng.AllowN(ctx, up, time.Time{}, 1); err != nil {
		t.Errorf("a healthy master's key with the hung master's breaker open: %v, want a decision in Redis", err)
	}
	// The error-rate rule alone: healthy masters' keys are decided in Redis.
	for i := 0; i < 3; i++ {
		if _, err := rate.AllowN(ctx, up, time.Time{}, 1); err != nil {
			t.Errorf("Failures=-1: a healthy master's key: %v", err)
		}
		start := time.Now()
		if _, err := rate.AllowN(ctx, down, time.Time{}, 1); err == nil || time.Since(start) > hungLimit {
			t.Errorf("Failures=-1: the hung master's key: %v in %v; want a timeout within %v", err, time.Since(start), hungLimit)
		}
	}
	if rate.BreakerState() != redstream.BreakerClosed {
		t.Errorf("Failures=-1 breaker %v with half the calls failing below MinCalls, want closed", rate.BreakerState())
	}
	resume()
	begin := time.Now()
	for eng.BreakerState() != redstream.BreakerClosed && time.Since(begin) < 5*time.Second {
		_, _ = l.AllowN(ctx, down, time.Time{}, 1)
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("cluster: decisions back in Redis %v after SIGCONT", time.Since(begin))
	if eng.BreakerState() != redstream.BreakerClosed {
		t.Fatalf("breaker %v 5 s after SIGCONT, want closed", eng.BreakerState())
	}
}
