package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/console"
	"github.com/redstream-go/redstream/redisbackend"
	"github.com/redstream-go/redstream/stream"
)

func init() {
	registerCommand(command{
		name:    "console",
		summary: "operator web console: console --redis host:port [--config FILE] [--listen 127.0.0.1:8080], or console --demo",
		run:     runConsole,
	})
}

const consoleUsage = `usage: redstream console --redis host:port [flags]
       redstream console --cluster host:port,host:port [flags]
       redstream console --demo [flags]

Serves the operator console (topics, groups, consumers, pending entries, dead letters with
replay, delete and purge, and the state of rate-limit keys) over HTTP. It has no
authentication of its own: keep --listen on loopback, or put it behind an authenticating
proxy, or use --read-only.

--config FILE reads the application's configuration file (YAML or .properties, as
redstream config check does): the limits page shows the Redis limiters of its
redis-streaming.ratelimit section, and its redis-stream section is the stream
configuration (env isolation, consumer timeout, trimming; --env and --consumer-timeout
override it). The connection comes from --redis or --cluster.

--demo serves it over an embedded Redis emulator with sample traffic (a producer, a handler
that fails some orders, a poison entry, rate limiters with requests), so it runs with no
Redis installed.

flags:
`

// consoleReady, when set (by tests), receives the console's URL once it listens.
var consoleReady func(url string)

func runConsole(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, consoleUsage); fs.PrintDefaults() }
	addr := fs.String("redis", "", "Redis address host:port (default 127.0.0.1:6379 unless --cluster or --demo)")
	cluster := fs.String("cluster", "", "Redis Cluster seed addresses, comma-separated")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address")
	readOnly := fs.Bool("read-only", false, "show everything, change nothing (no replay, delete, purge or key reset)")
	prefix := fs.String("prefix", "/", "path the console is served under, e.g. /ops/streams")
	demoMode := fs.Bool("demo", false, "serve over an embedded Redis emulator with sample traffic")
	topics := fs.String("topics", "", "topics to show, comma-separated (default: every stream key found by SCAN)")
	env := fs.String("env", "", "environment suffix, when producers use env isolation (applies to --topics)")
	consumerTimeout := fs.Duration("consumer-timeout", stream.Config{}.WithDefaults().ConsumerTimeout,
		"the consumers' ConsumerTimeout, to mark the consumers housekeeping will remove (negative: disabled)")
	timeout := fs.Duration("timeout", console.DefaultTimeout, "bound of each Redis call")
	cfgFile := fs.String("config", "", "application config file (YAML or .properties): its Redis rate limiters and redis-stream settings")
	profiles := fs.String("profile", "", "active profiles of --config, comma-separated (default: SPRING_PROFILES_ACTIVE, else the file's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() > 0 {
		return fmt.Errorf("console: unexpected arguments %q", fs.Args())
	}
	modes := 0
	for _, set := range []bool{*addr != "", *cluster != "", *demoMode} {
		if set {
			modes++
		}
	}
	if !strings.HasPrefix(*prefix, "/") {
		return fmt.Errorf("console: --prefix %q must start with '/'", *prefix)
	}
	if modes > 1 {
		return errors.New("console: give one of --redis, --cluster and --demo")
	}
	if *cfgFile != "" && *demoMode {
		return errors.New("console: --config needs --redis or --cluster (the demo has its own limiters)")
	}
	if *profiles != "" && *cfgFile == "" {
		return errors.New("console: --profile needs --config")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := stream.Config{EnvIsolation: *env != "", Env: *env, ConsumerTimeout: *consumerTimeout}
	var (
		client   rueidis.Client
		limiters map[string]redstream.Limiter
	)
	switch {
	case *demoMode:
		cl, demoCfg, demoLimiters, stopDemo, err := startConsoleDemo(ctx, out)
		if err != nil {
			return fmt.Errorf("console: demo: %w", err)
		}
		defer stopDemo()
		client, cfg, limiters = cl, demoCfg, demoLimiters
	default:
		seeds := []string{*addr}
		if *cluster != "" {
			seeds = splitList(*cluster)
		} else if *addr == "" {
			seeds = []string{"127.0.0.1:6379"}
		}
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: seeds, DisableCache: true})
		if err != nil {
			return fmt.Errorf("console: connect %s: %w", strings.Join(seeds, ","), err)
		}
		defer cl.Close()
		client = cl
		if *cfgFile != "" {
			app, lims, err := consoleConfig(*cfgFile, splitList(*profiles), cl, out)
			if err != nil {
				return err
			}
			limiters = lims
			cfg = app.Stream
			if set["env"] {
				cfg.EnvIsolation, cfg.Env = *env != "", *env
			}
			if set["consumer-timeout"] {
				cfg.ConsumerTimeout = *consumerTimeout
			}
		}
	}
	con, err := console.New(console.Options{
		Client:   client,
		Stream:   cfg,
		Topics:   splitList(*topics),
		Prefix:   *prefix,
		ReadOnly: *readOnly,
		Timeout:  *timeout,
		Limiters: limiters,
		Logger:   slog.New(slog.NewTextHandler(out, nil)),
	})
	if err != nil {
		return err
	}
	mount := strings.TrimRight(*prefix, "/") + "/"
	mux := http.NewServeMux()
	mux.Handle(mount, con)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("console: listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	url := "http://" + ln.Addr().String() + mount
	fmt.Fprintf(out, "redstream console at %s (Ctrl-C stops)\n", url)
	if host, _, _ := net.SplitHostPort(*listen); !*readOnly && !isLoopback(host) {
		fmt.Fprintf(out, "warning: %s is not a loopback address and the console has no authentication: "+
			"whoever reaches it can replay, delete and purge dead letters and reset rate-limit keys (use --read-only or a proxy that authenticates)\n", *listen)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if consoleReady != nil {
		consoleReady(url)
	}
	select {
	case err := <-served:
		return fmt.Errorf("console: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	fmt.Fprintln(out, "console stopped")
	return nil
}

// consoleConfig reads the application's configuration file with client as its Redis
// client, and returns it with the limiters the console shows: those of the
// redis-streaming.ratelimit section with the redis backend. A memory policy keeps its state
// in each application process, which the console cannot see: it is left out, and said so.
func consoleConfig(file string, profiles []string, client rueidis.Client, out io.Writer) (*config.Config, map[string]redstream.Limiter, error) {
	opts := config.Options{Redis: client, Logger: slog.New(slog.NewTextHandler(out, nil))}
	if profiles != nil {
		opts.Profiles = profiles
	}
	app, err := config.FromConfig(file, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("console: --config: %w", err)
	}
	rl := app.RateLimit
	backend := map[string]string{}
	if len(rl.Settings.Policies) == 0 {
		backend[rl.DefaultName] = rl.Settings.Backend
	}
	for _, p := range rl.Settings.Policies {
		backend[p.Name] = p.Backend
	}
	limiters := map[string]redstream.Limiter{}
	for _, name := range rl.Registry.Names() {
		l, _ := rl.Registry.Get(name)
		if backend[name] != config.BackendRedis {
			fmt.Fprintf(out, "console: limiter %q uses the %s backend: its state lives in each application process, so the console does not show it\n",
				name, backend[name])
			continue
		}
		limiters[name] = l
	}
	if !rl.Settings.Enabled {
		fmt.Fprintf(out, "console: %s is not enabled in %s: no limiter to show\n", config.RateLimitPath, file)
	}
	return app, limiters, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type consoleOrder struct {
	ID       int64  `json:"orderId"`
	Customer string `json:"customer"`
	Amount   int64  `json:"amountCents"`
	Status   string `json:"status"`
}

// startConsoleDemo starts the embedded Redis emulator with sample traffic that runs until ctx
// ends: orders produced every 400 ms; group "billing" fails every fourth order ("payment
// declined"), which is dead-lettered after 3 deliveries; group "shipping" handles them all;
// an undecodable "emails" entry becomes a poison dead letter; and a consumer name left
// behind by a crashed process waits for housekeeping. Two rate limiters get requests: "api"
// (a token bucket per customer, hit by every order) and "login" (a multi-limit of a burst
// and an hourly window, hit by ada's sign-ins every other order).
// The returned stop ends the traffic and closes the client and the emulator.
func startConsoleDemo(ctx context.Context, out io.Writer) (rueidis.Client, stream.Config, map[string]redstream.Limiter, func(), error) {
	cfg := stream.Config{
		BlockTimeout:    100 * time.Millisecond,
		MaxDeliveries:   3,
		ConsumerTimeout: 2 * time.Minute,
		Autoclaim:       stream.AutoclaimConfig{MinIdle: 300 * time.Millisecond, Interval: 100 * time.Millisecond},
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, cfg, nil, nil, err
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		mr.Close()
		return nil, cfg, nil, nil, err
	}
	fail := func(err error) (rueidis.Client, stream.Config, map[string]redstream.Limiter, func(), error) {
		client.Close()
		mr.Close()
		return nil, cfg, nil, nil, err
	}
	api, err := redisbackend.NewLimiter(client, redstream.TokenBucket(20, 2), redisbackend.Options{KeyPrefix: "demo:api"})
	if err != nil {
		return fail(err)
	}
	login, err := redstream.Multi(func(specs []redstream.Spec) (redstream.Limiter, error) {
		return redisbackend.NewMultiLimiter(client, specs, redisbackend.Options{KeyPrefix: "demo:login"})
	}, redstream.Rule{Name: "burst", Spec: redstream.TokenBucket(5, 1.0/60)},
		redstream.Rule{Name: "hourly", Spec: redstream.FixedWindow(time.Hour, 30)})
	if err != nil {
		return fail(err)
	}
	limiters := map[string]redstream.Limiter{"api": api, "login": login}
	consumer, err := stream.NewConsumer(client, cfg)
	if err != nil {
		return fail(err)
	}
	err = stream.Register(consumer, stream.Handler[consoleOrder]{
		Topic: "orders", Group: "billing", Concurrency: 2,
		Handle: func(ctx context.Context, m *stream.Message[consoleOrder]) error {
			if m.Body.ID%4 == 0 {
				return fmt.Errorf("payment declined for order %d: card expired", m.Body.ID)
			}
			return nil
		},
	})
	if err == nil {
		err = stream.Register(consumer, stream.Handler[consoleOrder]{
			Topic: "orders", Group: "shipping",
			Handle: func(ctx context.Context, m *stream.Message[consoleOrder]) error {
				return nil
			},
		})
	}
	if err == nil {
		err = stream.Register(consumer, stream.Handler[map[string]any]{
			Topic: "emails", Group: "mailer",
			Handle: func(ctx context.Context, m *stream.Message[map[string]any]) error { return nil },
		})
	}
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	producer, err := stream.NewProducer(client, cfg)
	if err != nil {
		cancel()
		return fail(err)
	}
	if err := consumer.Start(ctx); err != nil {
		cancel()
		return fail(err)
	}
	// A poison entry (its body is not JSON) and a consumer name left by a crashed process.
	_ = client.Do(ctx, client.B().Xadd().Key("emails").Id("*").FieldValue().
		FieldValue("key", "welcome-42").FieldValue("enc", "plain").
		FieldValue("body", `<script>alert("not JSON")</script>`).Build()).Error()
	_ = client.Do(ctx, client.B().XgroupCreateconsumer().Key("orders").Group("billing").Consumer("crashed-worker-7").Build()).Error()
	done := make(chan struct{})
	go func() {
		defer close(done)
		customers := []string{"ada", "grace", "linus", "margaret", "ken"}
		tick := time.NewTicker(400 * time.Millisecond)
		defer tick.Stop()
		for id := int64(1); ; id++ {
			msg := stream.Message[consoleOrder]{Key: fmt.Sprintf("order-%d", id),
				Body: consoleOrder{ID: id, Customer: customers[id%int64(len(customers))], Amount: 1000 + id*37%5000, Status: "CREATED"}}
			if _, err := producer.Send(ctx, "orders", msg); err != nil && ctx.Err() == nil {
				fmt.Fprintln(out, "demo producer:", err)
			}
			// The API gateway's limiter sees each order's customer; ada signs in often.
			_, _ = api.AllowN(ctx, "customer:"+msg.Body.Customer, time.Time{}, 1)
			if id%2 == 0 {
				_, _ = login.AllowN(ctx, "ada@example.com", time.Time{}, 1)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	fmt.Fprintln(out, "demo: embedded Redis emulator with topics orders (groups billing, shipping) and emails;"+
		" billing fails every fourth order, which becomes a dead letter after 3 deliveries;"+
		" rate limiters api (per customer) and login (ada@example.com) get requests")
	stop := func() {
		cancel()
		<-done
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = consumer.Close(cctx)
		ccancel()
		client.Close()
		mr.Close()
	}
	return client, cfg, limiters, stop, nil
}
