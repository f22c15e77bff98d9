package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func configCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"config", "check"}, args...), &out)
	return out.String(), err
}

// TestConfigCheck prints the effective configuration of the Spring Boot example, for the
// default profile and for --profile prod (given before or after the file).
func TestConfigCheck(t *testing.T) {
	t.Setenv("APP_ENV", "")
	os.Unsetenv("APP_ENV")
	t.Setenv("SPRING_PROFILES_ACTIVE", "")
	os.Unsetenv("SPRING_PROFILES_ACTIVE")
	file := "../../config/testdata/spring/application.yml"
	out, err := configCheck(t, file)
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	for _, want := range []string{
		file + ": valid\nprofiles: dev\n",
		"  default: api\n",
		"    api: sliding, window-ms 1000, limit 10; backend memory\n",
		"    uploads: token-bucket, capacity 20, rate-per-second 2; backend memory\n",
		"\nredis-stream:\n  env-isolation: true\n  env: \"dev\"\n",
		"  read-count: 10\n  block-ms: 500\n  max-retry: 3\n", // max-retry: the default, filled in; durations in their keys' units
		"  autoclaim.min-idle-ms: 60000\n",
		"\nredis-cache:\n  name: \"default\"\n  key-prefix: \"orders:cache:\"\n",
		"  default-ttl-seconds: 60\n",                               // the dev document's 60
		"  breaker.failures: 3\n", "  breaker.cool-down-ms: 1000\n", // the cache breaker's effective thresholds, not zeros
		"\nspring.data.redis:\n  mode: single server\n  addresses: localhost:6379\n",
		"  database: 1\n",
		"  client-name: orders-dev\n",
		"\nother profiles in the file (not checked): prod; check each with --profile\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"--profile", "prod", file}, {file, "--profile", "prod"}} {
		out, err := configCheck(t, args...)
		if err != nil {
			t.Fatalf("config check %v: %v\n%s", args, err, out)
		}
		for _, want := range []string{
			"profiles: prod\n",
			"    api: sliding, window-ms 1000, limit 1000; backend redis, key-prefix orders:rl:api, failure-policy fail-closed\n",
			"checked, not connected",
			"  read-count: 50\n",
			"  default-ttl-seconds: 3600\n",
			"  database: 2\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	// The properties twin prints the same.
	pout, err := configCheck(t, "../../config/testdata/spring/application.properties")
	if err != nil {
		t.Fatal(err)
	}
	strip := func(s string) string { _, rest, _ := strings.Cut(s, "\n"); return rest }
	if strip(pout) != strip(out) && strip(pout) != strip(mustCheck(t, file)) {
		t.Errorf("properties output differs from YAML:\n%s\nvs\n%s", pout, mustCheck(t, file))
	}
}

func mustCheck(t *testing.T, args ...string) string {
	t.Helper()
	out, err := configCheck(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigCheckErrors: an invalid file prints the error with its key and line and fails;
// lenient mode prints warnings instead.
func TestConfigCheckErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "application.yml")
	doc := "redis-streaming:\n  ratelimit:\n    enabled: true\n    default-name: api\n    policies:\n      api:\n        algorithm: gcra\n        limit: 5\n"
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := configCheck(t, bad)
	if err == nil {
		t.Fatalf("an invalid file passed:\n%s", out)
	}
	want := bad + `: config: redis-streaming.ratelimit.policies.api.algorithm (line 7): unknown algorithm "gcra"`
	if !strings.Contains(out, want) {
		t.Errorf("output %q lacks %q", out, want)
	}
	out, err = configCheck(t, "--lenient", bad)
	if err != nil {
		t.Fatalf("lenient: %v\n%s", err, out)
	}
	if !strings.Contains(out, `warning: unknown algorithm "gcra"; using sliding (window-ms 1000, limit 5) (redis-streaming.ratelimit.policies.api.algorithm, line 7)`) ||
		!strings.Contains(out, "    api: sliding, window-ms 1000, limit 5; backend memory\n") {
		t.Errorf("lenient output:\n%s", out)
	}
	for _, args := range [][]string{{}, {"a.yml", "b.yml"}, {filepath.Join(dir, "missing.yml")}} {
		if out, err := configCheck(t, args...); err == nil {
			t.Errorf("config check %v succeeded:\n%s", args, out)
		}
	}
	var out2 bytes.Buffer
	if err := run(context.Background(), []string{"config"}, &out2); err == nil || !strings.Contains(out2.String(), "usage: redstream config check") {
		t.Errorf("config without check: %v, %q", err, out2.String())
	}
}

// TestConfigCheckRedisLimiterKeys: config check prints each Redis policy's timeout, breaker,
// Java layout, local denials and leased quota (where enabled), defaults filled in, and the
// key and line of a bad value.
func TestConfigCheckRedisLimiterKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "application.yml")
	doc := `redis-streaming:
  ratelimit:
    enabled: true
    backend: redis
    default-name: api
    breaker:
      failures: -1
    policies:
      api: {algorithm: token-bucket, capacity: 5, rate-per-second: 1, java-compatible: true}
      login: {limit: 5, timeout-ms: 250, local-denials: false, breaker: {cool-down-ms: 3000}}
      off: {limit: 5, timeout-ms: -1, breaker: {disabled: true}}
      mem: {backend: memory, limit: 5}
      hot: {algorithm: fixed, limit: 5000, quota: {enabled: true, duration-ms: 250, max-share: 0.2}}
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustCheck(t, file)
	if strings.Count(out, "quota:") != 1 {
		t.Errorf("output shows quota %d times, want once (only hot enables it):\n%s", strings.Count(out, "quota:"), out)
	}
	for _, want := range []string{
		"    api: token-bucket, capacity 5, rate-per-second 1; backend redis, key-prefix streaming:rl, failure-policy fail-closed\n" + // java-compatible: the Java starter's prefix, no name
			"      redis: timeout-ms 100, breaker {failures -1, error-rate 0.5, min-calls 20, window-ms 10000, cool-down-ms 1000, probes 1}, java-compatible true, local-denials true\n",
		"      redis: timeout-ms 250, breaker {failures -1, error-rate 0.5, min-calls 20, window-ms 10000, cool-down-ms 3000, probes 1}, java-compatible false, local-denials false\n",
		"      redis: timeout-ms -1 (the caller's context), breaker disabled, java-compatible false, local-denials true\n",
		"    mem: sliding, window-ms 1000, limit 5; backend memory\n",
		"    hot: fixed, window-ms 1000, limit 5000; backend redis, key-prefix streaming:rl:hot, failure-policy fail-closed\n" +
			"      redis: timeout-ms 100, breaker {failures -1, error-rate 0.5, min-calls 20, window-ms 10000, cool-down-ms 1000, probes 1}, java-compatible false, local-denials true\n" +
			"      quota: duration-ms 250, max-share 0.2 (leases of a hot key's budget, admitted in process)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	bad := strings.Replace(doc, "failures: -1", "failures: 0", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := configCheck(t, file)
	if want := "config: redis-streaming.ratelimit.breaker.failures (line 7): must be at least 1 consecutive failure, or -1 to disable the rule; got 0"; err == nil || !strings.Contains(out, want) {
		t.Errorf("bad failures: %v, output lacks %q:\n%s", err, want, out)
	}
	// Quota where the engine has no leases is refused without a Redis client too.
	bad = strings.Replace(doc, "hot: {algorithm: fixed,", "hot: {algorithm: leaky-bucket, capacity: 5,", 1)
	bad = strings.Replace(bad, "limit: 5000, quota", "quota", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = configCheck(t, file)
	if want := `config: redis-streaming.ratelimit.policies.hot.quota.enabled (line 13): policy "hot": the leaky-bucket algorithm has no leased quota`; err == nil || !strings.Contains(out, want) {
		t.Errorf("quota on a leaky bucket: %v, output lacks %q:\n%s", err, want, out)
	}
}
