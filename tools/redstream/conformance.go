package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/proptest"
	"github.com/redstream-go/redstream/redisbackend"
)

func init() {
	registerCommand(command{
		name:    "conformance",
		summary: "prove the Redis engines equal to core on a server: [--redis host:port] [--cluster] [--checks N]",
		run:     runConformance,
	})
}

const conformanceUsage = `usage: redstream conformance [--redis host:port | --url URL] [--cluster] [--checks N] [--only SUITES]

Runs every conformance suite of the Redis engines against core on a Redis-compatible
server (the embedded miniredis by default; $REDIS_URL is not read, pass --url) and prints
a table of suite and result with case counts, and the shrunk counterexample of each
failure. Keys are created under a unique prefix and deleted afterwards.

flags:
`

// suite is one conformance suite: an algorithm, the multi-limiter, reservations, concurrency
// leases or a dedup strategy.
type suite struct {
	name string
	run  func(t *recorder, checks int) int
}

// runConformance runs every conformance suite against a Redis-compatible server (the
// embedded miniredis by default) and prints a table of suite × result with case counts,
// and the shrunk counterexample of each failure. Keys are created under a unique prefix
// and deleted afterwards.
func runConformance(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(out)
	conn := addConnFlags(fs, "", false, 30*time.Second)
	fs.Lookup("timeout").Usage = "deadline of connecting and of the cluster check (the suites' Redis calls are bounded by the engines' own timeouts)"
	checks := fs.Int("checks", 100, "minimum number of generated cases per suite")
	asJSON := fs.Bool("json", false, "print one JSON document instead of the table")
	only := fs.String("only", "", "comma-separated suites to run (default all), e.g. token-bucket,multi,reserve,concurrency/leases,dedup/bloom")
	fs.Usage = usageFunc(fs, conformanceUsage)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *checks < 1 {
		return fmt.Errorf("conformance: --checks %d, want at least 1", *checks)
	}
	tgt, err := conn.resolve()
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, conn.timeout)
	client, target, closeFn, err := conformanceClient(cctx, tgt)
	cancel()
	if err != nil {
		return err
	}
	defer closeFn()

	prefix := "redstream-conformance:" + strconv.FormatUint(rand.Uint64(), 36)
	defer cleanupPrefix(context.WithoutCancel(ctx), client, prefix)

	suites := suitesFor(client, prefix)
	if *only != "" {
		want := map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			want[strings.TrimSpace(s)] = true
		}
		var keep []suite
		for _, s := range suites {
			if want[s.name] {
				keep = append(keep, s)
				delete(want, s.name)
			}
		}
		if len(want) > 0 {
			names := make([]string, 0, len(suites))
			for _, s := range suites {
				names = append(names, s.name)
			}
			return fmt.Errorf("conformance: unknown suite in --only %q; suites: %s", *only, strings.Join(names, ", "))
		}
		suites = keep
	}

	text := out
	if *asJSON {
		text = io.Discard
	}
	fmt.Fprintf(text, "conformance of the Redis engines against core on %s, at least %d cases per suite\n\n", target, *checks)
	width := 16 // the suite column: as wide as the longest name
	for _, s := range suites {
		width = max(width, len(s.name))
	}
	row := "%-" + strconv.Itoa(width) + "s %-6s %6v %10v\n"
	fmt.Fprintf(text, row, "SUITE", "RESULT", "CASES", "TIME")
	doc := conformanceJSON{Target: target, Checks: *checks, Suites: []suiteJSON{}}
	var failures []*recorder
	for _, s := range suites {
		rec := &recorder{name: "conformance/" + s.name, perCheck: min(*checks, 100)}
		start := time.Now()
		cases := rec.run(func() int { return s.run(rec, *checks) })
		took := time.Since(start)
		result := "PASS"
		sj := suiteJSON{Suite: s.name, Cases: cases, TimeMS: took.Milliseconds()}
		if rec.Failed() {
			result = "FAIL"
			failures = append(failures, rec)
			sj.Counterexample = rec.report()
		}
		sj.Result = result
		doc.Suites = append(doc.Suites, sj)
		fmt.Fprintf(text, row, s.name, result, cases, took.Round(time.Millisecond))
	}
	for _, f := range failures {
		fmt.Fprintf(text, "\n--- FAIL %s: shrunk counterexample\n%s\n", strings.TrimPrefix(f.name, "conformance/"), f.report())
	}
	doc.Passed = len(failures) == 0
	if *asJSON {
		if err := writeJSON(out, doc); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("conformance: %d of %d suites failed on %s", len(failures), len(suites), target)
	}
	fmt.Fprintf(text, "\nall %d suites passed\n", len(suites))
	return nil
}

// JSON document of conformance --json (field names in README).
type (
	conformanceJSON struct {
		Target string      `json:"target"`
		Checks int         `json:"checks"`
		Passed bool        `json:"passed"`
		Suites []suiteJSON `json:"suites"`
	}
	suiteJSON struct {
		Suite          string `json:"suite"`
		Result         string `json:"result"` // PASS or FAIL
		Cases          int    `json:"cases"`
		TimeMS         int64  `json:"time_ms"`
		Counterexample string `json:"counterexample,omitempty"` // rapid's report of the shrunk failing case
	}
)

// conformanceClient connects to the target of the connection flags, or to a new embedded
// miniredis when they name no server.
func conformanceClient(ctx context.Context, tgt target) (rueidis.Client, string, func(), error) {
	if len(tgt.addrs) == 0 {
		if tgt.cluster {
			return nil, "", nil, errors.New("conformance: --cluster needs --redis host:port of a cluster node")
		}
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, "", nil, fmt.Errorf("conformance: start the embedded miniredis: %w", err)
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
		if err != nil {
			m.Close()
			return nil, "", nil, fmt.Errorf("conformance: connect to the embedded miniredis: %w", err)
		}
		return c, "the embedded miniredis (pass --redis host:port for a real server)", func() { c.Close(); m.Close() }, nil
	}
	c, tgt, err := tgt.connect(ctx)
	if err != nil {
		return nil, "", nil, fmt.Errorf("conformance: %w", err)
	}
	return c, tgt.describe, c.Close, nil
}

func firstNonNil(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

// suitesFor builds the suites; tests replace it to prove failures are reported.
var suitesFor = conformanceSuites

// conformanceOptions and conformanceDedupOptions bound each Redis call of the engines a
// conformance run builds: a run checks what the engines decide, not how fast a (possibly
// remote, possibly loaded) server answers, so it waits longer than the engines' 100 ms
// default and has no circuit breaker.
var (
	conformanceOptions      = redisbackend.Options{Timeout: 10 * time.Second, Breaker: redstream.BreakerOptions{Disabled: true}}
	conformanceDedupOptions = redisbackend.DedupOptions{Timeout: 10 * time.Second, Breaker: redstream.BreakerOptions{Disabled: true}}
)

// conformanceSuites lists the suites, each with a factory building engines on client
// under prefix.
func conformanceSuites(client rueidis.Client, prefix string) []suite {
	var seq int64
	var mu sync.Mutex
	next := func(base string) string {
		mu.Lock()
		defer mu.Unlock()
		seq++
		return prefix + ":" + base + ":" + strconv.FormatInt(seq, 10)
	}
	var suites []suite
	for _, alg := range redstream.Algorithms() {
		suites = append(suites, suite{name: string(alg), run: func(t *recorder, checks int) int {
			return proptest.CheckLimiter(t, alg, func(spec redstream.Spec) (redstream.Limiter, error) {
				o := conformanceOptions
				o.KeyPrefix = next(string(alg))
				return redisbackend.NewLimiter(client, spec, o)
			}, checks)
		}})
	}
	suites = append(suites, suite{name: "multi", run: func(t *recorder, checks int) int {
		return proptest.CheckMultiLimiter(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
			o := conformanceOptions
			o.KeyPrefix = next("multi")
			return redisbackend.NewMultiLimiter(client, specs, o)
		}, checks, 60)
	}})
	// Reserve, then settle: ReserveN and Settle of one to three limits on a key, against
	// core's ChargeOf and SettleState.
	suites = append(suites, suite{name: "reserve", run: func(t *recorder, checks int) int {
		return proptest.CheckReserver(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
			o := conformanceOptions
			o.KeyPrefix = next("reserve")
			return redisbackend.NewMultiLimiter(client, specs, o)
		}, checks, 60)
	}})
	// Concurrency leases: Acquire, Release and Extend (of live, expired, released and forged
	// leases), against core's ReleaseLease and ExtendLease. (The "concurrency" suite above
	// is the algorithm's AllowN.)
	suites = append(suites, suite{name: "concurrency/leases", run: func(t *recorder, checks int) int {
		return proptest.CheckConcurrencyLimiter(t, func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error) {
			o := conformanceOptions
			o.KeyPrefix = next("leases")
			return redisbackend.NewConcurrencyLimiter(client, specs, o)
		}, checks, 60)
	}})
	for _, s := range []redstream.DedupStrategy{redstream.DedupSet, redstream.DedupBloom, redstream.DedupWindowed} {
		suites = append(suites, suite{name: "dedup/" + string(s), run: func(t *recorder, checks int) int {
			return proptest.CheckDeduplicator(t, s, func(spec redstream.DedupSpec) (redstream.Deduplicator, error) {
				o := conformanceDedupOptions
				o.KeyPrefix = next("dedup")
				return redisbackend.NewDeduplicator(client, "d", spec, o)
			}, checks)
		}})
	}
	return suites
}

// cleanupPrefix deletes every key under prefix on every node (SCAN, then UNLINK key by key
// so a cluster never sees a cross-slot command).
func cleanupPrefix(ctx context.Context, client rueidis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, node := range client.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				break
			}
			cmds := make(rueidis.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				cmds = append(cmds, node.B().Unlink().Key(k).Build())
			}
			if len(cmds) > 0 {
				node.DoMulti(ctx, cmds...)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}

// testingInit makes testing.Short (which rapid calls) usable outside a test binary.
var testingInit sync.Once

// recorder is a rapid.TB outside go test: it records what a suite logs and whether it
// failed. Fatal, FailNow and Skip end the calling goroutine, as in package testing, so run
// suites through recorder.run.
type recorder struct {
	name     string
	perCheck int // cases per rapid.Check call (the rapid.checks flag)
	mu       sync.Mutex
	failed   bool
	skipped  bool
	lines    []string
}

func (r *recorder) run(f func() int) (cases int) {
	testingInit.Do(func() {
		testing.Init()
		// testing.Short panics unless the command line was parsed; this binary has no
		// global flags of its own.
		if !flag.Parsed() {
			_ = flag.CommandLine.Parse(nil)
		}
		// rapid would otherwise write fail files into the working directory.
		_ = flag.CommandLine.Set("rapid.nofailfile", "true")
	})
	if r.perCheck > 0 {
		_ = flag.CommandLine.Set("rapid.checks", strconv.Itoa(r.perCheck))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cases = f()
	}()
	<-done
	if r.Failed() && cases == 0 {
		cases = r.casesFromLog()
	}
	return cases
}

// casesFromLog reads the number of passing cases from rapid's failure message.
func (r *recorder) casesFromLog() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if _, rest, ok := strings.Cut(l, "failed after "); ok {
			if n, _, ok := strings.Cut(rest, " tests"); ok {
				if v, err := strconv.Atoi(n); err == nil {
					return v + 1
				}
			}
		}
	}
	return 0
}

// report returns the recorded failure: rapid's message and the shrunk case's draws.
func (r *recorder) report() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, l := range r.lines {
		if strings.HasPrefix(l, "[rapid] OK") {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	r.lines = append(r.lines, s)
	r.mu.Unlock()
}

func (r *recorder) fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}

// Helper does nothing.
func (r *recorder) Helper() {}

// Name returns the suite's name.
func (r *recorder) Name() string { return r.name }

// Logf records a line.
func (r *recorder) Logf(format string, args ...any) { r.log(fmt.Sprintf(format, args...)) }

// Log records a line.
func (r *recorder) Log(args ...any) { r.log(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }

// Errorf records a failure.
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.fail() }

// Error records a failure.
func (r *recorder) Error(args ...any) { r.Log(args...); r.fail() }

// Fatalf records a failure and ends the goroutine.
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

// Fatal records a failure and ends the goroutine.
func (r *recorder) Fatal(args ...any) { r.Error(args...); runtime.Goexit() }

// FailNow marks the suite failed and ends the goroutine.
func (r *recorder) FailNow() { r.fail(); runtime.Goexit() }

// Fail marks the suite failed.
func (r *recorder) Fail() { r.fail() }

// Failed reports whether the suite failed.
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Skipf records a skip and ends the goroutine.
func (r *recorder) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }

// Skip records a skip and ends the goroutine.
func (r *recorder) Skip(args ...any) { r.Log(args...); r.SkipNow() }

// SkipNow ends the goroutine.
func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
