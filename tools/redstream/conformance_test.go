package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/proptest"
	"github.com/redstream-go/redstream/redisbackend"
)

func TestConformanceEmbedded(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"conformance", "--checks", "20"}, &out); err != nil {
		t.Fatalf("conformance: %v\n%s", err, out.String())
	}
	for _, s := range []string{"token-bucket", "leaky-bucket", "sliding", "sliding-counter", "fixed", "multi", "dedup/set", "dedup/bloom", "dedup/windowed"} {
		if !strings.Contains(out.String(), s+strings.Repeat(" ", 17-len(s))+"PASS") {
			t.Errorf("no PASS row for %s:\n%s", s, out.String())
		}
	}
	if want := fmt.Sprintf("all %d suites passed", len(redstream.Algorithms())+4); !strings.Contains(out.String(), want) {
		t.Errorf("no summary:\n%s", out.String())
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
	if want := fmt.Sprintf("all %d suites passed", len(redstream.Algorithms())+4); !strings.Contains(out.String(), want) || !strings.Contains(out.String(), s.Addr) {
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
