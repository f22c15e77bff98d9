package crossruntime

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/redisbackend"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// nodeRequired reports REDSTREAM_REQUIRE_NODE=1 (CI): a missing Node.js or an unbuilt
// package then fails the test instead of skipping it.
func nodeRequired() bool { return os.Getenv("REDSTREAM_REQUIRE_NODE") == "1" }

// worker returns the node binary and the package directory with its built worker, or skips
// (fails, when required) loudly.
func worker(t *testing.T) (node, dir string) {
	t.Helper()
	unavailable := func(why string) {
		msg := fmt.Sprintf("\n*** crossruntime: %s ***\n*** install Node.js 20+ and run `npm ci && npm run build` in js/; set REDSTREAM_REQUIRE_NODE=1 to fail instead ***", why)
		if nodeRequired() {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node is not on PATH")
	}
	dir, err = filepath.Abs("../../js")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"dist/index.js", "core.wasm", "node_modules/ioredis/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			unavailable("js/" + f + " is missing")
		}
	}
	return node, dir
}

// task is one shared limit or deduplicator; the JSON fields are the worker's.
type task struct {
	ID       string         `json:"id"`
	Prefix   string         `json:"prefix"`
	Spec     map[string]any `json:"spec,omitempty"`
	Multi    []any          `json:"multi,omitempty"` // the specs of a multi-limit limiter
	Key      string         `json:"key,omitempty"`
	KeyHex   string         `json:"keyHex,omitempty"` // the key's bytes, for a key that is not UTF-8
	Now      int64          `json:"now,omitempty"`    // µs; 0 for the server's TIME
	Attempts int            `json:"attempts,omitempty"`
	Strategy string         `json:"strategy,omitempty"`
	Name     string         `json:"name,omitempty"`
	WindowMs int64          `json:"windowMs,omitempty"`
	Bloom    map[string]any `json:"bloom,omitempty"`
	Elements []string       `json:"elements,omitempty"`
	Seed     int            `json:"seed,omitempty"`
	// Reserve makes each attempt a reservation of 3 settled at attempt%4 (0 cancels).
	Reserve bool `json:"reserve,omitempty"`

	spec  redstream.Spec
	multi []redstream.Spec
	limit int64
	dedup redstream.DedupSpec
}

type result struct {
	Admitted int      `json:"admitted"`
	Denied   int      `json:"denied"`
	First    []string `json:"first"`
	Used     int      `json:"used"` // the units the settled reservations kept
}

// tasks returns one task per algorithm and per deduplicator, under prefix. The buckets and
// the sliding log decide at the server's TIME (a bucket refills one token per 1000 s, the
// log's window is an hour, so nothing is refilled while the test runs); the fixed window
// and the sliding counter decide at one explicit time mid-window, so that no window boundary
// can pass during the run.
func tasks(prefix string) []task {
	const limit, attempts = 150, 250
	mid := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC).UnixMicro()
	var ts []task
	for _, a := range redstream.Algorithms() {
		t := task{ID: string(a), Prefix: prefix + ":" + string(a), Key: "shared {key}", Attempts: attempts, limit: limit}
		switch a {
		case redstream.AlgorithmTokenBucket, redstream.AlgorithmLeakyBucket:
			t.spec = redstream.Spec{Algorithm: a, Capacity: limit, Rate: 0.001}
			t.Spec = map[string]any{"algorithm": a, "capacity": limit, "rate": 0.001}
		default:
			t.spec = redstream.Spec{Algorithm: a, Window: time.Hour, Limit: limit}
			t.Spec = map[string]any{"algorithm": a, "windowMs": time.Hour.Milliseconds(), "limit": limit}
			if a != redstream.AlgorithmSlidingWindow {
				t.Now = mid
			}
		}
		ts = append(ts, t)
	}
	// A key that is not UTF-8 text: Node.js names it by its bytes.
	bin := "\xff\x00{bytes}"
	ts = append(ts, task{ID: "bytes-key", Prefix: prefix + ":bytes", Key: bin, KeyHex: hex.EncodeToString([]byte(bin)), Attempts: attempts, limit: limit,
		spec: redstream.TokenBucket(limit, 0.001), Spec: map[string]any{"algorithm": redstream.AlgorithmTokenBucket, "capacity": limit, "rate": 0.001}})
	// Two limits on one key, all-or-nothing: the tighter one (100 per window) decides.
	ts = append(ts, task{ID: "multi", Prefix: prefix + ":multi", Key: "shared {key}", Attempts: attempts, limit: 100, Now: mid,
		multi: []redstream.Spec{redstream.TokenBucket(limit, 0.001), redstream.FixedWindow(time.Hour, 100)},
		Multi: []any{
			map[string]any{"algorithm": redstream.AlgorithmTokenBucket, "capacity": limit, "rate": 0.001},
			map[string]any{"algorithm": redstream.AlgorithmFixedWindow, "windowMs": time.Hour.Milliseconds(), "limit": 100},
		}})
	// Reservations: every algorithm and the multi-limit again, each attempt reserving 3 and
	// settling 0 to 3, so that refunds, cancels and exact settlements interleave across the
	// runtimes on one key.
	for _, base := range slices.Clone(ts) {
		if base.ID == string(redstream.AlgorithmConcurrency) {
			continue // a concurrency limit releases leases, it does not settle (coreops.Settles)
		}
		r := base
		r.ID, r.Prefix, r.Reserve = "reserve-"+base.ID, base.Prefix+":rsv", true
		ts = append(ts, r)
	}
	elements := make([]string, 300)
	for i := range elements {
		elements[i] = "order-" + strconv.Itoa(i)
		if i%7 == 0 {
			elements[i] += " {ü}" // not plain: hashed tags, UTF-8
		}
	}
	for i, s := range []redstream.DedupSpec{
		{Strategy: redstream.DedupSet},
		{Strategy: redstream.DedupWindowed, Window: time.Hour},
		{Strategy: redstream.DedupBloom, Insertions: 100000, FPRate: 1e-6, Shards: 4},
	} {
		t := task{ID: string(s.Strategy), Prefix: prefix + ":dd", Strategy: string(s.Strategy), Name: "seen-" + string(s.Strategy),
			Elements: elements, Seed: 17 + i, dedup: s}
		if s.Strategy == redstream.DedupWindowed {
			t.WindowMs = s.Window.Milliseconds()
		}
		if s.Strategy == redstream.DedupBloom {
			t.Bloom = map[string]any{"insertions": s.Insertions, "fpRate": s.FPRate, "shards": s.Shards}
		}
		ts = append(ts, t)
	}
	return ts
}

// callTimeout bounds each Go call as the worker's timeoutMs bounds each Node.js call: on a
// loaded machine the default 100 ms would drop calls and the totals with them.
const callTimeout = 10 * time.Second

// runGo decides every task with redisbackend, 8 goroutines per task.
func runGo(ctx context.Context, t *testing.T, c rueidis.Client, ts []task, limiters map[string]*redisbackend.Limiter) map[string]*result {
	out := map[string]*result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var totals []func() // run after every goroutine is done
	for _, tk := range ts {
		r := &result{}
		out[tk.ID] = r
		if tk.Strategy == "" {
			var l *redisbackend.Limiter
			var err error
			// The Node.js side's timeout: the totals are exact only with calls that answer,
			// and a settlement that times out is closed, not retried (it may have run).
			o := redisbackend.Options{KeyPrefix: tk.Prefix, Timeout: callTimeout}
			if tk.multi != nil {
				l, err = redisbackend.NewMultiLimiter(c, tk.multi, o)
			} else {
				l, err = redisbackend.NewLimiter(c, tk.spec, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			var next, admitted, denied, used atomic.Int64
			totals = append(totals, func() { r.Admitted, r.Denied, r.Used = int(admitted.Load()), int(denied.Load()), int(used.Load()) })
			limiters[tk.ID] = l
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(tk.Attempts) {
							return
						}
						at := time.Time{}
						if tk.Now != 0 {
							at = time.UnixMicro(tk.Now)
						}
						if tk.Reserve {
							res, err := l.ReserveN(ctx, tk.Key, at, 3)
							if err != nil {
								t.Errorf("%s: %v", tk.ID, err)
								return
							}
							if !res.Allowed {
								denied.Add(1)
								continue
							}
							if err := res.Settle(ctx, i%4); err != nil {
								t.Errorf("%s: Settle: %v", tk.ID, err)
								return
							}
							admitted.Add(1)
							used.Add(i % 4)
							continue
						}
						d, err := l.AllowN(ctx, tk.Key, at, 1)
						if err != nil {
							t.Errorf("%s: %v", tk.ID, err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						} else {
							denied.Add(1)
						}
					}
				}()
			}
			continue
		}
		d, err := redisbackend.NewDeduplicator(c, tk.Name, tk.dedup, redisbackend.DedupOptions{KeyPrefix: tk.Prefix, Timeout: callTimeout})
		if err != nil {
			t.Fatal(err)
		}
		order := slices.Clone(tk.Elements)
		rand.New(rand.NewPCG(uint64(tk.Seed), 99)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var next atomic.Int64
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(order) {
						return
					}
					dup, err := d.CheckAndMark(ctx, order[i])
					if err != nil {
						t.Errorf("%s: %v", tk.ID, err)
						return
					}
					if !dup {
						mu.Lock()
						r.First = append(r.First, order[i])
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, f := range totals {
		f()
	}
	return out
}

// crossRuntime runs the tasks from Go and from Node.js at once against addrs and checks
// the totals.
func crossRuntime(t *testing.T, c rueidis.Client, addrs []string, cluster bool) {
	node, dir := worker(t)
	prefix := fmt.Sprintf("xr%d", time.Now().UnixNano())
	ts := tasks(prefix)
	cfg, err := json.Marshal(map[string]any{"addrs": addrs, "cluster": cluster, "tasks": ts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "test/crossruntime-worker.mjs", string(cfg))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 16<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Wait()
		t.Fatalf("node worker did not get ready: %q\n%s", lines.Text(), stderr.String())
	}
	// Both start now: Node on its "go" line, Go at once.
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	limiters := map[string]*redisbackend.Limiter{}
	goRes := runGo(ctx, t, c, ts, limiters)
	var nodeRes map[string]*result
	if !lines.Scan() {
		_ = cmd.Wait()
		t.Fatalf("node worker printed no result\n%s", stderr.String())
	}
	if err := json.Unmarshal(lines.Bytes(), &nodeRes); err != nil {
		t.Fatalf("node worker result %q: %v\n%s", lines.Text(), err, stderr.String())
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node worker: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("node worker wrote to stderr:\n%s", stderr.String())
	}
	goShare, nodeShare := 0, 0
	for _, tk := range ts {
		g, n := goRes[tk.ID], nodeRes[tk.ID]
		if n == nil {
			t.Fatalf("%s: no Node.js result", tk.ID)
		}
		if tk.Reserve {
			// What the settled reservations kept plus what is still free is the limit,
			// exactly: draining the key counts the free units.
			free := 0
			at := time.Time{}
			if tk.Now != 0 {
				at = time.UnixMicro(tk.Now)
			}
			for ; free <= int(tk.limit); free++ {
				d, err := limiters[tk.ID].AllowN(ctx, tk.Key, at, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					break
				}
			}
			t.Logf("%-16s kept %3d (Go %3d + Node.js %3d) + free %3d, limit %d; reservations admitted Go %d, Node.js %d", tk.ID, g.Used+n.Used, g.Used, n.Used, free, tk.limit, g.Admitted, n.Admitted)
			if g.Used+n.Used+free != int(tk.limit) || g.Admitted+g.Denied != tk.Attempts || n.Admitted+n.Denied != tk.Attempts || g.Denied+n.Denied == 0 {
				t.Errorf("%s: kept %d + free %d, want the limit %d exactly (Go %d/%d admitted, Node.js %d/%d)", tk.ID, g.Used+n.Used, free, tk.limit,
					g.Admitted, g.Admitted+g.Denied, n.Admitted, n.Admitted+n.Denied)
			}
			goShare += g.Admitted
			nodeShare += n.Admitted
			continue
		}
		if tk.Strategy == "" {
			total := g.Admitted + n.Admitted
			t.Logf("%-16s admitted %3d (Go %3d + Node.js %3d) of %d attempts, limit %d", tk.ID, total, g.Admitted, n.Admitted, 2*tk.Attempts, tk.limit)
			if total != int(tk.limit) || g.Admitted+g.Denied != tk.Attempts || n.Admitted+n.Denied != tk.Attempts {
				t.Errorf("%s: admitted %d (Go %d/%d, Node.js %d/%d), want exactly the limit %d", tk.ID, total, g.Admitted, g.Admitted+g.Denied, n.Admitted, n.Admitted+n.Denied, tk.limit)
			}
			goShare += g.Admitted
			nodeShare += n.Admitted
			continue
		}
		seen := map[string]int{}
		for _, e := range g.First {
			seen[e]++
		}
		for _, e := range n.First {
			seen[e]++
		}
		t.Logf("%-16s first sightings %3d (Go %3d + Node.js %3d) of %d elements", tk.ID, len(g.First)+len(n.First), len(g.First), len(n.First), len(tk.Elements))
		for _, e := range tk.Elements {
			if seen[e] != 1 {
				t.Errorf("%s: element %q seen first %d times, want exactly once", tk.ID, e, seen[e])
			}
		}
		goShare += len(g.First)
		nodeShare += len(n.First)
	}
	if goShare == 0 || nodeShare == 0 {
		t.Errorf("Go won %d and Node.js %d of the admissions: the runtimes did not run together", goShare, nodeShare)
	}
}

// TestCrossRuntimeSingle: Go and Node.js share every limit and deduplicator on one
// redis-server.
func TestCrossRuntimeSingle(t *testing.T) {
	addr := redistest.Addr(t)
	crossRuntime(t, redistest.NewClient(t, addr), []string{addr}, false)
}

// TestCrossRuntimeCluster: the same on a real 3-master Redis Cluster.
func TestCrossRuntimeCluster(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	crossRuntime(t, redistest.NewClient(t, addrs...), addrs, true)
}
