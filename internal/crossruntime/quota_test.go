package crossruntime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"regexp"
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

// quotaTask is one limit with leased quota shared by both runtimes; the JSON fields are the
// worker's (runQuota).
type quotaTask struct {
	ID       string         `json:"id"`
	Prefix   string         `json:"prefix"`
	Spec     map[string]any `json:"spec"`
	WindowUs int64          `json:"windowUs"`

	spec redstream.Spec
}

// quotaNodeResult is one task's line of the worker for one window.
type quotaNodeResult struct {
	Admitted int `json:"admitted"`
	Stats    struct {
		Calls        int `json:"calls"`
		LocalAllowed int `json:"localAllowed"`
	} `json:"stats"`
}

// TestCrossRuntimeQuota: a Go limiter and a Node.js limiter with leased quota share one hot
// key, on a redis-server and a 3-master cluster, window after window in step (each makes
// its requests at explicit times inside the window, four at a time, more than the limit
// between them), for the fixed window and the sliding counter. Counted on both sides, the
// admissions of each window never exceed its limit and fall short of it by no more than the
// leases left unused at its end; Node.js admits most of its requests from leases.
func TestCrossRuntimeQuota(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		addr := redistest.Addr(t)
		crossQuota(t, redistest.NewClient(t, addr), []string{addr}, false)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := redistest.ClusterAddrs(t)
		crossQuota(t, redistest.NewClient(t, addrs...), addrs, true)
	})
}

func crossQuota(t *testing.T, c rueidis.Client, addrs []string, cluster bool) {
	const (
		limit    = 500
		attempts = 600 // per runtime and window
		width    = 4
		windows  = 4
		stepUs   = 1500 // between a runtime's requests: 600 of them span 0.9 s of the 1 s window
		key      = "hot {key}"
	)
	opts := redisbackend.QuotaOptions{Enabled: true, Duration: 50 * time.Millisecond, MaxShare: 0.25}
	node, dir := worker(t)
	prefix := fmt.Sprintf("xq%d", time.Now().UnixNano())
	var ts []quotaTask
	for _, s := range []redstream.Spec{redstream.FixedWindow(time.Second, limit), redstream.SlidingCounter(time.Second, limit)} {
		ts = append(ts, quotaTask{ID: string(s.Algorithm), Prefix: prefix + ":" + string(s.Algorithm), WindowUs: s.Window.Microseconds(), spec: s,
			Spec: map[string]any{"algorithm": s.Algorithm, "windowMs": s.Window.Milliseconds(), "limit": s.Limit}})
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	cfg, err := json.Marshal(map[string]any{"addrs": addrs, "cluster": cluster, "quota": map[string]any{
		"tasks": ts, "key": key, "t0": t0, "attempts": attempts, "width": width, "stepUs": stepUs,
		"options": map[string]any{"enabled": true, "durationMs": opts.Duration.Milliseconds(), "maxShare": opts.MaxShare},
	}})
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
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("node worker did not get ready: %q\n%s", lines.Text(), stderr.String())
	}
	ls := map[string]*redisbackend.Limiter{}
	for _, tk := range ts {
		l, err := redisbackend.NewLimiter(c, tk.spec, redisbackend.Options{KeyPrefix: tk.Prefix, Timeout: callTimeout, Quota: opts})
		if err != nil {
			t.Fatal(err)
		}
		ls[tk.ID] = l
	}
	goTotal, nodeTotal := map[string]int{}, map[string]int{}
	var last map[string]quotaNodeResult
	for w := range windows {
		// Both start window w now: Node.js on its line, Go at once.
		if _, err := stdin.Write([]byte(strconv.Itoa(w) + "\n")); err != nil {
			t.Fatal(err)
		}
		goAdmitted := map[string]*atomic.Int64{}
		var wg sync.WaitGroup
		for _, tk := range ts {
			var next atomic.Int64
			admitted := &atomic.Int64{}
			goAdmitted[tk.ID] = admitted
			for range width {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= attempts {
							return
						}
						at := time.UnixMicro(t0 + int64(w)*tk.WindowUs + i*stepUs) // Node.js's are 1 µs later
						d, err := ls[tk.ID].AllowN(ctx, key, at, 1)
						if err != nil {
							t.Errorf("%s: %v", tk.ID, err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		if !lines.Scan() {
			t.Fatalf("node worker printed no result for window %d\n%s", w, stderr.String())
		}
		var nodeRes map[string]quotaNodeResult
		if err := json.Unmarshal(lines.Bytes(), &nodeRes); err != nil {
			t.Fatalf("node worker result %q: %v\n%s", lines.Text(), err, stderr.String())
		}
		last = nodeRes
		for _, tk := range ts {
			g, n := int(goAdmitted[tk.ID].Load()), nodeRes[tk.ID].Admitted
			goTotal[tk.ID] += g
			nodeTotal[tk.ID] += n
			t.Logf("%-16s window %d: admitted %3d (Go %3d + Node.js %3d) of %d attempts, limit %d", tk.ID, w, g+n, g, n, 2*attempts, limit)
			if g+n > limit {
				t.Errorf("%s window %d: admitted %d (Go %d + Node.js %d), above the limit %d", tk.ID, w, g+n, g, n, limit)
			}
			// Units stay spent unused only in the lease each runtime holds at the window's
			// end (at most a share of the limit each); the sliding counter admits less by the
			// previous window's weight, a tenth of it at the window's last request.
			low := limit - 2*int(float64(limit)*opts.MaxShare)
			if tk.spec.Algorithm == redstream.AlgorithmSlidingCounter && w > 0 {
				low -= limit / 5
			}
			if g+n < low {
				t.Errorf("%s window %d: admitted %d (Go %d + Node.js %d), want at least %d of the limit %d", tk.ID, w, g+n, g, n, low, limit)
			}
		}
	}
	_ = stdin.Close()
	killed = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node worker: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("node worker wrote to stderr:\n%s", stderr.String())
	}
	goAll, nodeAll, nodeLocal := 0, 0, 0
	for _, tk := range ts {
		st := last[tk.ID].Stats
		t.Logf("%-16s Go admitted %d, Node.js %d over %d windows; Node.js made %d quota calls, admitted %d in process", tk.ID, goTotal[tk.ID], nodeTotal[tk.ID], windows, st.Calls, st.LocalAllowed)
		goAll += goTotal[tk.ID]
		nodeAll += nodeTotal[tk.ID]
		nodeLocal += st.LocalAllowed
	}
	if goAll == 0 || nodeAll == 0 {
		t.Errorf("Go admitted %d and Node.js %d: the runtimes did not share the keys", goAll, nodeAll)
	}
	// Every request once a window is spent asks Redis (and is denied), so leases show in the
	// admissions: most of Node.js's are made in process.
	if 2*nodeLocal < nodeAll {
		t.Errorf("Node.js admitted %d, %d of them in process: no leases", nodeAll, nodeLocal)
	}
}

// monitor records the commands a redis-server at addr runs (MONITOR) until stop, as their
// arguments.
func monitor(t *testing.T, addr string) (stop func() [][]string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := r.ReadString('\n'); err != nil || l != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", l, err)
	}
	var mu sync.Mutex
	var cmds [][]string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			// +<time> [<db> <client>] "ARG" "ARG" ...
			_, rest, ok := strings.Cut(strings.TrimRight(l, "\r\n"), "] ")
			if !ok {
				continue
			}
			args := monitorArgs(rest)
			if m := evalTail.FindStringSubmatch(rest); m != nil {
				// An EVAL of quota.lua: its source is not parsed (servers escape it each
				// their own way); its key and ARGV, plain, end the line.
				args = append([]string{"eval", "", "1"}, monitorArgs(m[1])...)
			}
			mu.Lock()
			cmds = append(cmds, args)
			mu.Unlock()
		}
	}()
	return func() [][]string {
		_ = conn.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return cmds
	}
}

// evalTail matches a MONITOR line of an EVAL with one key and quota.lua's 12 arguments,
// capturing the key and the arguments.
var evalTail = regexp.MustCompile(`^"eval" .* "1"((?: "[^"\\]*"){13})$`)

// monitorArgs parses the arguments of a MONITOR line: double-quoted, with the escapes Redis
// and Valkey write (\\, \", \n, \r, \t, \a, \b and \xHH; Go's strconv.Unquote refuses
// some of what a script's source holds, such as a \' or a lone backslash sequence).
func monitorArgs(rest string) []string {
	var args []string
	for i := 0; i < len(rest); {
		if rest[i] != '"' {
			i++
			continue
		}
		var b strings.Builder
		j := i + 1
		for j < len(rest) && rest[j] != '"' {
			c := rest[j]
			if c != '\\' || j+1 >= len(rest) {
				b.WriteByte(c)
				j++
				continue
			}
			switch e := rest[j+1]; e {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if j+3 < len(rest) {
					if v, err := strconv.ParseUint(rest[j+2:j+4], 16, 8); err == nil {
						b.WriteByte(byte(v))
						j += 4
						continue
					}
				}
				b.WriteByte(e)
			default:
				b.WriteByte(e)
			}
			j += 2
		}
		args = append(args, b.String())
		i = j + 1
	}
	return args
}

// leaseCalls returns the ARGV of the script calls on keys starting with prefix in cmds,
// each once (an EVALSHA refused with NOSCRIPT is followed by the EVAL of the same call).
func leaseCalls(cmds [][]string, prefix string) [][]string {
	var out [][]string
	for _, c := range cmds {
		if len(c) < 4 || !strings.EqualFold(c[0], "evalsha") && !strings.EqualFold(c[0], "eval") || !strings.HasPrefix(c[3], prefix) {
			continue
		}
		argv := c[4:]
		if len(out) > 0 && slices.Equal(out[len(out)-1], argv) {
			continue
		}
		out = append(out, argv)
	}
	return out
}

// TestCrossRuntimeQuotaArgs: for the same requests (explicit times, costs 1 to 3, gaps past
// a lease's life, a step back), a Go and a Node.js limiter with leased quota send quota.lua
// the same ARGV, call for call (what each gives back and asks for follows from the replies,
// so this is the reply handling too), and decide alike. Go's local denials are off: Node.js
// has none, and they save calls only for denials, not leases.
func TestCrossRuntimeQuotaArgs(t *testing.T) {
	addr := redistest.Addr(t)
	c := redistest.NewClient(t, addr)
	opts := redisbackend.QuotaOptions{Enabled: true, Duration: 20 * time.Millisecond, MaxShare: 0.3}
	prefix := fmt.Sprintf("xqa%d", time.Now().UnixNano())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + 400_000
	var seq [][2]int64
	at := t0
	for i := range 400 {
		switch {
		case i%97 == 96:
			at -= 5_000 // a step back
		case i%41 == 40:
			at += 40_000 // past the lease's life
		default:
			at += 300 + int64(i%7)*50
		}
		seq = append(seq, [2]int64{at, 1 + int64(i%3)})
	}
	for _, s := range []redstream.Spec{redstream.TokenBucket(200, 1000), redstream.FixedWindow(100*time.Millisecond, 120), redstream.SlidingCounter(100*time.Millisecond, 120)} {
		t.Run(string(s.Algorithm), func(t *testing.T) {
			goPrefix, nodePrefix := prefix+":go:"+string(s.Algorithm), prefix+":node:"+string(s.Algorithm)
			stop := monitor(t, addr)
			l, err := redisbackend.NewLimiter(c, s, redisbackend.Options{KeyPrefix: goPrefix, Timeout: callTimeout, Quota: opts, DisableLocalDenials: true})
			if err != nil {
				t.Fatal(err)
			}
			var goDs []redstream.Decision
			for _, r := range seq {
				d, err := l.AllowN(context.Background(), "k", time.UnixMicro(r[0]), r[1])
				if err != nil {
					t.Fatal(err)
				}
				goDs = append(goDs, d)
			}
			spec := map[string]any{"algorithm": s.Algorithm, "capacity": s.Capacity, "rate": s.Rate}
			if s.Window > 0 {
				spec = map[string]any{"algorithm": s.Algorithm, "windowMs": s.Window.Milliseconds(), "limit": s.Limit}
			}
			var nodeDs []struct {
				Allowed    bool  `json:"allowed"`
				Remaining  int64 `json:"remaining"`
				RetryAfter int64 `json:"retryAfter"`
				ResetAfter int64 `json:"resetAfter"`
			}
			runOps(t, []string{addr}, false, map[string]any{
				"limiters": map[string]any{"q": map[string]any{"prefix": nodePrefix, "spec": spec,
					"quota": map[string]any{"enabled": true, "durationMs": opts.Duration.Milliseconds(), "maxShare": opts.MaxShare}}},
				"ops": []any{map[string]any{"op": "decide", "limiter": "q", "key": "k", "seq": seq}},
			}, &nodeDs)
			cmds := stop()
			goCalls, nodeCalls := leaseCalls(cmds, goPrefix), leaseCalls(cmds, nodePrefix)
			t.Logf("%d requests: Go made %d script calls, Node.js %d", len(seq), len(goCalls), len(nodeCalls))
			if len(goCalls) < 20 || len(goCalls) > len(seq)/2 {
				t.Errorf("Go made %d calls for %d requests, want leases and renewals both", len(goCalls), len(seq))
			}
			backs := 0
			for _, a := range goCalls {
				if len(a) == 12 && a[9] != "0" { // ARGV[10]: the units given back
					backs++
				}
			}
			if backs == 0 {
				t.Error("no call gave units back")
			}
			for i := range max(len(goCalls), len(nodeCalls)) {
				if i >= len(goCalls) || i >= len(nodeCalls) || !slices.Equal(goCalls[i], nodeCalls[i]) {
					var g, n []string
					if i < len(goCalls) {
						g = goCalls[i]
					}
					if i < len(nodeCalls) {
						n = nodeCalls[i]
					}
					t.Fatalf("call %d: Go sent %q, Node.js %q", i, g, n)
				}
			}
			denied := 0
			if len(nodeDs) != len(goDs) {
				t.Fatalf("Node.js made %d decisions, Go %d", len(nodeDs), len(goDs))
			}
			for i, g := range goDs {
				n := nodeDs[i]
				if g.Allowed != n.Allowed || g.Remaining != n.Remaining || g.RetryAfter.Microseconds() != n.RetryAfter || g.ResetAfter.Microseconds() != n.ResetAfter {
					t.Fatalf("request %d %v: Go %+v, Node.js %+v", i, seq[i], g, n)
				}
				if !g.Allowed {
					denied++
				}
			}
			t.Logf("%d of %d requests denied", denied, len(goDs))
			if denied == 0 {
				t.Error("no request was denied: the sequence never reached the limit")
			}
		})
	}
}
