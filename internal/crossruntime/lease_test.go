package crossruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/redisbackend"
)

// nodeLease is a lease as the worker prints it (Node.js's Lease: Go's fields, the expiry in
// µs since the epoch) and as it reads one back.
type nodeLease struct {
	Allowed    bool   `json:"allowed"`
	RetryAfter int64  `json:"retryAfter"`
	Key        string `json:"key"`
	N          int64  `json:"n"`
	Token      uint64 `json:"token"`
	Expiry     int64  `json:"expiry"`
	Lost       bool   `json:"lost,omitempty"`
}

func toNode(l redstream.Lease) nodeLease {
	return nodeLease{Allowed: l.Allowed, Key: l.Key, N: l.N, Token: l.Token, Expiry: l.Expiry.UnixMicro()}
}

func fromNode(l nodeLease) redstream.Lease {
	return redstream.Lease{Decision: redstream.Decision{Allowed: l.Allowed}, Key: l.Key, N: l.N, Token: l.Token, Expiry: time.UnixMicro(l.Expiry)}
}

// runOps runs the worker on cfg (its limiters and ops, run in order) against addrs (a
// cluster's when cluster) and decodes each op's result into outs.
func runOps(t *testing.T, addrs []string, cluster bool, cfg map[string]any, outs ...any) {
	t.Helper()
	node, dir := worker(t)
	cfg["addrs"], cfg["cluster"] = addrs, cluster
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "test/crossruntime-worker.mjs", string(b))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node worker: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("node worker wrote to stderr:\n%s", stderr.String())
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil || len(raw) != len(outs) {
		t.Fatalf("node worker printed %q (%v), want %d results", out, err, len(outs))
	}
	for i, o := range outs {
		if err := json.Unmarshal(raw[i], o); err != nil {
			t.Fatalf("op %d: %q: %v", i, raw[i], err)
		}
	}
}

func allowedOf(ls []nodeLease) (n int) {
	for _, l := range ls {
		if l.Allowed {
			n++
		}
	}
	return n
}

// TestCrossRuntimeLease: Go and Node.js hand concurrency leases to each other on one key
// (a concurrency limit of 5 behind a fixed window, so the lease's token is not the first
// limit's): Node.js releases Go's leases and acquires the units they freed, Go releases
// Node.js's, exactly, and neither can release or extend a lease twice; on a redis-server
// and a 3-master cluster.
func TestCrossRuntimeLease(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		addr := redistest.Addr(t)
		crossLease(t, redistest.NewClient(t, addr), []string{addr}, false)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := redistest.ClusterAddrs(t)
		crossLease(t, redistest.NewClient(t, addrs...), addrs, true)
	})
}

func crossLease(t *testing.T, c rueidis.Client, addrs []string, cluster bool) {
	ctx := context.Background()
	prefix := fmt.Sprintf("xrl%d", time.Now().UnixNano())
	now := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)
	specs := []redstream.Spec{redstream.FixedWindow(time.Hour, 100), redstream.Concurrency(5, time.Minute)}
	gl, err := redisbackend.NewConcurrencyLimiter(c, specs, redisbackend.Options{KeyPrefix: prefix, Timeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	const key = "job {7}"
	var goLeases []redstream.Lease
	for i := range 6 {
		l, err := gl.Acquire(ctx, key, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		if l.Allowed != (i < 5) {
			t.Fatalf("Go acquisition %d: allowed %v", i, l.Allowed)
		}
		if l.Allowed {
			goLeases = append(goLeases, l)
		}
	}
	// Node.js: release three of Go's leases (and one of them twice), extend a fourth,
	// acquire as many as it can.
	var released []bool
	var extended []nodeLease
	var nodeLeases []nodeLease
	at := now.Add(time.Second).UnixMicro()
	runOps(t, addrs, cluster, map[string]any{
		"limiters": map[string]any{"c": map[string]any{"prefix": prefix, "concurrency": []any{
			map[string]any{"algorithm": "fixed", "windowMs": 3_600_000, "limit": 100},
			map[string]any{"algorithm": "concurrency", "windowMs": 60_000, "limit": 5},
		}}},
		"ops": []any{
			map[string]any{"op": "release", "limiter": "c", "now": at, "leases": []nodeLease{toNode(goLeases[0]), toNode(goLeases[1]), toNode(goLeases[2]), toNode(goLeases[0])}},
			map[string]any{"op": "extend", "limiter": "c", "now": at, "leases": []nodeLease{toNode(goLeases[3]), toNode(goLeases[0])}},
			map[string]any{"op": "acquire", "limiter": "c", "now": at, "key": key, "times": 5},
		},
	}, &released, &extended, &nodeLeases)
	if want := []bool{true, true, true, false}; fmt.Sprint(released) != fmt.Sprint(want) {
		t.Errorf("Node.js released Go's leases: %v, want %v", released, want)
	}
	if len(extended) != 2 || extended[0].Lost || extended[0].Expiry != now.Add(time.Second+time.Minute).UnixMicro() || !extended[1].Lost {
		t.Errorf("Node.js extended a held Go lease and a released one: %+v, want the first renewed to %v and the second lost", extended, now.Add(time.Second+time.Minute))
	}
	if got := allowedOf(nodeLeases); got != 3 {
		t.Errorf("Node.js acquired %d leases after freeing 3 of Go's 5, want 3", got)
	}
	t.Logf("Node.js released %v of Go's leases, acquired %d of 5", released, allowedOf(nodeLeases))

	// Go: release Node.js's leases (one twice), extend a released one, then acquire the
	// units they freed, exactly.
	at2 := now.Add(2 * time.Second)
	freed := 0
	for i, nl := range nodeLeases[:3] {
		ok, err := gl.Release(ctx, fromNode(nl), at2)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("Go could not release Node.js's lease %d", i)
			continue
		}
		freed++
	}
	if ok, err := gl.Release(ctx, fromNode(nodeLeases[0]), at2); err != nil || ok {
		t.Errorf("second release of a Node.js lease: %v, %v; want false", ok, err)
	}
	if _, err := gl.Extend(ctx, fromNode(nodeLeases[1]), at2); !errors.Is(err, redstream.ErrLeaseLost) {
		t.Errorf("extend of a released Node.js lease: %v, want ErrLeaseLost", err)
	}
	if _, err := gl.Extend(ctx, fromNode(extended[0]), at2); err != nil {
		t.Errorf("extend by Go of the lease Node.js extended: %v", err)
	}
	got := 0
	for range 5 {
		l, err := gl.Acquire(ctx, key, at2, 1)
		if err != nil {
			t.Fatal(err)
		}
		if l.Allowed {
			got++
		}
	}
	if freed != 3 || got != 3 {
		t.Errorf("Go released %d of Node.js's leases and acquired %d, want 3 and 3", freed, got)
	}
	// The fixed window behind the leases counted every acquisition of both runtimes: 5 + 3 + 3.
	d, err := redisbackend.NewMultiLimiter(c, specs[:1], redisbackend.Options{KeyPrefix: prefix, Timeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := d.AllowN(ctx, key, at2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if fw := 100 - dec.Remaining - 1; fw != 11 {
		t.Errorf("the fixed window counted %d acquisitions, want 11", fw)
	}
}

// TestCrossRuntimeCarry: Node.js carries keys Go wrote under the previous specs, for each
// strategy and a multi-limit, and Go then decides on the keys Node.js seeded; on a
// redis-server and a 3-master cluster (old and new keys share the user key's slot).
func TestCrossRuntimeCarry(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		addr := redistest.Addr(t)
		crossCarry(t, redistest.NewClient(t, addr), []string{addr}, false)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := redistest.ClusterAddrs(t)
		crossCarry(t, redistest.NewClient(t, addrs...), addrs, true)
	})
}

func crossCarry(t *testing.T, c rueidis.Client, addrs []string, cluster bool) {
	ctx := context.Background()
	prefix := fmt.Sprintf("xrc%d", time.Now().UnixNano())
	now := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)
	const key = "user {1}"
	spec := func(s redstream.Spec) map[string]any {
		if s.Algorithm == redstream.AlgorithmTokenBucket {
			return map[string]any{"algorithm": s.Algorithm, "capacity": s.Capacity, "rate": s.Rate}
		}
		return map[string]any{"algorithm": s.Algorithm, "windowMs": s.Window.Milliseconds(), "limit": s.Limit}
	}
	type change struct {
		id        string
		from, to  redstream.Spec
		carry     core.Carry
		used      int // admitted by Go under from
		wantNode  int // admitted by Node.js under to, of 40
		wantAfter int // admitted by Go under to after Node.js, of 40
	}
	changes := []change{
		// 6 of 10 becomes 12 of 20: 8 left.
		{"fixed-proportional", redstream.FixedWindow(time.Hour, 10), redstream.FixedWindow(time.Hour, 20), core.CarryProportional, 6, 8, 0},
		// 6 of 10 kept as it is under 20: 14 left.
		{"fixed-as-is", redstream.FixedWindow(time.Hour, 10), redstream.FixedWindow(time.Hour, 20), core.CarryAsIs, 6, 14, 0},
		{"counter-as-is", redstream.SlidingCounter(time.Hour, 20), redstream.SlidingCounter(time.Hour, 10), core.CarryAsIs, 6, 4, 0},
		// 4 tokens owed of 10 become 8 of 20: 12 left.
		{"bucket-proportional", redstream.TokenBucket(10, 0.001), redstream.TokenBucket(20, 0.002), core.CarryProportional, 4, 12, 0},
		{"reset", redstream.FixedWindow(time.Hour, 10), redstream.FixedWindow(time.Hour, 20), core.CarryReset, 6, 20, 0},
	}
	limiters := map[string]any{}
	var ops []any
	outs := make([]any, len(changes))
	got := make([]int, len(changes))
	for i, ch := range changes {
		p := prefix + ":" + ch.id
		old, err := redisbackend.NewLimiter(c, ch.from, redisbackend.Options{KeyPrefix: p, Timeout: callTimeout})
		if err != nil {
			t.Fatal(err)
		}
		for range ch.used {
			if d, err := old.AllowN(ctx, key, now, 1); err != nil || !d.Allowed {
				t.Fatalf("%s: Go under the previous spec: %+v, %v", ch.id, d, err)
			}
		}
		limiters[ch.id] = map[string]any{"prefix": p, "spec": spec(ch.to), "previous": []any{spec(ch.from)}, "carry": ch.carry.String()}
		ops = append(ops, map[string]any{"op": "allow", "limiter": ch.id, "key": key, "now": now.UnixMicro(), "times": 40})
		outs[i] = &got[i]
	}
	// A multi-limit: the bucket changes (4 used of 4, proportional to 8: all of it used),
	// the fixed window does not (its key, 4 used, goes on).
	mFrom := []redstream.Spec{redstream.TokenBucket(4, 0.001), redstream.FixedWindow(time.Hour, 100)}
	mTo := []redstream.Spec{redstream.TokenBucket(8, 0.001), mFrom[1]}
	mOpts := redisbackend.Options{KeyPrefix: prefix + ":multi", Timeout: callTimeout}
	mOld, err := redisbackend.NewMultiLimiter(c, mFrom, mOpts)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if d, err := mOld.AllowN(ctx, key, now, 1); err != nil || !d.Allowed {
			t.Fatalf("multi: Go under the previous specs: %+v, %v", d, err)
		}
	}
	limiters["multi"] = map[string]any{"prefix": mOpts.KeyPrefix, "multi": []any{spec(mTo[0]), spec(mTo[1])}, "previous": []any{spec(mFrom[0]), nil}, "carry": "proportional"}
	ops = append(ops, map[string]any{"op": "allow", "limiter": "multi", "key": key, "now": now.UnixMicro(), "times": 10})
	var multiGot int
	runOps(t, addrs, cluster, map[string]any{"limiters": limiters, "ops": ops}, append(outs, &multiGot)...)
	if multiGot != 0 {
		t.Errorf("multi: Node.js admitted %d after a proportional 4 -> 8 of a used-up bucket, want 0", multiGot)
	}
	// The unchanged fixed window's key is Go's: 4 counted, 96 left, for Go too.
	mNew, err := redisbackend.NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(200, 1000), mFrom[1]}, mOpts)
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for range 120 {
		if d, err := mNew.AllowN(ctx, key, now, 1); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			left++
		}
	}
	if left != 96 {
		t.Errorf("multi: the unchanged fixed window admitted %d after 4, want 96", left)
	}
	for i, ch := range changes {
		l, err := redisbackend.NewLimiter(c, ch.to, redisbackend.Options{KeyPrefix: prefix + ":" + ch.id, Timeout: callTimeout,
			Previous: []redstream.Spec{ch.from}, Carry: ch.carry})
		if err != nil {
			t.Fatal(err)
		}
		after := 0
		for range 40 {
			d, err := l.AllowN(ctx, key, now, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				after++
			}
		}
		t.Logf("%-20s Go used %d under %v; Node.js admitted %d under %v (%v), Go %d after", ch.id, ch.used, ch.from, got[i], ch.to, ch.carry, after)
		if got[i] != ch.wantNode || after != ch.wantAfter {
			t.Errorf("%s: Node.js admitted %d, Go %d after it; want %d and %d", ch.id, got[i], after, ch.wantNode, ch.wantAfter)
		}
	}
}
