package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/proptest"
	"github.com/redstream-go/redstream/redisbackend"
)

// suiteCount is the number of suites a full run has: one per algorithm, multi, reserve,
// concurrency/leases and three dedup strategies.
var suiteCount = len(redstream.Algorithms()) + 6

// hasRow reports whether the table of out has a row of suite with result (PASS or FAIL).
func hasRow(out, suite, result string) bool {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(suite) + ` +` + result + ` +\d+ `).MatchString(out)
}

func TestConformanceEmbedded(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"conformance", "--checks", "20"}, &out); err != nil {
		t.Fatalf("conformance: %v\n%s", err, out.String())
	}
	for _, s := range []string{"token-bucket", "leaky-bucket", "sliding", "sliding-counter", "fixed", "concurrency", "multi", "reserve", "concurrency/leases", "dedup/set", "dedup/bloom", "dedup/windowed"} {
		if !hasRow(out.String(), s, "PASS") {
			t.Errorf("no PASS row for %s:\n%s", s, out.String())
		}
	}
	if want := fmt.Sprintf("all %d suites passed", suiteCount); !strings.Contains(out.String(), want) {
		t.Errorf("no summary:\n%s", out.String())
	}
	// The table's columns line up: every row's result starts where the header's does.
	lines := strings.Split(out.String(), "\n")
	col := -1
	for _, l := range lines {
		if strings.HasPrefix(l, "SUITE ") {
			col = strings.Index(l, "RESULT")
			continue
		}
		if col > 0 && (strings.Contains(l, " PASS ") || strings.Contains(l, " FAIL ")) && !strings.HasPrefix(l[col:], "PASS") {
			t.Errorf("row %q: the result is not in the RESULT column (%d)", l, col)
		}
	}
}

// TestConformanceRealRedis runs the command against a real redis-server and checks it
// leaves no key behind.
func TestConformanceRealRedis(t *testing.T) {
	s := redistest.NewServer(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"conformance", "--redis", s.Addr, "--checks", "20"}, &out); err != nil {
		t.Fatalf("conformance: %v\n%s", err, out.String())
	}
	if want := fmt.Sprintf("all %d suites passed", suiteCount); !strings.Contains(out.String(), want) || !strings.Contains(out.String(), s.Addr) {
		t.Errorf("output:\n%s", out.String())
	}
	c := redistest.NewClient(t, s.Addr)
	if n, err := c.Do(context.Background(), c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("DBSIZE after the run = %d, %v; want 0 (the command deletes its keys)", n, err)
	}
	out.Reset()
	err := run(context.Background(), []string{"conformance", "--redis", s.Addr, "--cluster"}, &out)
	if err == nil || !strings.Contains(err.Error(), "not a healthy Redis Cluster") {
		t.Errorf("--cluster on a standalone server: err = %v", err)
	}
}

// TestConformanceClusterReserveAndLeases: the reserve and concurrency/leases suites pass on a
// real 3-master cluster (each key's limits in one slot) and leave no key on any master.
func TestConformanceClusterReserveAndLeases(t *testing.T) {
	seeds := redistest.ClusterAddrs(t)
	out, err := runCmd(t, "conformance", "--redis", strings.Join(seeds, ","), "--cluster", "--only", "reserve,concurrency/leases", "--checks", "20")
	if err != nil || !strings.Contains(out, "all 2 suites passed") || !hasRow(out, "reserve", "PASS") || !hasRow(out, "concurrency/leases", "PASS") {
		t.Fatalf("cluster: %v\n%s", err, out)
	}
	c := redistest.NewClient(t, seeds...)
	nodes := c.Nodes()
	if len(nodes) < 3 {
		t.Fatalf("the cluster client sees %d nodes, want the 3 masters", len(nodes))
	}
	for addr, node := range nodes {
		keys, err := node.Do(context.Background(), node.B().Keys().Pattern("redstream-conformance:*").Build()).AsStrSlice()
		if err != nil || len(keys) != 0 {
			t.Errorf("%s after the run: keys %v, %v; want none (the command deletes its keys)", addr, keys, err)
		}
	}
}

// alwaysAllow is a broken engine: it admits everything.
type alwaysAllow struct{ redstream.Limiter }

func (a alwaysAllow) AllowN(ctx context.Context, key string, now time.Time, n int64) (redstream.Decision, error) {
	d, err := a.Limiter.AllowN(ctx, key, now, n)
	if err == nil {
		d.Allowed, d.RetryAfter = true, 0
	}
	return d, err
}

// TestConformanceReportsCounterexample: a broken engine fails with the shrunk case printed.
func TestConformanceReportsCounterexample(t *testing.T) {
	defer func(old func(rueidis.Client, string) []suite) { suitesFor = old }(suitesFor)
	suitesFor = func(c rueidis.Client, prefix string) []suite {
		return []suite{{name: "broken-fixed", run: func(t *recorder, checks int) int {
			return proptest.CheckLimiter(t, redstream.AlgorithmFixedWindow, func(spec redstream.Spec) (redstream.Limiter, error) {
				l, err := redisbackend.NewLimiter(c, spec, redisbackend.Options{KeyPrefix: prefix})
				return alwaysAllow{l}, err
			}, checks)
		}}}
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"conformance", "--checks", "50"}, &out)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 suites failed") {
		t.Fatalf("err = %v, want a failure\n%s", err, out.String())
	}
	for _, want := range []string{"broken-fixed     FAIL", "--- FAIL broken-fixed: shrunk counterexample", "[rapid] failed after", "want {Allowed:false"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// reserveShort is a broken reserving engine: a reservation of n > 1 takes one unit less.
type reserveShort struct{ *redisbackend.Limiter }

func (r reserveShort) ReserveN(ctx context.Context, key string, now time.Time, n int64) (*redstream.Reservation, error) {
	return r.Limiter.ReserveN(ctx, key, now, max(1, n-1))
}

// releaseAlways is a broken concurrency engine: Release reports every lease released, a
// stale or forged one too.
type releaseAlways struct{ redstream.ConcurrencyLimiter }

func (r releaseAlways) Release(ctx context.Context, lease redstream.Lease, now time.Time) (bool, error) {
	_, err := r.ConcurrencyLimiter.Release(ctx, lease, now)
	return err == nil, err
}

// TestConformanceReportsBrokenReserveAndLeases: the reserve and concurrency/leases suites
// report a broken engine as the other suites do (a FAIL row, the shrunk counterexample),
// on the embedded server and on a real redis-server.
func TestConformanceReportsBrokenReserveAndLeases(t *testing.T) {
	defer func(old func(rueidis.Client, string) []suite) { suitesFor = old }(suitesFor)
	suitesFor = func(c rueidis.Client, prefix string) []suite {
		var seq int
		next := func() string { seq++; return fmt.Sprintf("%s:%d", prefix, seq) }
		return []suite{
			{name: "broken-reserve", run: func(t *recorder, checks int) int {
				return proptest.CheckReserver(t, func(specs []redstream.Spec) (redstream.Limiter, error) {
					l, err := redisbackend.NewMultiLimiter(c, specs, redisbackend.Options{KeyPrefix: next()})
					return reserveShort{l}, err
				}, checks, 60)
			}},
			{name: "broken-leases", run: func(t *recorder, checks int) int {
				return proptest.CheckConcurrencyLimiter(t, func(specs []redstream.Spec) (redstream.ConcurrencyLimiter, error) {
					l, err := redisbackend.NewConcurrencyLimiter(c, specs, redisbackend.Options{KeyPrefix: next()})
					return releaseAlways{l}, err
				}, checks, 60)
			}},
		}
	}
	for _, target := range []struct{ name, addr string }{{"embedded", ""}, {"redis", redistest.NewServer(t).Addr}} {
		t.Run(target.name, func(t *testing.T) {
			args := []string{"conformance", "--checks", "50"}
			if target.addr != "" {
				args = append(args, "--redis", target.addr)
			}
			var out bytes.Buffer
			err := run(context.Background(), args, &out)
			if err == nil || !strings.Contains(err.Error(), "2 of 2 suites failed") {
				t.Fatalf("err = %v, want both suites failed\n%s", err, out.String())
			}
			for _, s := range []string{"broken-reserve", "broken-leases"} {
				if !hasRow(out.String(), s, "FAIL") {
					t.Errorf("no FAIL row for %s:\n%s", s, out.String())
				}
			}
			for _, want := range []string{
				"--- FAIL broken-reserve: shrunk counterexample", "ReserveN(", "; model {Allowed:",
				"--- FAIL broken-leases: shrunk counterexample", "Release", "= true, <nil>; want false",
				"[rapid] failed after",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestConformanceFlags(t *testing.T) {
	for _, args := range [][]string{{"--checks", "0"}, {"--only", "nope"}, {"--cluster"}, {"--bogus"}} {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"conformance"}, args...), &out); err == nil {
			t.Errorf("conformance %v: no error", args)
		}
	}
}

// TestConformanceConnFlags: the shared connection flags reach a real server by URL and
// ACL user, and the real cluster; $REDIS_URL is not read (conformance writes keys, so it
// needs an explicit target); --help lists the flags with their defaults.
func TestConformanceConnFlags(t *testing.T) {
	s := redistest.NewServer(t)
	c := redistest.NewClient(t, s.Addr)
	if err := c.Do(context.Background(), c.B().AclSetuser().Username("conf").Rule("reset", "on", ">pw", "~*", "&*", "+@all").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, "conformance", "--url", "redis://conf:pw@"+s.Addr, "--only", "fixed", "--checks", "5"); err != nil || !strings.Contains(out, "all 1 suites passed") || !strings.Contains(out, "redis://"+s.Addr) {
		t.Errorf("--url: %v\n%s", err, out)
	}
	t.Setenv(envRedisURL, "redis://"+s.Addr)
	if out, err := runCmd(t, "conformance", "--only", "fixed", "--checks", "5"); err != nil || !strings.Contains(out, "embedded miniredis") {
		t.Errorf("$REDIS_URL should not be read: %v\n%s", err, out)
	}
	seeds := redistest.ClusterAddrs(t)
	if out, err := runCmd(t, "conformance", "--redis", strings.Join(seeds, ","), "--cluster", "--only", "token-bucket", "--checks", "5"); err != nil || !strings.Contains(out, "the cluster at") || !strings.Contains(out, "(3 nodes)") {
		t.Errorf("--cluster: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "conformance", "--help"); err != nil || !strings.Contains(out, "-checks int") || !strings.Contains(out, "(default 100)") || !strings.Contains(out, "-tls-ca string") {
		t.Errorf("--help: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "conformance", "--user", "x"); err == nil || !strings.Contains(err.Error(), "need --redis") {
		t.Errorf("--user without a server: %v", err)
	}
}

// TestConformanceJSON: --json prints one document, for a pass and for a failure.
func TestConformanceJSON(t *testing.T) {
	out, err := runCmd(t, "conformance", "--json", "--only", "fixed,dedup/set", "--checks", "5")
	var doc conformanceJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err != nil || dec.Decode(&doc) != nil || !doc.Passed || len(doc.Suites) != 2 || doc.Suites[0].Result != "PASS" || doc.Suites[0].Cases < 5 || doc.Checks != 5 {
		t.Fatalf("%v %+v\n%s", err, doc, out)
	}
	defer func(old func(rueidis.Client, string) []suite) { suitesFor = old }(suitesFor)
	suitesFor = func(c rueidis.Client, prefix string) []suite {
		return []suite{{name: "broken-fixed", run: func(t *recorder, checks int) int {
			return proptest.CheckLimiter(t, redstream.AlgorithmFixedWindow, func(spec redstream.Spec) (redstream.Limiter, error) {
				l, err := redisbackend.NewLimiter(c, spec, redisbackend.Options{KeyPrefix: prefix})
				return alwaysAllow{l}, err
			}, checks)
		}}}
	}
	out, err = runCmd(t, "conformance", "--json", "--checks", "50")
	doc = conformanceJSON{}
	if jerr := json.Unmarshal([]byte(out), &doc); err == nil || jerr != nil || doc.Passed || doc.Suites[0].Result != "FAIL" || !strings.Contains(doc.Suites[0].Counterexample, "[rapid] failed after") {
		t.Errorf("failure: %v %v %+v\n%s", err, jerr, doc, out)
	}
}
