package config_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/cache"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/yamlx"
	"github.com/redstream-go/redstream/stream"
)

var quiet = config.Options{Logger: slog.New(slog.DiscardHandler)}

// TestAllSections loads the file that configures every component and checks each section.
func TestAllSections(t *testing.T) {
	cfg, err := config.FromConfig("testdata/all.yaml", quiet)
	if err != nil {
		t.Fatalf("FromConfig: %v", err)
	}
	if got, want := cfg.RateLimit.Registry.Names(), []string{"api1", "api2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ratelimit registry = %v, want %v", got, want)
	}
	if cfg.RateLimit.DefaultName != "api1" || cfg.RateLimit.Settings.KeyPrefix != "all:rl" {
		t.Errorf("ratelimit default %q, key-prefix %q; want api1, all:rl", cfg.RateLimit.DefaultName, cfg.RateLimit.Settings.KeyPrefix)
	}

	wantStream := stream.Config{
		EnvIsolation: true, Env: "test", ReadCount: 20, BlockTimeout: 100 * time.Millisecond, MaxDeliveries: 5,
		Autoclaim: stream.AutoclaimConfig{MinIdle: 30000 * time.Millisecond, Interval: 15000 * time.Millisecond},
		Trim:      stream.TrimConfig{MaxLen: 50000, Interval: 60000 * time.Millisecond},
	}.WithDefaults() // keys the file leaves out are at their defaults
	if !reflect.DeepEqual(cfg.Stream, wantStream) {
		t.Errorf("Stream = %+v, want %+v", cfg.Stream, wantStream)
	}

	wantCache := cache.DefaultConfig()
	wantCache.KeyPrefix = "all:cache:"
	wantCache.EnvIsolation, wantCache.Env = true, "test"
	wantCache.DefaultTTL, wantCache.NullTTL = 600*time.Second, 30*time.Second
	wantCache.JitterRatio = 0.2
	wantCache.SlidingExpiration = true
	wantCache.Breakdown = cache.BreakdownConfig{Enabled: true, LockTTL: 5 * time.Second, WaitTimeout: time.Second, WaitInterval: 20 * time.Millisecond}
	if !reflect.DeepEqual(cfg.Cache, wantCache) {
		t.Errorf("Cache = %+v, want %+v", cfg.Cache, wantCache)
	}
}

// TestSectionsAbsent: a file without redis-stream and redis-cache gets their defaults.
func TestSectionsAbsent(t *testing.T) {
	for name, doc := range map[string]string{
		"empty":      "",
		"other only": "spring:\n  application:\n    name: app\n",
		"null":       "redis-stream:\nredis-cache: ~\n",
		"empty maps": "redis-stream: {}\nredis-cache: {}\n",
		"ratelimit":  "redis-streaming.ratelimit.enabled: true\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := load(t, doc, quiet)
			if !reflect.DeepEqual(cfg.Stream, stream.Config{}.WithDefaults()) {
				t.Errorf("Stream = %+v, want stream's defaults", cfg.Stream)
			}
			if !reflect.DeepEqual(cfg.Cache, cache.DefaultConfig()) {
				t.Errorf("Cache = %+v, want cache.DefaultConfig()", cfg.Cache)
			}
		})
	}
}

// TestSectionNamesRelaxed: section names and keys bind as Spring binds them.
func TestSectionNamesRelaxed(t *testing.T) {
	tests := []struct {
		name, doc string
		readCount int
		prefix    string
		sliding   bool
		blockMs   time.Duration // stream.Config{}.WithDefaults().BlockTimeout when absent
	}{
		{"kebab", "redis-stream:\n  read-count: 5\nredis-cache:\n  key-prefix: \"p:\"\n", 5, "p:", false, stream.Config{}.WithDefaults().BlockTimeout},
		{"camel", "redisStream:\n  readCount: 6\nredisCache:\n  keyPrefix: \"q:\"\n  slidingExpireEnabled: true\n", 6, "q:", true, stream.Config{}.WithDefaults().BlockTimeout},
		{"snake", "redis_stream:\n  read_count: 7\nredis_cache:\n  key_prefix: \"r:\"\n", 7, "r:", false, stream.Config{}.WithDefaults().BlockTimeout},
		{"upper", "REDIS-STREAM:\n  READ-COUNT: 8\nREDIS_CACHE:\n  KEY_PREFIX: \"s:\"\n", 8, "s:", false, stream.Config{}.WithDefaults().BlockTimeout},
		{"dotted", "redis-stream.read-count: 9\nredis-cache.key-prefix: \"t:\"\nredis-cache.sliding-expire-enabled: true\n", 9, "t:", true, stream.Config{}.WithDefaults().BlockTimeout},
		{"dotted and nested", "redisStream.readCount: 10\nredis-stream:\n  block-ms: 60\nredis-cache:\n  key-prefix: \"u:\"\n", 10, "u:", false, 60 * time.Millisecond},
		{"two spellings merge", "redis-stream:\n  read-count: 12\nredisStream:\n  blockMs: 50\nredis-cache:\n  key-prefix: \"w:\"\n", 12, "w:", false, 50 * time.Millisecond},
		{"anchors", "base: &b\n  read-count: 11\nredis-stream:\n  <<: *b\nredis-cache:\n  key-prefix: \"v:\"\n", 11, "v:", false, stream.Config{}.WithDefaults().BlockTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := load(t, tt.doc, quiet)
			if cfg.Stream.ReadCount != tt.readCount {
				t.Errorf("Stream.ReadCount = %d, want %d", cfg.Stream.ReadCount, tt.readCount)
			}
			if cfg.Cache.KeyPrefix != tt.prefix || cfg.Cache.SlidingExpiration != tt.sliding {
				t.Errorf("Cache.KeyPrefix, SlidingExpiration = %q, %v; want %q, %v", cfg.Cache.KeyPrefix, cfg.Cache.SlidingExpiration, tt.prefix, tt.sliding)
			}
			if cfg.Stream.BlockTimeout != tt.blockMs {
				t.Errorf("Stream.BlockTimeout = %v, want %v", cfg.Stream.BlockTimeout, tt.blockMs)
			}
			if cfg.Cache.DefaultTTL != cache.DefaultConfig().DefaultTTL {
				t.Errorf("Cache.DefaultTTL = %v, want the default %v", cfg.Cache.DefaultTTL, cache.DefaultConfig().DefaultTTL)
			}
		})
	}
}

// TestSectionErrors: a bad value in any section is an error naming its path and line.
func TestSectionErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      string
	}{
		{
			"ratelimit limit", "redis-stream:\n  read-count: 5\nredis-streaming:\n  ratelimit:\n    enabled: true\n    limit: -1\n",
			"config: redis-streaming.ratelimit.limit (line 6): limit = -1, want in [1, 1099511627776]",
		},
		{
			"stream not an integer", "redis-stream:\n  read-count: many\n",
			`config: redis-stream.read-count (line 2): must be an integer, got "many"`,
		},
		{
			"stream negative", "# comment\nredis-stream:\n  block-ms: 10\n  read-count: -1\n",
			"config: redis-stream.read-count (line 4): got -1, want a positive count (0 for the default 10)",
		},
		{
			"stream dotted", "redis-stream.max-retry: -2\n",
			"config: redis-stream.max-retry (line 1): got -2, want a positive count (0 for the default 3)",
		},
		{
			"stream negative camel", "redisStream:\n  autoclaim:\n    minIdleMs: -5\n",
			"config: redis-stream.autoclaim.min-idle-ms (line 3): got -5, want a positive number of milliseconds",
		},
		{
			"stream bad mode", "redis-stream:\n  trim:\n    maxlen: 10\n    mode: sometimes\n",
			`config: redis-stream.trim.mode (line 4): got "sometimes", want "safe", "maxlen" or "off"`,
		},
		{
			"stream unknown key", "redis-stream:\n  read-count: 5\n  reed-count: 6\n",
			"config: redis-stream.reed-count (line 3): unknown key (did you mean read-count?)",
		},
		{
			"stream not a mapping", "redis-stream: 5\n",
			`config: redis-stream (line 1): must be a mapping, got "5"`,
		},
		{
			"cache bad bool", "redis-cache:\n  breakdown:\n    enabled: maybe\n",
			`config: redis-cache.breakdown.enabled (line 3): must be true or false, got "maybe"`,
		},
		{
			"cache jitter", "redisCache:\n  jitterRatio: 1.5\n",
			"config: redis-cache.jitter-ratio (line 2): must be in [0, 1), got 1.5",
		},
		{
			"cache ttl", "redis-cache:\n  key-prefix: x\n  default-ttl-seconds: 0\n",
			"config: redis-cache.default-ttl-seconds (line 3): must be positive, got 0s",
		},
		{
			"cache unknown key", "redis-cache:\n  ttl: 5\n",
			"config: redis-cache.ttl (line 2): unknown key (known keys: breakdown, breaker, client-side-cache, default-ttl-seconds, eager-refresh, env, env-isolation, fail-safe, jitter-ratio, key-prefix, load-hard-timeout-ms, load-soft-timeout-ms, name, null-ttl-seconds, on-redis-error, sliding-expire-enabled, timeout-ms)",
		},
		{
			"cache empty name", "redis-cache:\n  key-prefix: x\n  name: \"\"\n",
			"config: redis-cache.name (line 3): must not be empty",
		},
		{
			// Two spellings of one section merge (as Spring binds them); one key set in both
			// is an error.
			"key set in two spellings of the section", "redis-cache:\n  env: a\nredisCache:\n  env: b\n",
			"config: redisCache.env (line 4): is set twice (also at line 2)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load([]byte(tt.doc), quiet)
			if err == nil {
				t.Fatalf("Load succeeded, want error %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q\nwant    %q", err, tt.want)
			}
			var ye *yamlx.Error
			if !errors.As(err, &ye) || ye.Line == 0 {
				t.Errorf("error %v is not a *yamlx.Error with a line", err)
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("errors.Is(err, ErrInvalidConfig) = false, want true")
			}
		})
	}
}

// TestBuildersNeedClient: without Options.Redis the builders say so.
func TestBuildersNeedClient(t *testing.T) {
	cfg := load(t, "", quiet)
	for name, build := range map[string]func() error{
		"NewCache":    func() error { _, err := cfg.NewCache(); return err },
		"NewProducer": func() error { _, err := cfg.NewProducer(); return err },
		"NewConsumer": func() error { _, err := cfg.NewConsumer(); return err },
	} {
		if err := build(); !errors.Is(err, config.ErrNoClient) {
			t.Errorf("%s error = %v, want ErrNoClient", name, err)
		}
	}
}

type order struct {
	ID int `json:"id"`
}

// TestAllSectionsOnRedis builds every component from one file against a real Redis and
// uses each once.
func TestAllSectionsOnRedis(t *testing.T) {
	client := redistest.Client(t)
	ctx := context.Background()
	opts := quiet
	opts.Redis = client
	cfg, err := config.FromConfig("testdata/all.yaml", opts)
	if err != nil {
		t.Fatalf("FromConfig: %v", err)
	}

	// Rate limiting: api1 admits 10 per second, on Redis.
	now := time.Now()
	key := "user:" + now.Format(time.RFC3339Nano)
	for i := range 11 {
		d, err := cfg.RateLimit.Default.AllowN(ctx, key, now, 1)
		if err != nil {
			t.Fatalf("AllowAt: %v", err)
		}
		if want := i < 10; d.Allowed != want {
			t.Fatalf("request %d allowed = %v, want %v", i+1, d.Allowed, want)
		}
	}

	// Cache: a load, then a hit, under the configured prefix and env.
	c, err := cfg.NewCache()
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	defer c.Close()
	if got, want := c.Key("k"), "all:cache:test:k"; got != want {
		t.Errorf("cache key = %q, want %q", got, want)
	}
	loads := 0
	loader := func(context.Context) (string, error) { loads++; return "v", nil }
	for range 2 {
		v, err := cache.GetOrLoad(ctx, c, "k-"+key, cache.DefaultTTL, loader)
		if err != nil || v != "v" {
			t.Fatalf("GetOrLoad = %q, %v; want v, nil", v, err)
		}
	}
	if st := c.Stats(); loads != 1 || st.Hits != 1 {
		t.Errorf("loads = %d, hits = %d; want 1, 1", loads, st.Hits)
	}
	if ttl, err := client.Do(ctx, client.B().Pttl().Key(c.Key("k-"+key)).Build()).AsInt64(); err != nil || ttl <= 0 || ttl > 720_000 {
		t.Errorf("PTTL = %d, %v; want in (0, 600s * 1.2]", ttl, err)
	}

	// Stream: a producer and a consumer on the configured env-isolated stream.
	topic := "config-all-" + now.Format("150405.000000000")
	consumer, err := cfg.NewConsumer()
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	got := make(chan int, 1)
	err = stream.Register(consumer, stream.Handler[order]{
		Topic: topic, Group: "g",
		Handle: func(ctx context.Context, msg *stream.Message[order]) error {
			got <- msg.Body.ID
			return nil
		},
	})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := consumer.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		if err := consumer.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	producer, err := cfg.NewProducer()
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	if _, err := producer.Send(ctx, topic, stream.NewMessage(order{ID: 42})); err != nil {
		t.Fatalf("Send: %v", err)
	}
	select {
	case id := <-got:
		if id != 42 {
			t.Errorf("consumed id %d, want 42", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer received nothing in 10s")
	}
	if n, err := client.Do(ctx, client.B().Xlen().Key(topic+"_test").Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("XLEN %s_test = %d, %v; want 1 (env isolation)", topic, n, err)
	}
	if !strings.HasPrefix(consumer.Stats().Consumer, "consumer-") {
		t.Errorf("consumer name %q, want a generated consumer-... name", consumer.Stats().Consumer)
	}
}

// TestCacheServingKeys: the fail-safe, load timeout and eager refresh keys of redis-cache
// bind onto cache.Config, -ms keys as durations.
func TestCacheServingKeys(t *testing.T) {
	doc := "redis-cache:\n  fail-safe:\n    enabled: true\n    max-staleness-ms: 60000\n    throttle-ms: 250\n    max-entries: 500\n" +
		"  load-soft-timeout-ms: 50\n  load-hard-timeout-ms: 2000\n  eager-refresh: 0.8\n"
	cfg, err := config.Load([]byte(doc), quiet)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Cache
	fs := c.FailSafe
	if !fs.Enabled || fs.MaxStaleness != time.Minute || fs.Throttle != 250*time.Millisecond || fs.MaxEntries != 500 {
		t.Errorf("FailSafe = %+v, want enabled, 1m, 250ms, 500", fs)
	}
	if c.LoadSoftTimeout != 50*time.Millisecond || c.LoadHardTimeout != 2*time.Second || c.EagerRefresh != 0.8 {
		t.Errorf("LoadSoftTimeout %v, LoadHardTimeout %v, EagerRefresh %v; want 50ms, 2s, 0.8", c.LoadSoftTimeout, c.LoadHardTimeout, c.EagerRefresh)
	}
	_, err = config.Load([]byte("redis-cache:\n  load-soft-timeout-ms: 50\n"), quiet)
	if err == nil || !strings.Contains(err.Error(), "redis-cache.load-soft-timeout-ms (line 2)") {
		t.Errorf("a soft timeout without fail-safe: %v, want an error at its line", err)
	}
}
