package redisbackend

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/redistest"
)

// leaseProcSpecs are the limits the processes of TestQuotaProcesses share: small enough that
// three processes exhaust them in every window, large enough for leases of many units.
var leaseProcSpecs = []redstream.Spec{
	redstream.FixedWindow(100*time.Millisecond, 200),
	redstream.TokenBucket(100, 2000),
	redstream.SlidingCounter(100*time.Millisecond, 200),
}

var leaseProcOptions = QuotaOptions{Enabled: true, Duration: 30 * time.Millisecond, MaxShare: 0.25}

// TestQuotaChild is one process of TestQuotaProcesses: it requests one key as fast as it can
// (at the server's TIME) for REDSTREAM_LEASE_MS and writes each admission as "a <µs>" at
// once, unbuffered, so that a SIGKILL loses none it made: a request the lease admitted at
// the time read before the request (after the lease's take, before its end), one Redis
// decided at the time the script read. Each lease taken is written as "lease <units left>".
func TestQuotaChild(t *testing.T) {
	idx := os.Getenv("REDSTREAM_LEASE_SPEC")
	if idx == "" {
		t.Skip("run by TestQuotaProcesses")
	}
	i, _ := strconv.Atoi(idx)
	ms, _ := strconv.Atoi(os.Getenv("REDSTREAM_LEASE_MS"))
	every, _ := strconv.Atoi(os.Getenv("REDSTREAM_LEASE_EVERY"))
	var c rueidis.Client
	if os.Getenv("REDSTREAM_LEASE_CLUSTER") == "1" {
		c = redistest.ClusterClient(t)
	} else {
		c = redistest.Client(t)
	}
	l, err := NewLimiter(c, leaseProcSpecs[i], Options{KeyPrefix: os.Getenv("REDSTREAM_LEASE_PREFIX"), Quota: leaseProcOptions})
	if err != nil {
		t.Fatal(err)
	}
	const key = "hot"
	e := l.quota.entry(key)
	start := time.Now()
	stop := start.Add(time.Duration(ms) * time.Millisecond)
	for k := 1; time.Now().Before(stop); k++ {
		calls := l.quota.calls.Load()
		before := time.Now().UnixMicro()
		d, err := l.AllowN(context.Background(), key, time.Time{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			at := before
			if l.quota.calls.Load() != calls {
				e.mu.Lock()
				at, left := e.at, e.left
				e.mu.Unlock()
				os.Stdout.WriteString("lease " + strconv.FormatInt(left, 10) + "\n")
				os.Stdout.WriteString("a " + strconv.FormatInt(at, 10) + "\n")
			} else {
				os.Stdout.WriteString("a " + strconv.FormatInt(at, 10) + "\n")
			}
		}
		// The k-th request is due every µs after the start (at once if late).
		time.Sleep(time.Until(start.Add(time.Duration(k*every) * time.Microsecond)))
	}
}

// leaseChild is a running TestQuotaChild.
type leaseChild struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	admits []int64
	leases int
	held   chan int64 // the units left of each lease of 2 or more (dropped when nobody waits)
	done   chan struct{}
}

func startLeaseChild(t *testing.T, spec int, prefix string, cluster bool, ms, every int) *leaseChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuotaChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REDSTREAM_LEASE_SPEC="+strconv.Itoa(spec), "REDSTREAM_LEASE_PREFIX="+prefix,
		"REDSTREAM_LEASE_MS="+strconv.Itoa(ms), "REDSTREAM_LEASE_EVERY="+strconv.Itoa(every))
	if cluster {
		cmd.Env = append(cmd.Env, "REDSTREAM_LEASE_CLUSTER=1", "REDSTREAM_REDIS_CLUSTER="+strings.Join(redistest.ClusterAddrs(t), ","))
	} else {
		cmd.Env = append(cmd.Env, "REDSTREAM_REDIS_ADDR="+redistest.Addr(t))
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &leaseChild{cmd: cmd, held: make(chan int64), done: make(chan struct{})}
	go func() {
		defer close(ch.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			ch.mu.Lock()
			if v, ok := strings.CutPrefix(line, "a "); ok {
				if at, err := strconv.ParseInt(v, 10, 64); err == nil {
					ch.admits = append(ch.admits, at)
				}
			} else if v, ok := strings.CutPrefix(line, "lease "); ok {
				ch.leases++
				if left, err := strconv.ParseInt(v, 10, 64); err == nil && left >= 2 {
					ch.mu.Unlock()
					select {
					case ch.held <- left:
					default:
					}
					continue
				}
			}
			ch.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-ch.done; _ = cmd.Wait() })
	return ch
}

// TestQuotaProcesses: three processes share a hot key through leases, on one redis-server
// and on a 3-master cluster; one is SIGKILLed while it holds a lease. Replaying every
// admission of the three, in time order, through core's algorithm finds no request the
// limit would have denied: no window (no interval, for the token bucket) admitted more
// than the limit, and the killed process's unused units stayed spent.
func TestQuotaProcesses(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		name := "redis"
		if cluster {
			name = "cluster"
		}
		t.Run(name, func(t *testing.T) {
			for i, spec := range leaseProcSpecs {
				// Each process asks at 60% of the limit's rate (leases outlive windows and
				// processes meet at the limit), then as fast as it can (every window is
				// exhausted in its first milliseconds).
				for _, share := range []float64{0.6, 0} {
					t.Run(fmt.Sprintf("%s/%.0f%%", spec.Algorithm, share*100), func(t *testing.T) { checkLeaseProcesses(t, i, spec, cluster, share) })
				}
			}
		})
	}
}

func checkLeaseProcesses(t *testing.T, i int, spec redstream.Spec, cluster bool, share float64) {
	const ms = 1500
	prefix := uniq("leaseproc")
	p, err := spec.Core()
	if err != nil {
		t.Fatal(err)
	}
	every := 50 // µs: as fast as the machine lets three processes go
	if share > 0 {
		every = int(float64(p.Period()) / (float64(p.Max()) * share))
	}
	var children []*leaseChild
	for range 3 {
		children = append(children, startLeaseChild(t, i, prefix, cluster, ms, every))
	}
	// Kill the first as soon as it holds a lease with 2 units or more left (unused units it
	// takes to its grave, which must stay spent).
	// Saturated (share 0), a token bucket is empty whenever a lease is taken, so leases are of
	// one unit and one with units left may never come: then the first process is killed
	// mid-run all the same (the 60% run of the algorithm kills one holding unused units).
	var left int64
	wait := 20 * time.Second
	if share == 0 {
		wait = time.Second // within the children's 1.5 s run
	}
	select {
	case left = <-children[0].held:
	case <-time.After(wait):
		if share > 0 {
			t.Fatal("the first process took no lease of 2 units or more")
		}
		t.Logf("saturated: no lease of 2 units or more within %v; killing the first process mid-run", wait)
	}
	if err := children[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed process 0 holding a lease of %d units left", left)
	var all []int64
	for j, ch := range children {
		<-ch.done
		_ = ch.cmd.Wait()
		ch.mu.Lock()
		t.Logf("process %d: %d admissions, %d leases", j, len(ch.admits), ch.leases)
		if j > 0 && ch.leases == 0 {
			t.Errorf("process %d took no leases", j)
		}
		all = append(all, ch.admits...)
		ch.mu.Unlock()
	}
	slices.Sort(all)
	over, periods := replay(t, spec, all)
	t.Logf("%v: %d admissions over %d periods of the limit, %d the limit would have denied", spec, len(all), periods, over)
	if over != 0 {
		t.Errorf("%d over-admissions", over)
	}
	if min := int64(periods) * leaseProcLimit(spec) / 4; int64(len(all)) < min {
		t.Errorf("%d admissions, want at least %d (a quarter of the limit per period)", len(all), min)
	}
}

// replay decides the admissions (sorted times, µs) with core's algorithm of spec, one unit
// each, and returns how many it denies and how many periods of the limit they span.
func replay(t *testing.T, spec redstream.Spec, times []int64) (over, periods int) {
	t.Helper()
	p, err := spec.Core()
	if err != nil {
		t.Fatal(err)
	}
	var s core.State
	var d core.Decision
	for _, at := range times {
		if err := p.StepState(&s, at, 1, &d); err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			over++
		}
	}
	if len(times) > 0 {
		periods = int((times[len(times)-1]-times[0])/p.Period()) + 1
	}
	return over, periods
}

// leaseProcLimit is how many units spec admits per period.
func leaseProcLimit(spec redstream.Spec) int64 {
	if spec.Limit > 0 {
		return spec.Limit
	}
	return int64(spec.Capacity)
}
