package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
)

// failoverCluster starts a cluster of its own for t (the package's shared one must
// survive): 3 masters with one replica each, a 1 s node timeout so that a killed master
// is failed over in a few seconds, and cluster-require-full-coverage off, so that the
// healthy masters keep serving their slots while one is down (with the default "yes"
// every node answers CLUSTERDOWN for every key from the moment the dead master is
// flagged until its replica takes over). It returns every node and the seed addresses.
func failoverCluster(t *testing.T) ([]*redistest.Server, []string) {
	t.Helper()
	return failoverClusterCoverage(t, false)
}

// failoverClusterCoverage is failoverCluster with cluster-require-full-coverage set to
// fullCoverage (Redis's default is true).
func failoverClusterCoverage(t *testing.T, fullCoverage bool) ([]*redistest.Server, []string) {
	t.Helper()
	cli, err := redistest.CLIBin()
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*redistest.Server
	var addrs []string
	for range 6 {
		s := redistest.NewServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", map[bool]string{true: "yes", false: "no"}[fullCoverage],
			"--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0")
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	if out, err := exec.Command(cli, append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range nodes {
		for {
			out, err := exec.Command(cli, "-p", strconv.Itoa(n.Port), "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") && strings.Contains(string(out), "cluster_known_nodes:6") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: cluster not ok: %s", n.Port, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Each replica must hold its master's data before a test kills the master.
	for _, n := range nodes {
		for {
			out, err := exec.Command(cli, "-p", strconv.Itoa(n.Port), "info", "replication").Output()
			if err == nil && (strings.Contains(string(out), "role:master") || strings.Contains(string(out), "master_link_status:up")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: replica not in sync: %s", n.Port, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nodes, addrs
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, masterID string
	master, failed     bool
	slots              [][2]int
}

// clusterNodes reads CLUSTER NODES from the node at addr.
func clusterNodes(ctx context.Context, addr string) ([]clusterNode, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
		DisableCache: true, Dialer: net.Dialer{Timeout: 300 * time.Millisecond}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	text, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		n := clusterNode{id: f[0], addr: strings.SplitN(f[1], "@", 2)[0], masterID: f[3],
			master: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")}
		for _, s := range f[8:] {
			lo, hi, ok := strings.Cut(s, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// masterOf returns the address of the master serving slot, as the node at addr sees it.
func masterOf(t *testing.T, addr string, slot uint16) string {
	t.Helper()
	nodes, err := clusterNodes(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		for _, r := range n.slots {
			if n.master && !n.failed && int(slot) >= r[0] && int(slot) <= r[1] {
				return n.addr
			}
		}
	}
	t.Fatalf("no live master serves slot %d", slot)
	return ""
}

// TestClusterMasterKilled: a real cluster of 3 masters with a replica each loses one
// master to SIGKILL; its replica is promoted a few seconds later. Throughout, every call
// of the limiters (in WithFailurePolicy(FailFallback, nil)) and of the deduplicators
// returns within Timeout + the client's dial timeout (with a margin for the loaded
// machine), and:
//
//   - with traffic spread over the masters, the dead master's keys fall back: three
//     (fallback_total{reason="error"}) open the dead master's breaker (each master has a
//     breaker of its own, and the healthy masters' calls between do not reset it), with
//     one Warn naming the node, and then fall back at once (reason "breaker_open"), while
//     the healthy masters' keys are decided in Redis;
//   - with Breaker.Failures = -1 (the error-rate rule alone) the healthy masters' keys are
//     decided in Redis all along too, and the dead master's breaker opens once 20 of its
//     calls have failed;
//   - a deduplicator's breaker is its own: one whose name lives on a healthy master keeps
//     working, one on the dead master fails (then fails fast with ErrCircuitOpen);
//
// and once the replica has taken over, every call is answered by Redis again within the
// cool-down (plus the breakers' topology lookup, which closes the dead master's breaker
// with one Info, and the client's refresh), also after the old master restarts.
func TestClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	nodes, addrs := failoverCluster(t)
	const dialTimeout = 300 * time.Millisecond
	// The bound of one call: the decision's Timeout, plus a dial of the dead node rueidis
	// may make a call wait for (see TestClusterMasterHung), plus a margin for the machine.
	const bound = DefaultTimeout + dialTimeout + 200*time.Millisecond
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, Dialer: net.Dialer{Timeout: dialTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	var logs, rateLogs logBuffer
	spec := redstream.TokenBucket(1000, 1000)
	eng := mustLimiter(t, client, spec, Options{Timeout: DefaultTimeout, Logger: slog.New(slog.NewTextHandler(&logs, nil)), KeyPrefix: uniq("cl-killed")})
	rate := mustLimiter(t, client, spec, Options{Timeout: DefaultTimeout, Logger: slog.New(slog.NewTextHandler(&rateLogs, nil)),
		KeyPrefix: eng.KeyPrefix(), Breaker: redstream.BreakerOptions{Failures: -1}})
	name := uniq("cl-killed")
	l, err := metrics.Named(name, withPolicy(t, eng, redstream.FailFallback, nil))
	if err != nil {
		t.Fatal(err)
	}

	// One key on the master to kill, one on each of the two others; the same for the
	// deduplicators' names.
	downAddr := masterOf(t, addrs[0], slotOf(eng.Keys("k0")[0]))
	keyOn := map[string]string{downAddr: "k0"}
	for i := 1; len(keyOn) < 3; i++ {
		k := fmt.Sprint("k", i)
		if a := masterOf(t, addrs[0], slotOf(eng.Keys(k)[0])); keyOn[a] == "" {
			keyOn[a] = k
		}
	}
	down, ups := keyOn[downAddr], []string{}
	for a, k := range keyOn {
		if a != downAddr {
			ups = append(ups, k)
		}
	}
	dopts := DedupOptions{Timeout: DefaultTimeout, Logger: slog.New(slog.DiscardHandler)}
	var dDown, dUp *setDedup
	var dDownName string
	for i := 0; dDown == nil || dUp == nil; i++ {
		n := uniq("cl-killed-dedup")
		d, err := newSetDeduplicator(client, n, dopts)
		if err != nil {
			t.Fatal(err)
		}
		if masterOf(t, addrs[0], slotOf(d.Key())) == downAddr {
			if dDown == nil {
				dDown, dDownName = d, n
			}
		} else if dUp == nil {
			dUp = d
		}
	}
	for _, k := range append([]string{down}, ups...) {
		if _, err := eng.AllowN(ctx, k, time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*setDedup{dDown, dUp} {
		if _, err := d.CheckAndMark(ctx, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the breakers' first CLUSTER SLOTS

	var victim *redistest.Server
	for _, n := range nodes {
		if n.Addr == downAddr {
			victim = n
		}
	}
	victim.Stop() // SIGKILL
	killed := time.Now()
	t.Cleanup(func() { _ = victim.Restart() })

	// A call may take the bound plus the stall of the whole process measured meanwhile
	// (see redistest.StallMeter).
	meter := redistest.NewStallMeter(t)
	var slowest time.Duration
	timed := func(what string, f func() error) error {
		t.Helper()
		var err error
		took, stall := meter.Time(func() { err = f() })
		slowest = max(slowest, took)
		if took > bound+stall {
			t.Errorf("%s took %v, want at most %v (the process stalled %v meanwhile)", what, took, bound, stall)
		}
		return err
	}
	// round makes one call of each kind, the dead master's key first (so that a probe of
	// an open breaker usually meets the dead master) and reports whether Redis answered
	// them all.
	var rounds, fellBack, rateUpErrors, dUpErrors, dDownFastFails int
	round := func(phase string) (allInRedis bool) {
		t.Helper()
		rounds++
		allInRedis = true
		before := eng.g.br.Stats().Opens
		for _, k := range append([]string{down}, ups...) {
			if err := timed(phase+" fallback decision "+k, func() error {
				d, err := l.AllowN(ctx, k, time.Time{}, 1)
				if err == nil && !d.Allowed {
					err = fmt.Errorf("denied: %+v", d)
				}
				return err
			}); err != nil {
				t.Fatalf("%s: decision on %s: %v; want an admission (Redis or fallback)", phase, k, err)
			}
		}
		if eng.BreakerState() != redstream.BreakerClosed || eng.g.br.Stats().Opens > before {
			allInRedis = false
			fellBack++
		}
		for _, k := range ups {
			if err := timed(phase+" Failures=-1 decision "+k, func() error { _, err := rate.AllowN(ctx, k, time.Time{}, 1); return err }); err != nil {
				rateUpErrors++
				allInRedis = false
				t.Logf("%s: Failures=-1, healthy master's key %s: %v", phase, k, err)
			}
		}
		if err := timed(phase+" Failures=-1 decision "+down, func() error { _, err := rate.AllowN(ctx, down, time.Time{}, 1); return err }); err != nil {
			allInRedis = false
		}
		if err := timed(phase+" dedup on a healthy master", func() error { _, err := dUp.CheckAndMark(ctx, "x"); return err }); err != nil {
			dUpErrors++
			allInRedis = false
			t.Logf("%s: dedup on a healthy master: %v", phase, err)
		}
		if err := timed(phase+" dedup on the dead master", func() error { _, err := dDown.CheckAndMark(ctx, "x"); return err }); err != nil {
			allInRedis = false
			if errors.Is(err, redstream.ErrCircuitOpen) {
				dDownFastFails++
			}
		}
		return allInRedis
	}

	// Traffic spread over the masters: the dead master's keys fail at once (connection
	// refused) and fall back; three open the dead master's breaker, whatever the healthy
	// masters' calls between them, and the healthy masters' keys are decided in Redis.
	const mixed = 10
	healthyErrors := 0
	for i := 0; i < mixed; i++ {
		if err := timed("mixed: fallback decision on the dead master", func() error {
			d, err := l.AllowN(ctx, down, time.Time{}, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("denied: %+v", d)
			}
			return err
		}); err != nil {
			t.Fatalf("mixed round %d: decision on the dead master: %v, want the fallback's admission", i, err)
		}
		for _, k := range ups {
			if err := timed("mixed: decision on a healthy master", func() error { _, err := eng.AllowN(ctx, k, time.Time{}, 1); return err }); err != nil {
				healthyErrors++ // one timeout of a loaded machine is tolerated, below
				t.Logf("mixed round %d: a healthy master's key %s: %v", i, k, err)
			}
		}
	}
	if healthyErrors > 1 {
		t.Errorf("mixed traffic: %d errors on the healthy masters' keys in %d decisions; want them decided in Redis", healthyErrors, 2*mixed)
	}
	mixedErrors := exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", "error"))
	mixedOpen := exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", "breaker_open"))
	t.Logf("mixed traffic, master killed: breaker %v, fallback_total{reason=error} %v, {reason=breaker_open} %v after %d decisions on the dead master, slowest call %v",
		eng.BreakerState(), mixedErrors, mixedOpen, mixed, slowest.Round(10*time.Microsecond))
	if eng.BreakerState() != redstream.BreakerOpen || mixedErrors != 3 || mixedOpen != mixed-3 {
		t.Errorf("mixed traffic: breaker %v, fallback_total{reason=error} %v, {reason=breaker_open} %v; want the dead master's breaker open after 3 failures",
			eng.BreakerState(), mixedErrors, mixedOpen)
	}
	if got := logs.lines(); len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "node="+downAddr) {
		t.Errorf("mixed traffic: logs %q, want one Warn naming the dead master", got)
	}
	var openErr error
	took, stall := meter.Time(func() { _, openErr = eng.AllowN(ctx, down, time.Time{}, 1) })
	if !errors.Is(openErr, redstream.ErrCircuitOpen) || took > 5*time.Millisecond+stall {
		t.Errorf("the dead master's key with its breaker open: %v in %v (stall %v); want ErrCircuitOpen at once", openErr, took, stall)
	}
	if _, err := eng.AllowN(ctx, ups[0], time.Time{}, 1); err != nil {
		t.Errorf("a healthy master's key with the dead master's breaker open: %v, want a decision in Redis", err)
	}

	// Until the replica is promoted.
	var promoted time.Duration
	for {
		round("master killed")
		if a := liveMasterOf(ctx, addrs, downAddr, slotOf(eng.Keys(down)[0])); a != "" {
			promoted = time.Since(killed)
			t.Logf("replica %s promoted %v after the kill", a, promoted.Round(time.Millisecond))
			break
		}
		if time.Since(killed) > 30*time.Second {
			for _, a := range addrs {
				if a != downAddr {
					text, err := clusterNodes(ctx, a)
					t.Logf("%s sees %+v %v", a, text, err)
				}
			}
			t.Fatalf("no replica promoted 30 s after the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("master killed: %d rounds, %d with the engine's breaker not closed, slowest call %v; Failures=-1: %d errors on the healthy masters' keys, breaker %v; dedup: %d errors on a healthy master, %d ErrCircuitOpen on the dead one",
		rounds, fellBack, slowest.Round(10*time.Microsecond), rateUpErrors, rate.BreakerState(), dUpErrors, dDownFastFails)
	var fallbacks float64
	for _, reason := range []string{"error", "timeout", "breaker_open"} {
		if v := exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", reason)); v > 0 {
			fallbacks += v
		}
	}
	if fallbacks == 0 {
		t.Errorf("fallback_total is 0 after %d rounds with the breaker open", fellBack)
	}
	if open := exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", "breaker_open")); open <= mixedOpen {
		t.Errorf("fallback_total{reason=breaker_open} = %v; want the dead master's keys answered by the fallback while its breaker is open", open)
	}
	// One Warn when the dead master's breaker opened; its probes fail (connection
	// refused) and log nothing. Never a line per decision.
	lines := logs.lines()
	for i, line := range lines {
		want := []string{"level=WARN", "level=INFO"}[i%2]
		if !strings.Contains(line, want) {
			t.Errorf("log line %d %q, want %s: one Warn per opening, one Info per closing", i, line, want)
		}
	}
	if len(lines) == 0 || len(lines) > 2*rounds/10+1 {
		t.Errorf("%d log lines in %d rounds: %q; want a Warn, and at most a change per cool-down", len(lines), rounds, lines)
	}
	t.Logf("master killed: %d log lines (state changes) before the promotion", len(lines))
	// The healthy masters' keys, under the error-rate rule alone: decided in Redis. A
	// call or two may meet CLUSTERDOWN while the cluster reconfigures; more is a failure.
	if rateUpErrors > 2 {
		t.Errorf("Failures=-1: %d errors on the healthy masters' keys in %d rounds", rateUpErrors, rounds)
	}
	for _, line := range rateLogs.lines() {
		if !strings.Contains(line, "node="+downAddr) {
			t.Errorf("Failures=-1 logged %q, want only lines of the dead master's breaker", line)
		}
	}
	if dUpErrors > 2 {
		t.Errorf("dedup on a healthy master: %d errors in %d rounds", dUpErrors, rounds)
	}
	if dDownFastFails == 0 {
		t.Errorf("dedup on the dead master never failed fast with ErrCircuitOpen")
	}
	if got := exposition(t, series("redis_streaming_dedup_failures_total", dDownName, "reason", "breaker_open")); got <= 0 {
		t.Errorf("dedup_failures_total{reason=breaker_open} = %v", got)
	}

	// The replica has taken over: a whole round in Redis within the cool-down, plus the
	// client's topology refresh.
	back := time.Now()
	for !round("replica promoted") {
		if time.Since(back) > DefaultCoolDownForTest+5*time.Second {
			t.Fatalf("still not in Redis %v after the promotion: breaker %v, Failures=-1 breaker %v, dedup %v",
				time.Since(back), eng.BreakerState(), rate.BreakerState(), dDown.BreakerState())
		}
		time.Sleep(20 * time.Millisecond)
	}
	recovered := time.Since(back)
	t.Logf("replica promoted: every call in Redis again %v later (%v after the kill)", recovered.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if recovered > DefaultCoolDownForTest+3*time.Second {
		t.Errorf("back in Redis %v after the promotion, want within the 1 s cool-down and a topology refresh", recovered)
	}
	if got := logs.lines(); len(got) < 2 || !strings.Contains(got[len(got)-1], "level=INFO") {
		t.Errorf("logs %q, want the Warn then an Info", got)
	}

	// The killed node comes back (as a replica of the promoted one): nothing changes.
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if !round("node restarted") {
			t.Errorf("round %d after the old master restarted was not answered by Redis", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveMasterOf returns the address of a master other than dead that serves slot, as a
// node other than dead sees it, or "".
func liveMasterOf(ctx context.Context, addrs []string, dead string, slot uint16) string {
	for _, a := range addrs {
		if a == dead {
			continue
		}
		nodes, err := clusterNodes(ctx, a)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if !n.master || n.failed || n.addr == dead {
				continue
			}
			for _, r := range n.slots {
				if int(slot) >= r[0] && int(slot) <= r[1] {
					return n.addr
				}
			}
		}
		return ""
	}
	return ""
}

// TestClusterMasterKilledFullCoverage: with Redis's default cluster-require-full-coverage
// yes, a killed master makes every node answer CLUSTERDOWN to every key from the moment
// the others flag it until its replica is promoted: the healthy masters' keys fail too,
// each at once, and are decided in Redis again once the replica has taken over. A limiter
// without a breaker shows each call's own answer.
func TestClusterMasterKilledFullCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	nodes, addrs := failoverClusterCoverage(t, true)
	const dialTimeout = 300 * time.Millisecond
	const bound = DefaultTimeout + dialTimeout + 200*time.Millisecond
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, Dialer: net.Dialer{Timeout: dialTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	eng := mustLimiter(t, client, redstream.TokenBucket(1000, 1000), Options{Timeout: DefaultTimeout,
		Logger: slog.New(slog.DiscardHandler), KeyPrefix: uniq("cl-cover"), Breaker: redstream.BreakerOptions{Disabled: true}})
	downAddr := masterOf(t, addrs[0], slotOf(eng.Keys("k0")[0]))
	up := ""
	for i := 1; up == ""; i++ {
		if k := fmt.Sprint("k", i); masterOf(t, addrs[0], slotOf(eng.Keys(k)[0])) != downAddr {
			up = k
		}
	}
	if _, err := eng.AllowN(ctx, up, time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Addr == downAddr {
			n.Stop()
			t.Cleanup(func() { _ = n.Restart() })
		}
	}
	killed := time.Now()
	var firstDown, lastDown time.Duration
	var downs, others int
	var slowest time.Duration
	meter := redistest.NewStallMeter(t)
	for time.Since(killed) < 30*time.Second {
		var err error
		took, stall := meter.Time(func() { _, err = eng.AllowN(ctx, up, time.Time{}, 1) })
		slowest = max(slowest, took)
		if took > bound+stall {
			t.Errorf("a healthy master's key took %v, want at most %v (the process stalled %v meanwhile)", took, bound, stall)
		}
		switch {
		case err == nil && downs > 0 && liveMasterOf(ctx, addrs, downAddr, slotOf(eng.Keys("k0")[0])) != "":
			t.Logf("full coverage: %d CLUSTERDOWN answers on a healthy master's key from %v to %v after the kill (%d other errors); slowest call %v",
				downs, firstDown.Round(time.Millisecond), lastDown.Round(time.Millisecond), others, slowest.Round(10*time.Microsecond))
			return
		case err == nil:
		case strings.Contains(err.Error(), "CLUSTERDOWN"):
			if downs == 0 {
				firstDown = time.Since(killed)
			}
			downs++
			lastDown = time.Since(killed)
		default:
			others++
			t.Logf("a healthy master's key: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("30 s after the kill: %d CLUSTERDOWN answers, %d other errors; want CLUSTERDOWN, then decisions in Redis after the promotion", downs, others)
}
