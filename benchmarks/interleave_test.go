package benchmarks

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// The in-process comparisons run every contender in the same benchmark, in alternating
// rounds (A B C, then B C A, ...), so that a change in the machine's speed or load during
// the run (other processes, frequency scaling, a noisy neighbour on a shared VM) falls on
// every contender alike instead of on whichever ran last. Each round gives one ns/op per
// contender and one ratio per peer (the first contender over the peer, in the same round);
// the benchmark reports their medians and the spread of the ratio (the 25th and 75th
// percentiles over the rounds). Serial rounds are timed by the CPU time of the benchmark's
// thread where the platform has it (cpuNow): time the thread spent preempted by other
// processes does not count. Parallel rounds are timed by the wall clock.
//
// The figures are ratios measured together, never timed assertions: read the ratio
// metrics (redstream/<peer>), not the absolute ns/op, when comparing machines.

// contender is one library in an interleaved comparison. run performs n operations; it is
// called from one goroutine at a time in serial rounds, and from several at once in
// parallel rounds.
type contender struct {
	name string
	run  func(n int)
}

// rounds is the number of rounds of every interleaved comparison; each round runs every
// contender for about b.N/rounds operations (at least minRound).
const (
	rounds   = 15
	minRound = 2000
)

// interleave runs cs in alternating serial rounds and reports, for each contender, the
// median ns/op ("<name>-ns/op") and allocations per operation ("<name>-allocs/op"), and
// for each contender after the first the median ratio of the first's time to its time
// ("<first>/<name>") with the 25th and 75th percentiles ("...-p25", "...-p75").
func interleave(b *testing.B, cs ...contender) {
	b.Helper()
	runtime.LockOSThread() // the thread's CPU time is the goroutine's
	defer runtime.UnlockOSThread()
	runRounds(b, cs, func(c contender, n int) time.Duration {
		t0 := cpuNow()
		c.run(n)
		return cpuNow() - t0
	})
}

// interleaveParallel is interleave with every round run by GOMAXPROCS goroutines at once,
// each performing the round's operations divided among them, timed by the wall clock
// (ns/op is wall time per operation: the inverse of throughput).
func interleaveParallel(b *testing.B, cs ...contender) {
	b.Helper()
	p := runtime.GOMAXPROCS(0)
	runRounds(b, cs, func(c contender, n int) time.Duration {
		var wg sync.WaitGroup
		per := max(1, n/p)
		start := make(chan struct{})
		for range p {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c.run(per)
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		return time.Since(t0) * time.Duration(n) / time.Duration(per*p)
	})
}

func runRounds(b *testing.B, cs []contender, timeRound func(c contender, n int) time.Duration) {
	b.Helper()
	n := max(minRound, b.N/rounds)
	for _, c := range cs {
		c.run(n / 4) // warm caches and the branch predictor
	}
	ns := make([][]float64, len(cs))
	allocs := make([]uint64, len(cs))
	var m0, m1 runtime.MemStats
	b.ResetTimer()
	for r := range rounds {
		for k := range cs {
			i := (r + k) % len(cs)
			runtime.ReadMemStats(&m0)
			d := timeRound(cs[i], n)
			runtime.ReadMemStats(&m1)
			allocs[i] += m1.Mallocs - m0.Mallocs
			ns[i] = append(ns[i], float64(d.Nanoseconds())/float64(n))
		}
	}
	b.StopTimer()
	for i, c := range cs {
		b.ReportMetric(quantile(ns[i], 0.5), c.name+"-ns/op")
		b.ReportMetric(float64(allocs[i])/float64(rounds*n), c.name+"-allocs/op")
	}
	for i := 1; i < len(cs); i++ {
		ratios := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = ns[0][r] / ns[i][r]
		}
		unit := cs[0].name + "/" + cs[i].name
		b.ReportMetric(quantile(ratios, 0.5), unit)
		b.ReportMetric(quantile(ratios, 0.25), unit+"-p25")
		b.ReportMetric(quantile(ratios, 0.75), unit+"-p75")
	}
	// The framework's own ns/op would be the time of all contenders together: report the
	// first contender's median in its place.
	b.ReportMetric(quantile(ns[0], 0.5), "ns/op")
}

// quantile returns the q-quantile of v (nearest rank).
func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
