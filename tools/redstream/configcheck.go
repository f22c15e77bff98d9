package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/health"
	"github.com/redstream-go/redstream/internal/yamlx"
)

func init() {
	registerCommand(command{
		name:    "config",
		summary: "config check FILE [--profile P]: the effective configuration of a file, or its errors",
		run:     runConfig,
	})
}

const configUsage = `usage: redstream config check FILE [--profile P[,Q]] [--lenient]

  Reads FILE (application.yml, or application.properties) as the application would and
  prints the configuration that runs: every limiter with its algorithm and parameters
  (on Redis also its timeout, circuit breaker, key layout, local denials and leased quota),
  the stream and cache settings with defaults filled in, the Redis connection. An error
  is printed with its key and line, and the exit status is 1. ${NAME} placeholders read
  the environment.

flags:
`

// runConfig is `redstream config check`.
func runConfig(_ context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(out, configUsage)
		return errors.New("config: want the subcommand check")
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(out)
	profile := fs.String("profile", "", "active profiles, comma-separated (default: SPRING_PROFILES_ACTIVE, else the file's spring.profiles.active)")
	lenient := fs.Bool("lenient", false, "read as Options.Lenient does: tolerated mistakes are warnings")
	fs.Usage = func() { fmt.Fprint(out, configUsage); fs.PrintDefaults() }
	// Flags may come before or after FILE.
	var files []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return errors.New("config check: want exactly one FILE")
	}
	file := files[0]
	warnings := &warningHandler{}
	opts := config.Options{Lenient: *lenient, Logger: slog.New(warnings)}
	if *profile != "" {
		opts.Profiles = strings.Split(*profile, ",")
	}
	cfg, err := config.FromConfig(file, opts)
	for _, w := range warnings.lines {
		fmt.Fprintln(out, "warning:", w)
	}
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", file, err)
		return fmt.Errorf("%s is not valid", file)
	}
	printConfig(out, file, cfg, warnings.noClient)
	if others := otherProfiles(file, cfg.Profiles); len(others) > 0 {
		fmt.Fprintf(out, "\nother profiles in the file (not checked): %s; check each with --profile\n", strings.Join(others, ", "))
	}
	return nil
}

// otherProfiles returns the profiles the file's documents name that are not active.
func otherProfiles(file string, active []string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var docs []yamlx.Node
	if strings.EqualFold(filepath.Ext(file), ".properties") {
		docs, err = yamlx.ParseProperties(data)
	} else {
		docs, err = yamlx.ParseDocuments(data)
	}
	if err != nil {
		return nil
	}
	ld, err := yamlx.Load(docs, yamlx.LoadOptions{Profiles: active, Lenient: true, InputSize: len(data),
		Getenv: func(string) (string, bool) { return "", false }})
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range ld.Defined {
		if !slices.Contains(active, p) {
			out = append(out, p)
		}
	}
	return out
}

// warningHandler collects the loader's warnings as lines "msg (key, line N)".
type warningHandler struct {
	lines    []string
	noClient bool
}

func (h *warningHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *warningHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *warningHandler) WithGroup(string) slog.Handler            { return h }

func (h *warningHandler) Handle(_ context.Context, r slog.Record) error {
	msg := strings.TrimPrefix(r.Message, "config: ")
	if strings.Contains(msg, "no Redis client was given") {
		h.noClient = true // config check never connects; said once below
		return nil
	}
	var key, line string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "key":
			key = a.Value.String()
		case "line":
			line = a.Value.String()
		}
		return true
	})
	h.lines = append(h.lines, fmt.Sprintf("%s (%s, line %s)", msg, key, line))
	return nil
}

func printConfig(out io.Writer, file string, cfg *config.Config, noClient bool) {
	fmt.Fprintf(out, "%s: valid\nprofiles: %s\n", file, strings.Join(cfg.Profiles, ", "))

	rl := cfg.RateLimit
	s := rl.Settings
	fmt.Fprintf(out, "\n%s:\n", config.RateLimitPath)
	if !s.Enabled {
		fmt.Fprintln(out, "  enabled: false (no limiter is built; Default admits every request)")
	} else {
		def := rl.DefaultName
		if def == "" {
			def = "(none: Default returns ErrNoDefault)"
		}
		fmt.Fprintf(out, "  enabled: true\n  backend: %s\n  key-prefix: %s\n  failure-policy: %s\n  default: %s\n  limiters:\n",
			s.Backend, s.KeyPrefix, s.FailurePolicy, def)
		if len(s.Policies) == 0 {
			single := config.PolicySettings{Name: rl.DefaultName, Algorithm: config.DefaultAlgorithm, Backend: s.Backend,
				Window: s.Window, Limit: s.Limit, KeyPrefix: s.KeyPrefix, FailurePolicy: s.FailurePolicy, Redis: s.Redis,
				Shadow: s.Shadow}
			printPolicy(out, single)
		}
		for _, p := range s.Policies {
			printPolicy(out, p)
		}
		if noClient && usesRedis(s) {
			fmt.Fprintln(out, "  (backend redis: checked, not connected; the application passes its client in Options.Redis)")
		}
	}

	fmt.Fprintf(out, "\n%s:\n", config.StreamPath)
	printSettings(out, yamlx.Settings(cfg.Stream))
	fmt.Fprintf(out, "\n%s:\n", config.CachePath)
	cc := cfg.Cache
	cc.Breaker = health.Effective(cc.Breaker) // the thresholds the cache runs with
	printSettings(out, yamlx.Settings(cc))

	r := cfg.Redis
	if !r.Set {
		fmt.Fprintf(out, "\n%s: not set (rueidis default: localhost:6379)\n", config.RedisPath)
		return
	}
	fmt.Fprintf(out, "\n%s:\n", r.Path)
	opt, err := r.ClientOption()
	if err != nil {
		fmt.Fprintf(out, "  error: %v\n", err)
		return
	}
	mode := "single server"
	switch {
	case len(r.ClusterNodes) > 0:
		mode = "cluster"
	case r.SentinelMaster != "":
		mode = "sentinel, master " + r.SentinelMaster
	}
	fmt.Fprintf(out, "  mode: %s\n  addresses: %s\n", mode, strings.Join(opt.InitAddress, ", "))
	fmt.Fprintf(out, "  username: %s\n  password: %s\n  database: %d\n  tls: %v\n  timeout: %v\n  connect-timeout: %v\n  client-name: %s\n",
		orNone(opt.Username), mask(opt.Password), opt.SelectDB, opt.TLSConfig != nil, orDefault(opt.ConnWriteTimeout.String(), opt.ConnWriteTimeout == 0),
		orDefault(opt.Dialer.Timeout.String(), opt.Dialer.Timeout == 0), orNone(opt.ClientName))
}

func usesRedis(s config.RateLimitSettings) bool {
	if len(s.Policies) == 0 {
		return s.Backend == config.BackendRedis
	}
	for _, p := range s.Policies {
		if p.Backend == config.BackendRedis {
			return true
		}
	}
	return false
}

func printPolicy(out io.Writer, p config.PolicySettings) {
	where := "backend " + p.Backend
	if p.Backend == config.BackendRedis {
		where += fmt.Sprintf(", key-prefix %s, failure-policy %s\n      redis: %s", p.KeyPrefix, p.FailurePolicy, describeRedis(p.Redis))
	}
	if p.Backend == config.BackendRedis && p.Redis.Quota.Enabled {
		q := p.Redis.Quota
		where += fmt.Sprintf("\n      quota: duration-ms %s, max-share %g (leases of a hot key's budget, admitted in process)",
			yamlx.FormatDuration(q.Duration, "ms"), q.MaxShare)
	}
	if p.Shadow {
		where += "\n      shadow: true (decided and counted, every request admitted)"
	}
	if p.Previous != (redstream.Spec{}) {
		prev := config.PolicySettings{Algorithm: p.Previous.Algorithm, Window: p.Previous.Window, Limit: p.Previous.Limit,
			Capacity: p.Previous.Capacity, RatePerSecond: p.Previous.Rate}
		where += fmt.Sprintf("\n      previous: %s; carry %s (each key's state under it seeds its new key once)", spec(prev), p.Carry)
	}
	if len(p.Limits) == 0 {
		fmt.Fprintf(out, "    %s: %s; %s\n", p.Name, spec(p), where)
		return
	}
	fmt.Fprintf(out, "    %s: all of (all-or-nothing); %s\n", p.Name, where)
	for _, l := range p.Limits {
		fmt.Fprintf(out, "      %s: %s\n", l.Name, spec(l))
	}
}

func spec(p config.PolicySettings) string {
	if row, err := core.Lookup(string(p.Algorithm)); err == nil && row.Shape == core.Bucket {
		return fmt.Sprintf("%s, capacity %g, rate-per-second %g", p.Algorithm, p.Capacity, p.RatePerSecond)
	}
	return fmt.Sprintf("%s, window-ms %d, limit %d", p.Algorithm, p.Window.Milliseconds(), p.Limit)
}

// describeRedis writes a Redis policy's settings in one line: "timeout-ms 100, breaker
// {failures 3, ...}, java-compatible false, local-denials true".
func describeRedis(r config.RedisLimiterSettings) string {
	var b strings.Builder
	if r.Timeout < 0 {
		b.WriteString("timeout-ms -1 (the caller's context)")
	} else {
		fmt.Fprintf(&b, "timeout-ms %d", r.Timeout.Milliseconds())
	}
	br := r.Breaker
	if br.Disabled {
		b.WriteString(", breaker disabled")
	} else {
		fmt.Fprintf(&b, ", breaker {failures %d, error-rate %g, min-calls %d, window-ms %d, cool-down-ms %d, probes %d}",
			br.Failures, br.ErrorRate, br.MinCalls, br.Window.Milliseconds(), br.CoolDown.Milliseconds(), br.Probes)
	}
	fmt.Fprintf(&b, ", java-compatible %v, local-denials %v", r.JavaCompatible, r.LocalDenials)
	return b.String()
}

func printSettings(out io.Writer, settings []yamlx.Setting) {
	for _, s := range settings {
		fmt.Fprintf(out, "  %s: %s\n", s.Key, s.Value)
	}
}

func mask(s string) string {
	if s == "" {
		return "(none)"
	}
	return "(set, hidden)"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func orDefault(s string, isDefault bool) string {
	if isDefault {
		return "(rueidis default)"
	}
	return s
}
