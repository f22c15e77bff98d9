package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Interleaved comparisons. Machine load drifts over seconds (other processes, CPU
// frequency, the Redis server's own allocator), so a ratio between two libraries measured
// one after the other carries that drift. Here every contender runs in short slices that
// alternate: round after round, each contender runs one slice (the order rotates every
// round), and each figure is the median over rounds, with its spread (min and max). Ratios
// are computed within each round, then their median is taken, so drift common to a round
// cancels.
//
// REDSTREAM_BENCH_ROUNDS (default 7) and REDSTREAM_BENCH_SLICE (default 400ms) tune a run;
// run these benchmarks with -benchtime 1x (one interleaved run per benchmark).

// contender is one library or configuration in an interleaved comparison.
type redisContender struct {
	name string
	// decide makes one decision; r is the calling goroutine's own random source.
	decide func(ctx context.Context, r *rand.Rand) (bool, error)
	// cmds are the commands one decision sends to Redis, as INFO commandstats names them
	// (default: the script commands, evalsha, eval, evalsha_ro, eval_ro). Only these are
	// counted: commandstats also counts the commands a script calls, and their time is
	// already part of the script's.
	cmds []string
}

var scriptCmds = []string{"evalsha", "eval", "evalsha_ro", "eval_ro"}

// sliceStats is what one slice of one contender measured.
type sliceStats struct {
	decisions, admitted int64
	elapsed             time.Duration
	clientCPU           time.Duration // user+system CPU of this process during the slice
	redisCalls          int64         // the contender's commands Redis ran (INFO commandstats)
	redisCmdUsec        int64         // their usec in commandstats (a script's commands included)
	redisCPU            time.Duration // used_cpu_user+used_cpu_sys of the server (INFO cpu)
	p50, p99            time.Duration // latency of one decision in 8 (a sample, so timing costs little)
}

func (s sliceStats) perSec() float64 { return float64(s.decisions) / s.elapsed.Seconds() }

func (s sliceStats) per(v float64) float64 {
	if s.decisions == 0 {
		return 0
	}
	return v / float64(s.decisions)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// processCPU returns this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverStats reads INFO commandstats (calls and usec per command) and INFO cpu (the
// server's user+system CPU time).
func serverStats(tb testing.TB, c rueidis.Client) (cmds map[string][2]int64, cpu time.Duration) {
	tb.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	cmds = map[string][2]int64{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += time.Duration(f * 1e9)
			continue
		}
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var st [2]int64
		for _, f := range strings.Split(v, ",") {
			fk, fv, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(fv, 64)
			switch fk {
			case "calls":
				st[0] = int64(n)
			case "usec":
				st[1] = int64(n)
			}
		}
		cmds[name] = st
	}
	return cmds, cpu
}

// runSlice runs c from g goroutines for d.
func runSlice(b *testing.B, admin rueidis.Client, g int, d time.Duration, c redisContender) sliceStats {
	b.Helper()
	ctx := context.Background()
	cmds0, rcpu0 := serverStats(b, admin)
	var stop atomic.Bool
	var decisions, admitted atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	lats := make([][]time.Duration, g)
	cpu0 := processCPU()
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			var n, ok int64
			var lat []time.Duration
			for !stop.Load() {
				var a bool
				var err error
				if n&7 == 0 {
					t := time.Now()
					a, err = c.decide(ctx, r)
					lat = append(lat, time.Since(t))
				} else {
					a, err = c.decide(ctx, r)
				}
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Sprintf("%s: %v", c.name, err))
					stop.Store(true)
					break
				}
				n++
				if a {
					ok++
				}
			}
			decisions.Add(n)
			admitted.Add(ok)
			lats[w] = lat
		}(w)
	}
	wg.Wait()
	s := sliceStats{elapsed: time.Since(start), clientCPU: processCPU() - cpu0}
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	cmds1, rcpu1 := serverStats(b, admin)
	s.decisions, s.admitted = decisions.Load(), admitted.Load()
	names := c.cmds
	if names == nil {
		names = scriptCmds
	}
	for _, n := range names {
		s.redisCalls += cmds1[n][0] - cmds0[n][0]
		s.redisCmdUsec += cmds1[n][1] - cmds0[n][1]
	}
	s.redisCPU = rcpu1 - rcpu0
	if all := slices.Concat(lats...); len(all) > 0 {
		slices.Sort(all)
		s.p50, s.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	return s
}

// interleave runs the contenders in alternating slices and returns each one's slices,
// in round order.
func interleaveRedis(b *testing.B, admin rueidis.Client, g int, cs []redisContender) [][]sliceStats {
	b.Helper()
	rounds := envInt("REDSTREAM_BENCH_ROUNDS", 7)
	d := envDuration("REDSTREAM_BENCH_SLICE", 400*time.Millisecond)
	out := make([][]sliceStats, len(cs))
	// Warm up every contender (scripts loaded, connections open, keys created).
	for _, c := range cs {
		runSlice(b, admin, g, d/4, c)
	}
	for r := 0; r < rounds; r++ {
		for i := range cs {
			j := (i + r) % len(cs)
			out[j] = append(out[j], runSlice(b, admin, g, d, cs[j]))
		}
	}
	return out
}

// median returns the median of vs (the mean of the middle two for an even count), and
// the smallest and largest.
func median(vs []float64) (med, lo, hi float64) {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

func column(ss []sliceStats, f func(sliceStats) float64) []float64 {
	vs := make([]float64, len(ss))
	for i, s := range ss {
		vs[i] = f(s)
	}
	return vs
}

// report logs a table of the contenders' medians and spreads, reports each one's median
// decisions/s and, for each pair in ratios (a over b, by name), the median of the
// per-round ratios of decisions/s.
func report(b *testing.B, cs []redisContender, res [][]sliceStats, ratios [][2]string) {
	b.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%s\n%-36s %12s %21s %8s %11s %11s %11s %11s %9s %9s\n", b.Name(), "contender", "decisions/s", "(min .. max)",
		"admitted", "redis-calls", "redis-cmd", "redis-cpu", "client-cpu", "p50", "p99")
	fmt.Fprintf(&sb, "%-36s %12s %21s %8s %11s %11s %11s %11s %9s %9s\n", "", "median", "", "", "/decision", "µs/decision",
		"µs/decision", "µs/decision", "µs", "µs")
	index := map[string]int{}
	for i, c := range cs {
		index[c.name] = i
		ss := res[i]
		rate, lo, hi := median(column(ss, sliceStats.perSec))
		adm, _, _ := median(column(ss, func(s sliceStats) float64 { return s.per(float64(s.admitted)) }))
		calls, _, _ := median(column(ss, func(s sliceStats) float64 { return s.per(float64(s.redisCalls)) }))
		cmd, _, _ := median(column(ss, func(s sliceStats) float64 { return s.per(float64(s.redisCmdUsec)) }))
		rcpu, _, _ := median(column(ss, func(s sliceStats) float64 { return s.per(float64(s.redisCPU.Microseconds())) }))
		ccpu, _, _ := median(column(ss, func(s sliceStats) float64 { return s.per(float64(s.clientCPU.Nanoseconds()) / 1e3) }))
		p50, _, _ := median(column(ss, func(s sliceStats) float64 { return float64(s.p50.Nanoseconds()) / 1e3 }))
		p99, _, _ := median(column(ss, func(s sliceStats) float64 { return float64(s.p99.Nanoseconds()) / 1e3 }))
		fmt.Fprintf(&sb, "%-36s %12.0f %10.0f .. %-9.0f %7.1f%% %11.4f %11.3f %11.3f %11.3f %9.1f %9.1f\n",
			c.name, rate, lo, hi, 100*adm, calls, cmd, rcpu, ccpu, p50, p99)
		b.ReportMetric(rate, c.name+"-decisions/s")
	}
	for _, p := range ratios {
		a, c := res[index[p[0]]], res[index[p[1]]]
		rs := make([]float64, min(len(a), len(c)))
		for i := range rs {
			rs[i] = a[i].perSec() / c[i].perSec()
		}
		med, lo, hi := median(rs)
		fmt.Fprintf(&sb, "%s / %s: %.2fx decisions/s (per-round ratios %.2f .. %.2f)\n", p[0], p[1], med, lo, hi)
		b.ReportMetric(med, p[0]+"/"+p[1])
	}
	fmt.Fprintf(&sb, "rounds %d, slices of %v; load average at the end: %s", len(res[0]), envDuration("REDSTREAM_BENCH_SLICE", 400*time.Millisecond), loadAvg())
	fmt.Println(sb.String()) // b.Log would truncate the table
}

// loadAvg returns /proc/loadavg's first three fields, or "n/a".
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
