package redisbackend

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/metrics"
)

// serverPID returns the process id of the server client talks to.
func serverPID(t *testing.T, client rueidis.Client) int {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no process_id in INFO server")
	return 0
}

// hang stops the server with SIGSTOP (it keeps its connections and answers nothing, as
// in a network partition) and returns the function that resumes it; the test's cleanup
// resumes it too.
func hang(t *testing.T, client rueidis.Client) (resume func()) {
	t.Helper()
	pid := serverPID(t, client)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume = func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(resume)
	return resume
}

// exposition returns the value of the series line starting with series in the
// Prometheus exposition, or -1.
func exposition(t *testing.T, series string) float64 {
	t.Helper()
	var b strings.Builder
	metrics.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

func series(family, name string, labels ...string) string {
	return metrics.Name(family, append([]string{"name", name}, labels...)...)
}

// TestHungServer: with the server SIGSTOPped, the README's setup (a Redis limiter in
// WithFailurePolicy(FailFallback) in metrics.Named) answers 20 sequential decisions from
// the in-process fallback, each within 150 ms (the default 100 ms timeout), and every one
// after the breaker opens within 5 ms; the fallback metric counts them by reason, the
// breaker gauge reads open, and one Warn is logged. After SIGCONT, decisions are made in
// Redis again within the cool-down.
func TestHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	spec := redstream.TokenBucket(1000, 1000)
	eng := mustLimiter(t, client, spec, Options{Timeout: DefaultTimeout, Logger: log, KeyPrefix: uniq("hung")})
	if eng.g.timeout != 100*time.Millisecond || eng.g.br == nil {
		t.Fatalf("timeout %v, breaker %v; want the 100 ms default and a breaker", eng.g.timeout, eng.g.br)
	}
	name := uniq("hung")
	named, err := metrics.Named(name, withPolicy(t, eng, redstream.FailFallback, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := named.AllowN(ctx, "k", time.Time{}, 1); err != nil || !d.Allowed {
		t.Fatalf("with Redis up: %+v, %v", d, err)
	}
	resume := hang(t, client)

	// A decision after the breaker opened is a probe, allowed the timeout, only if the
	// machine stalled for the whole 1 s cool-down meanwhile; the breaker's count of opens
	// tells probes apart (a failed probe opens it again).
	// Each bound is allowed the stall of the whole process measured during the call
	// (redistest.StallMeter), so a loaded machine does not fail a correct engine.
	opened, probes := -1, 0
	var slowest, slowestOpen time.Duration
	meter := redistest.NewStallMeter(t)
	for i := 0; i < 20; i++ {
		opens := eng.g.br.Stats().Opens
		var d redstream.Decision
		var err error
		took, stall := meter.Time(func() { d, err = named.AllowN(ctx, "k", time.Time{}, 1) })
		if err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v; want the fallback's admission", i, d, err)
		}
		if took > 150*time.Millisecond+stall {
			t.Errorf("decision %d took %v, want at most 150 ms (the process stalled %v meanwhile)", i, took, stall)
		}
		slowest = max(slowest, took)
		if opened >= 0 {
			if probe := eng.g.br.Stats().Opens > opens; probe {
				probes++
				t.Logf("decision %d was a probe (the machine stalled past the cool-down): %v", i, took)
			} else {
				slowestOpen = max(slowestOpen, took)
				// At once: far below the call timeout a closed breaker's decision waits
				// (a quarter of it leaves room for -race on a loaded machine).
				if took > DefaultTimeout/4+stall {
					t.Errorf("decision %d, with the breaker open, took %v; want at most %v (the process stalled %v meanwhile)", i, took, DefaultTimeout/4, stall)
				}
			}
		}
		if opened < 0 && eng.BreakerState() == redstream.BreakerOpen {
			opened = i
		}
	}
	// Batches of the same engine answer at once too.
	opens := eng.g.br.Stats().Opens
	var ds []redstream.Decision
	took, stall := meter.Time(func() { ds, err = named.AllowBatch(ctx, []string{"a", "b", "c"}, time.Time{}, 1) })
	batchProbe := eng.g.br.Stats().Opens > opens
	if err != nil || len(ds) != 3 || !ds[0].Allowed || !batchProbe && took > 5*time.Millisecond+stall || took > 150*time.Millisecond+stall {
		t.Errorf("batch with the breaker open: %+v, %v in %v (probe %v); want 3 fallback admissions within 5 ms", ds, err, took, batchProbe)
	}
	t.Logf("hung server: slowest decision %v, slowest with the breaker open %v, opened after decision %d, probes %d", slowest, slowestOpen, opened, probes)
	if opened != 2 {
		t.Errorf("breaker opened after decision %d, want after the third (3 consecutive failures)", opened)
	}
	timeouts, open := float64(3+probes), float64(17-probes+3)
	if batchProbe {
		timeouts, open = timeouts+3, open-3
	}
	for reason, want := range map[string]float64{"timeout": timeouts, "breaker_open": open, "error": 0} {
		if got := exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", reason)); got != want {
			t.Errorf("fallback_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if got := exposition(t, series("redis_streaming_rl_errors_total", name)); got != 23 {
		t.Errorf("errors_total = %v, want 23 (20 decisions and a batch of 3)", got)
	}
	if got := exposition(t, series("redis_streaming_rl_breaker_state", name)); got != 2 {
		t.Errorf("breaker_state = %v, want 2 (open)", got)
	}
	if got := logs.lines(); len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "deadline exceeded") {
		t.Fatalf("logs %q, want one Warn with the timeout", got)
	}

	resume()
	begin := time.Now()
	for eng.BreakerState() != redstream.BreakerClosed && time.Since(begin) < 5*time.Second {
		if _, err := named.AllowN(ctx, "k", time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	recovered := time.Since(begin)
	t.Logf("hung server: decisions back in Redis %v after SIGCONT", recovered)
	if eng.BreakerState() != redstream.BreakerClosed || recovered > DefaultCoolDownForTest+500*time.Millisecond {
		t.Fatalf("breaker %v %v after SIGCONT; want closed within the 1 s cool-down", eng.BreakerState(), recovered)
	}
	if _, err := eng.AllowN(ctx, "k", time.Time{}, 1); err != nil {
		t.Fatalf("engine after recovery: %v", err)
	}
	if got := exposition(t, series("redis_streaming_rl_breaker_state", name)); got != 0 {
		t.Errorf("breaker_state = %v after recovery, want 0", got)
	}
	if got := logs.lines(); len(got) != 2 || !strings.Contains(got[1], "level=INFO") {
		t.Errorf("logs %q, want the Warn then one Info", got)
	}
}

// DefaultCoolDownForTest is the breaker's default cool-down (BreakerOptions.CoolDown).
const DefaultCoolDownForTest = time.Second

// TestHungServerDedup: the deduplicators answer with an error within 150 ms of a hung
// server, then with ErrCircuitOpen within 5 ms.
func TestHungServerDedup(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	opts := DedupOptions{Timeout: DefaultTimeout, Logger: slog.New(slog.DiscardHandler)}
	dedups := map[string]redstream.Deduplicator{}
	names := map[string]string{}
	for _, s := range []redstream.DedupStrategy{redstream.DedupSet, redstream.DedupBloom, redstream.DedupWindowed} {
		names[string(s)] = uniq("hung-dedup")
		d, err := NewDeduplicator(client, names[string(s)], redstream.DedupSpec{Strategy: s, Insertions: 1000}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.CheckAndMark(context.Background(), "warm"); err != nil {
			t.Fatal(err)
		}
		dedups[string(s)] = d
	}
	hang(t, client)
	meter := redistest.NewStallMeter(t)
	for name, d := range dedups {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for i := 0; i < 10; i++ {
				var err error
				took, stall := meter.Time(func() { _, err = d.CheckAndMark(ctx, "x") })
				if err == nil {
					t.Fatalf("call %d succeeded on a hung server", i)
				}
				limit := 150 * time.Millisecond
				if i >= 3 {
					limit = 5 * time.Millisecond
					if !errors.Is(err, redstream.ErrCircuitOpen) {
						t.Errorf("call %d: %v, want ErrCircuitOpen", i, err)
					}
				} else if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("call %d: %v, want context.DeadlineExceeded", i, err)
				}
				if took > limit+stall {
					t.Errorf("call %d took %v, want at most %v (the process stalled %v meanwhile)", i, took, limit, stall)
				}
			}
			if _, err := d.IsDuplicate(ctx, "x"); !errors.Is(err, redstream.ErrCircuitOpen) {
				t.Errorf("IsDuplicate: %v, want ErrCircuitOpen", err)
			}
			name := names[name]
			for reason, want := range map[string]float64{"timeout": 3, "breaker_open": 8, "error": 0} {
				if got := exposition(t, series("redis_streaming_dedup_failures_total", name, "reason", reason)); got != want {
					t.Errorf("dedup_failures_total{reason=%q} = %v, want %v", reason, got, want)
				}
			}
			if got := exposition(t, series("redis_streaming_dedup_breaker_state", name)); got != 2 {
				t.Errorf("dedup_breaker_state = %v, want 2", got)
			}
		})
	}
}

// TestKilledAndRestartedServer: a killed server fails decisions at once (connection
// refused), the breaker opens after 3, and after the server is restarted decisions are
// made in Redis again within the cool-down.
func TestKilledAndRestartedServer(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	var mu sync.Mutex
	var changes []string
	var failures int
	eng := mustLimiter(t, client, redstream.FixedWindow(time.Hour, 1000), Options{Timeout: DefaultTimeout, Logger: slog.New(slog.DiscardHandler), KeyPrefix: uniq("killed"),
		Breaker: redstream.BreakerOptions{
			OnStateChange: func(c redstream.BreakerChange) {
				mu.Lock()
				changes = append(changes, c.From.String()+">"+c.To.String())
				mu.Unlock()
			},
			OnFailure: func(error) { mu.Lock(); failures++; mu.Unlock() },
		}})
	name := uniq("killed")
	named, err := metrics.Named(name, withPolicy(t, eng, redstream.FailOpen, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := named.AllowN(ctx, "k", time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	var slowest time.Duration
	meter := redistest.NewStallMeter(t)
	for i := 0; i < 20; i++ {
		var d redstream.Decision
		var err error
		took, stall := meter.Time(func() { d, err = named.AllowN(ctx, "k", time.Time{}, 1) })
		slowest = max(slowest, took)
		if err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v; want fail-open", i, d, err)
		}
		if took > 150*time.Millisecond+stall {
			t.Errorf("decision %d took %v, want at most 150 ms (the process stalled %v meanwhile)", i, took, stall)
		}
	}
	t.Logf("killed server: slowest decision %v", slowest)
	if eng.BreakerState() != redstream.BreakerOpen {
		t.Fatalf("breaker %v, want open", eng.BreakerState())
	}
	if e, o := exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", "error")), exposition(t, series("redis_streaming_rl_fallback_total", name, "reason", "breaker_open")); e != 3 || o != 17 {
		t.Errorf("fallback_total error=%v breaker_open=%v, want 3 and 17", e, o)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	for eng.BreakerState() != redstream.BreakerClosed && time.Since(begin) < 10*time.Second {
		_, _ = named.AllowN(ctx, "k", time.Time{}, 1)
		time.Sleep(10 * time.Millisecond)
	}
	recovered := time.Since(begin)
	t.Logf("restarted server: decisions back in Redis %v after the restart", recovered)
	if eng.BreakerState() != redstream.BreakerClosed || recovered > DefaultCoolDownForTest+time.Second {
		t.Fatalf("breaker %v %v after the restart; want closed within the cool-down (and a reconnect)", eng.BreakerState(), recovered)
	}
	// The restarted server lost its data: the key starts again in Redis. rueidis
	// reconnects each of its pipelined connections on first use, so a call or two may
	// still meet a dead one (EOF); that is not enough to open the breaker again.
	var d redstream.Decision
	for i := 0; i < 5; i++ {
		if d, err = eng.AllowN(ctx, "k", time.Time{}, 1); err == nil {
			break
		}
		t.Logf("decision %d after the restart: %v", i, err)
	}
	if err != nil || d.Remaining < 990 || eng.BreakerState() != redstream.BreakerClosed {
		t.Fatalf("after the restart: %+v, %v, breaker %v; want a decision of the restarted server", d, err, eng.BreakerState())
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(changes, " "); !strings.HasPrefix(got, "closed>open open>half-open") || !strings.HasSuffix(got, "half-open>closed") {
		t.Errorf("OnStateChange saw %q, want closed>open, probes, then half-open>closed", got)
	}
	if failures < 3 {
		t.Errorf("OnFailure called %d times, want at least the 3 that opened the breaker", failures)
	}
}

// TestFailureCountsWhateverTheStacking: during an outage (server killed) errors_total
// counts every failed decision and fallback_total every policy answer, whichever way
// metrics.Named, WithFailurePolicy and redstream.Multi are stacked, for single decisions
// and batches; under fail-closed only errors_total counts.
func TestFailureCountsWhateverTheStacking(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	quiet := Options{Timeout: DefaultTimeout, Logger: slog.New(slog.DiscardHandler)}
	spec := redstream.TokenBucket(100, 100)
	engine := func(t *testing.T) *Limiter { return mustLimiter(t, client, spec, quiet) }
	named := func(t *testing.T, name string, l redstream.Limiter) redstream.Limiter {
		n, err := metrics.Named(name, l)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	type stack struct {
		name     string
		build    func(t *testing.T, name string) redstream.Limiter
		fallback bool    // the policy answers (else fail-closed: errors only)
		inner    bool    // a second Named ("<name>:inner") inside the policy counts too
		allowed  float64 // admissions the Named counts: the warm-up, and the policy's if it is outside
	}
	stacks := []stack{
		{"Named(Policy(engine))", func(t *testing.T, n string) redstream.Limiter {
			return named(t, n, withPolicy(t, engine(t), redstream.FailFallback, nil))
		}, true, false, 16},
		{"Policy(Named(engine))", func(t *testing.T, n string) redstream.Limiter {
			return withPolicy(t, named(t, n, engine(t)), redstream.FailFallback, nil)
		}, true, false, 1},
		{"Named(Policy(Named(engine)))", func(t *testing.T, n string) redstream.Limiter {
			return named(t, n, withPolicy(t, named(t, n+":inner", engine(t)), redstream.FailOpen, nil))
		}, true, true, 16},
		{"Named(Multi(Policy(engine)))", func(t *testing.T, n string) redstream.Limiter {
			m, err := redstream.Multi(func(specs []redstream.Spec) (redstream.Limiter, error) {
				l, err := NewMultiLimiter(client, specs, quiet)
				if err != nil {
					return nil, err
				}
				return redstream.WithFailurePolicy(l, redstream.FailFallback, nil)
			}, redstream.Rule{Name: "s", Spec: spec}, redstream.Rule{Name: "d", Spec: redstream.FixedWindow(time.Hour, 1000)})
			if err != nil {
				t.Fatal(err)
			}
			return named(t, n, m)
		}, true, false, 16},
		{"Named(engine) fail-closed", func(t *testing.T, n string) redstream.Limiter {
			return named(t, n, engine(t))
		}, false, false, 1},
	}
	built := make([]redstream.Limiter, len(stacks))
	names := make([]string, len(stacks))
	ctx := context.Background()
	for i, s := range stacks {
		names[i] = uniq("stack")
		built[i] = s.build(t, names[i])
		if _, err := built[i].AllowN(ctx, "warm", time.Time{}, 1); err != nil {
			t.Fatalf("%s with Redis up: %v", s.name, err)
		}
	}
	srv.Stop()
	for i, s := range stacks {
		t.Run(s.name, func(t *testing.T) {
			l, name := built[i], names[i]
			for j := 0; j < 10; j++ {
				d, err := l.AllowN(ctx, "k", time.Time{}, 1)
				if s.fallback && (err != nil || !d.Allowed) {
					t.Fatalf("decision %d: %+v, %v; want the policy's admission", j, d, err)
				}
				if !s.fallback && err == nil {
					t.Fatalf("decision %d: no error under fail-closed", j)
				}
			}
			ds, err := redstream.AllowBatch(ctx, l, []string{"a", "b", "c", "d", "e"}, time.Time{}, 1)
			if s.fallback && (err != nil || len(ds) != 5 || !ds[4].Allowed) {
				t.Fatalf("batch: %+v, %v; want 5 admissions", ds, err)
			}
			var be *redstream.BatchError
			if !s.fallback && (!errors.As(err, &be) || failedKeys(be) != 5) {
				t.Fatalf("batch under fail-closed: %v, want a BatchError of 5 keys", err)
			}
			want := map[string]float64{
				series("redis_streaming_rl_errors_total", name):                                      15,
				series("redis_streaming_rl_fallback_total", name, "reason", "error"):                 3,
				series("redis_streaming_rl_fallback_total", name, "reason", "breaker_open"):          12,
				series("redis_streaming_rl_allowed_total", name):                                     s.allowed,
				series("redis_streaming_rl_breaker_state", name):                                     2,
				series("redis_streaming_rl_fallback_total", name+":inner", "reason", "breaker_open"): -1,
			}
			if !s.fallback {
				want[series("redis_streaming_rl_fallback_total", name, "reason", "error")] = 0
				want[series("redis_streaming_rl_fallback_total", name, "reason", "breaker_open")] = 0
			}
			if s.inner {
				want[series("redis_streaming_rl_fallback_total", name+":inner", "reason", "breaker_open")] = 12
				want[series("redis_streaming_rl_errors_total", name+":inner")] = 15
			}
			for series, w := range want {
				if got := exposition(t, series); got != w {
					t.Errorf("%s = %v, want %v", series, got, w)
				}
			}
		})
	}
}

// TestHungServerShortCallerDeadline: callers whose own deadline (50 ms) is shorter than
// the timeout still open the breaker on a hung server; callers that cancel do not.
func TestHungServerShortCallerDeadline(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	eng := mustLimiter(t, client, redstream.TokenBucket(10, 10), Options{Timeout: DefaultTimeout, Logger: slog.New(slog.DiscardHandler)})
	if _, err := eng.AllowN(context.Background(), "k", time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	hang(t, client)
	meter := redistest.NewStallMeter(t)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		// rueidis ends a call at its context's deadline, not at a bare cancellation: the
		// call returns at the 100 ms timeout, and the caller's context is cancelled.
		var err error
		took, stall := meter.Time(func() { _, err = eng.AllowN(ctx, "k", time.Time{}, 1) })
		if err == nil || took > time.Second+stall || ctx.Err() == nil {
			t.Fatalf("cancelled call %d: %v after %v (the process stalled %v meanwhile)", i, err, took, stall)
		}
	}
	if eng.BreakerState() != redstream.BreakerClosed {
		t.Fatalf("callers cancelling opened the breaker")
	}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := eng.AllowN(ctx, "k", time.Time{}, 1)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d: %v, want the caller's deadline", i, err)
		}
	}
	if eng.BreakerState() != redstream.BreakerOpen {
		t.Fatalf("breaker %v after 3 calls that outlived a 50 ms caller deadline, want open", eng.BreakerState())
	}
}

// failedKeys returns the number of keys of a batch whose decision failed.
func failedKeys(be *redstream.BatchError) int {
	n := 0
	for _, err := range be.Errs {
		if err != nil {
			n++
		}
	}
	return n
}
