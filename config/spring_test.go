package config_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/internal/redistest"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// loadTwins loads testdata/spring/application.yml and its .properties twin with opts and
// checks that they load identically.
func loadTwins(t *testing.T, opts config.Options) *config.Config {
	t.Helper()
	y, err := config.FromConfig("testdata/spring/application.yml", opts)
	if err != nil {
		t.Fatalf("application.yml: %v", err)
	}
	p, err := config.FromConfig("testdata/spring/application.properties", opts)
	if err != nil {
		t.Fatalf("application.properties: %v", err)
	}
	for _, c := range []struct {
		what string
		a, b any
	}{
		{"Profiles", y.Profiles, p.Profiles},
		{"RateLimit.Settings", y.RateLimit.Settings, p.RateLimit.Settings},
		{"RateLimit.DefaultName", y.RateLimit.DefaultName, p.RateLimit.DefaultName},
		{"Registry", y.RateLimit.Registry.Names(), p.RateLimit.Registry.Names()},
		{"Stream", y.Stream, p.Stream},
		{"Cache", y.Cache, p.Cache},
		{"Redis", y.Redis, p.Redis},
	} {
		if !reflect.DeepEqual(c.a, c.b) {
			t.Errorf("%s differs:\nyml        %+v\nproperties %+v", c.what, c.a, c.b)
		}
	}
	return y
}

// TestSpringBootFile reads a Spring Boot application.yml (placeholders, two profile
// documents, spring.data.redis) and its application.properties twin as Spring does.
func TestSpringBootFile(t *testing.T) {
	type want struct {
		profiles            string
		backend             string
		apiLimit            int64
		cacheTTL            time.Duration
		readCount           int
		env, host, clientNm string
		port, db            int
	}
	tests := []struct {
		name string
		opts config.Options
		want want
	}{
		{"no environment: spring.profiles.active defaults to dev", config.Options{Getenv: envOf(nil)},
			want{"[dev]", "memory", 10, time.Minute, 10, "dev", "localhost", "orders-dev", 6379, 1}},
		{"APP_ENV=prod selects the prod document", config.Options{Getenv: envOf(map[string]string{
			"APP_ENV": "prod", "REDIS_HOST": "10.1.2.3", "REDIS_PORT": "6390", "API_LIMIT": "5"})},
			want{"[prod]", "redis", 1000, time.Hour, 50, "prod", "10.1.2.3", "orders-prod", 6390, 2}},
		{"SPRING_PROFILES_ACTIVE wins over the file", config.Options{Getenv: envOf(map[string]string{
			"SPRING_PROFILES_ACTIVE": "prod", "API_LIMIT": "5"})},
			want{"[prod]", "redis", 1000, time.Hour, 50, "dev", "localhost", "orders-dev", 6379, 2}},
		{"Options.Profiles wins over the environment", config.Options{Profiles: []string{"dev"}, Getenv: envOf(map[string]string{
			"SPRING_PROFILES_ACTIVE": "prod", "APP_ENV": "prod", "API_LIMIT": "5"})},
			want{"[dev]", "memory", 5, time.Minute, 10, "prod", "localhost", "orders-prod", 6379, 1}},
		{"a profile without a document", config.Options{Profiles: []string{"staging"}, Getenv: envOf(nil)},
			want{"[staging]", "redis", 10, time.Hour, 10, "dev", "localhost", "orders-dev", 6379, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Logger = quiet.Logger
			c := loadTwins(t, tt.opts)
			w := tt.want
			s := c.RateLimit.Settings
			got := want{fmt.Sprint(c.Profiles), s.Backend, s.Policies[0].Limit, c.Cache.DefaultTTL, c.Stream.ReadCount,
				c.Stream.Env, c.Redis.Host, c.Redis.ClientName, c.Redis.Port, c.Redis.Database}
			if got != w {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
			if s.KeyPrefix != "orders:rl" || s.Policies[0].KeyPrefix != "orders:rl:api" || c.Cache.KeyPrefix != "orders:cache:" {
				t.Errorf("key prefixes %q, %q, %q: the ${spring.application.name} placeholders", s.KeyPrefix, s.Policies[0].KeyPrefix, c.Cache.KeyPrefix)
			}
			if c.Redis.Timeout != 2*time.Second || c.Redis.Password != "" || !c.Redis.Set || c.Redis.Path != "spring.data.redis" {
				t.Errorf("redis settings %+v", c.Redis)
			}
			if !c.Stream.EnvIsolation || c.Stream.BlockTimeout != 500*time.Millisecond {
				t.Errorf("stream %+v", c.Stream)
			}
		})
	}
}

// TestPlaceholdersAndProfiles: the rules of placeholder resolution and profile selection.
func TestPlaceholdersAndProfiles(t *testing.T) {
	env := envOf(map[string]string{"NAME": "env-name", "SPRING_DATA_REDIS_HOST": "from-env", "EMPTY": ""})
	tests := []struct {
		name, doc string
		profiles  []string
		want      string // cache key-prefix
	}{
		{"environment", "redis-cache.key-prefix: ${NAME}\n", nil, "env-name"},
		{"default", "redis-cache.key-prefix: ${MISSING:dflt}\n", nil, "dflt"},
		{"empty default", "redis-cache.key-prefix: \"a${MISSING:}b\"\n", nil, "ab"},
		{"empty variable is set", "redis-cache.key-prefix: \"a${EMPTY:x}b\"\n", nil, "ab"},
		{"default with colons", "redis-cache.key-prefix: ${MISSING:redis://h:1}\n", nil, "redis://h:1"},
		{"nested default", "redis-cache.key-prefix: ${MISSING:${NAME}}\n", nil, "env-name"},
		{"file key", "app.prefix: p1\nredis-cache.key-prefix: ${app.prefix}:x\n", nil, "p1:x"},
		{"file key relaxed", "app:\n  cachePrefix: p2\nredis-cache.key-prefix: ${app.cache-prefix}\n", nil, "p2"},
		{"env form of a property", "spring.data.redis.host: h\nredis-cache.key-prefix: ${spring.data.redis.host}\n", nil, "from-env"},
		{"chain through keys", "a: ${b}\nb: ${c:z}\nredis-cache.key-prefix: ${a}\n", nil, "z"},
		{"later document overrides", "redis-cache.key-prefix: base\n---\nredis-cache.key-prefix: later\n", nil, "later"},
		{"profile document", "redis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: p\nredis-cache.key-prefix: p\n", []string{"p"}, "p"},
		{"inactive profile", "redis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: p\nredis-cache.key-prefix: p\n", []string{"q"}, "base"},
		{"profile list", "redis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: [a, p]\nredis-cache.key-prefix: p\n", []string{"p"}, "p"},
		{"profile expression", "redis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: \"prod & !eu\"\nredis-cache.key-prefix: p\n", []string{"prod", "eu"}, "base"},
		{"profile expression holds", "redis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: \"(prod | stage) & !eu\"\nredis-cache.key-prefix: p\n", []string{"stage"}, "p"},
		{"default profile", "redis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: default\nredis-cache.key-prefix: d\n", nil, "d"},
		{"placeholder sees the active profile's value", "x: base\nredis-cache.key-prefix: ${x}\n---\nspring.config.activate.on-profile: p\nx: prof\n", []string{"p"}, "prof"},
		{"include", "spring.profiles.include: extra\nredis-cache.key-prefix: base\n---\nspring.config.activate.on-profile: extra\nredis-cache.key-prefix: e\n", nil, "e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := load(t, tt.doc, config.Options{Getenv: env, Profiles: tt.profiles, Logger: quiet.Logger})
			if c.Cache.KeyPrefix != tt.want {
				t.Errorf("key-prefix = %q, want %q", c.Cache.KeyPrefix, tt.want)
			}
		})
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unresolvable", "redis-cache.key-prefix: ${NOPE}\n", "config: redis-cache.key-prefix (line 1): could not resolve placeholder ${NOPE}: set the environment variable NOPE, add the key NOPE to the file, or give a default (${NOPE:value})"},
		{"names a mapping", "a: {b: 1}\nx: ${a}\n", "config: x (line 2): placeholder ${a} names a mapping (line 1), not a value"},
		{"legacy spring.profiles", "---\nspring.profiles: prod\nx: 1\n", "config: spring.profiles (line 2): is not read since Spring Boot 2.4; write spring.config.activate.on-profile"},
		{"bad profile expression", "---\nspring.config.activate.on-profile: \"a & \"\n", "config: spring.config.activate.on-profile (line 2): malformed profile expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load([]byte(tc.doc), config.Options{Getenv: env, Logger: quiet.Logger})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant    %s", err, tc.want)
			}
		})
	}
	// Lenient: the legacy key is read as on-profile, with a warning.
	log, logs := logger()
	c := load(t, "redis-cache.key-prefix: base\n---\nspring.profiles: prod\nredis-cache.key-prefix: p\n", config.Options{Lenient: true, Profiles: []string{"prod"}, Logger: log, Getenv: env})
	if c.Cache.KeyPrefix != "p" || !strings.Contains(logs.String(), "read as spring.config.activate.on-profile") {
		t.Errorf("lenient legacy profile: prefix %q, warnings:\n%s", c.Cache.KeyPrefix, logs)
	}
}

// TestSpringRedisConnects builds a client from spring.data.redis and connects it to a real
// redis-server as an ACL user with a password: user, database and client name are the
// file's.
func TestSpringRedisConnects(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := redistest.NewClient(t, srv.Addr)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel0()
	if err := admin.Do(ctx0, admin.B().AclSetuser().Username("app").Rule("on", ">s3cret", "~*", "+@all").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"APP_ENV": "prod", "REDIS_HOST": "127.0.0.1", "REDIS_PORT": strconv.Itoa(srv.Port), "REDIS_USERNAME": "app", "REDIS_PASSWORD": "s3cret"}
	opts := config.Options{Getenv: envOf(env), Logger: quiet.Logger}
	for _, file := range []string{"application.yml", "application.properties"} {
		t.Run(file, func(t *testing.T) {
			cfg, err := config.FromConfig("testdata/spring/"+file, opts)
			if err != nil {
				t.Fatal(err)
			}
			opt, err := cfg.Redis.ClientOption()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(opt.InitAddress) != "[127.0.0.1:"+strconv.Itoa(srv.Port)+"]" || opt.ConnWriteTimeout != 2*time.Second {
				t.Errorf("option %v, write timeout %v", opt.InitAddress, opt.ConnWriteTimeout)
			}
			client, err := rueidis.NewClient(opt)
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			info, err := client.Do(ctx, client.B().ClientInfo().Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(info, " db=2 ") || !strings.Contains(info, " name=orders-prod ") || !strings.Contains(info, " user=app ") {
				t.Errorf("CLIENT INFO = %s; want db=2 (the prod document), name=orders-prod and user=app", info)
			}
			// The Redis limiters of the same file run on that client, in database 2.
			opts2 := opts
			opts2.Redis = client
			cfg, err = config.FromConfig("testdata/spring/"+file, opts2)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := cfg.RateLimit.Default.AllowN(ctx, "user-1", time.Time{}, 1); err != nil || !d.Allowed {
				t.Fatalf("Default.Allow = %+v, %v", d, err)
			}
			keys, err := client.Do(ctx, client.B().Keys().Pattern("orders:rl:api*").Build()).AsStrSlice()
			if err != nil || len(keys) == 0 {
				t.Errorf("no limiter keys under orders:rl:api in database 2: %v, %v", keys, err)
			}
		})
	}
	// A wrong password in the environment fails the connection, as in the Java application.
	env["REDIS_PASSWORD"] = "wrong"
	cfg, err := config.FromConfig("testdata/spring/application.yml", opts)
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := cfg.Redis.ClientOption()
	if c, err := rueidis.NewClient(opt); err == nil {
		c.Close()
		t.Error("a wrong password connected")
	}
}

// TestSpringRedisCluster connects to a real 3-node Redis Cluster through cluster.nodes.
func TestSpringRedisCluster(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	for name, doc := range map[string]string{
		"yaml list":       "spring:\n  data:\n    redis:\n      cluster:\n        nodes:\n          - " + strings.Join(addrs, "\n          - ") + "\n",
		"comma string":    "spring.data.redis.cluster.nodes: " + strings.Join(addrs, ",") + "\n",
		"spring boot 2":   "spring.redis.cluster.nodes: " + strings.Join(addrs, ", ") + "\n",
		"properties list": "",
	} {
		t.Run(name, func(t *testing.T) {
			var cfg *config.Config
			var err error
			if doc == "" {
				var b strings.Builder
				for i, a := range addrs {
					fmt.Fprintf(&b, "spring.data.redis.cluster.nodes[%d]=%s\n", i, a)
				}
				cfg, err = config.LoadProperties([]byte(b.String()), quiet)
			} else {
				cfg, err = config.Load([]byte(doc), quiet)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Redis.ClusterNodes) != len(addrs) {
				t.Fatalf("cluster nodes %v, want %v", cfg.Redis.ClusterNodes, addrs)
			}
			opt, err := cfg.Redis.ClientOption()
			if err != nil {
				t.Fatal(err)
			}
			client, err := rueidis.NewClient(opt)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 20 {
				if err := client.Do(ctx, client.B().Set().Key(fmt.Sprintf("spring-cluster-%d", i)).Value("v").Build()).Error(); err != nil {
					t.Fatalf("SET on the cluster: %v", err)
				}
			}
			if n := len(client.Nodes()); n != 3 {
				t.Errorf("client knows %d nodes, want the cluster's 3", n)
			}
		})
	}
}

// TestRedisSettings: every key of spring.data.redis and spring.redis, and the option built.
func TestRedisSettings(t *testing.T) {
	doc := `spring:
  data:
    redis:
      host: cache.internal
      port: 6380
      username: app
      password: pw
      database: 4
      ssl:
        enabled: true
      timeout: 1500
      connect-timeout: 3s
      client-name: orders
      client-type: lettuce
      lettuce:
        pool:
          max-active: 8
`
	c := load(t, doc, quiet)
	opt, err := c.Redis.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(opt.InitAddress) != "[cache.internal:6380]" || opt.Username != "app" || opt.Password != "pw" || opt.SelectDB != 4 ||
		opt.TLSConfig == nil || opt.TLSConfig.ServerName != "cache.internal" || opt.ConnWriteTimeout != 1500*time.Millisecond ||
		opt.Dialer.Timeout != 3*time.Second || opt.ClientName != "orders" {
		t.Errorf("option = %+v", opt)
	}
	// Spring Boot 2: spring.redis with ssl: true; sentinel.
	c = load(t, "spring:\n  redis:\n    ssl: true\n    password: pw\n    sentinel:\n      master: mymaster\n      nodes: 10.0.0.1:26379, 10.0.0.2\n      password: spw\n", quiet)
	opt, _ = c.Redis.ClientOption()
	if c.Redis.Path != "spring.redis" || fmt.Sprint(opt.InitAddress) != "[10.0.0.1:26379 10.0.0.2:26379]" || opt.Sentinel.MasterSet != "mymaster" ||
		opt.Sentinel.Password != "spw" || opt.Password != "pw" || opt.TLSConfig == nil {
		t.Errorf("sentinel option = %+v", opt)
	}
	// url overrides host, port and credentials.
	c = load(t, "spring.data.redis:\n  url: rediss://u:p@h1:7000/5\n  host: ignored\n", quiet)
	opt, _ = c.Redis.ClientOption()
	if fmt.Sprint(opt.InitAddress) != "[h1:7000]" || opt.Username != "u" || opt.Password != "p" || opt.SelectDB != 5 || opt.TLSConfig == nil {
		t.Errorf("url option = %+v", opt)
	}
	// No section: the zero settings give Spring's default address.
	c = load(t, "", quiet)
	if opt, _ := c.Redis.ClientOption(); c.Redis.Set || fmt.Sprint(opt.InitAddress) != "[localhost:6379]" {
		t.Errorf("no section: %+v, %v", c.Redis, opt.InitAddress)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"port range", "spring.data.redis.port: 70000\n", "config: spring.data.redis.port (line 1): must be in [1, 65535], got 70000"},
		{"port text", "spring.data.redis.port: http\n", `config: spring.data.redis.port (line 1): must be an integer, got "http"`},
		{"bad url", "spring.data.redis.url: ftp://x\n", "config: spring.data.redis.url (line 1): redis: invalid URL scheme: ftp"},
		{"bad node", "spring.data.redis.cluster.nodes: a:b\n", `config: spring.data.redis.cluster.nodes (line 1): "a:b" is not host:port with a port in [1, 65535]`},
		{"cluster and database", "spring.data.redis:\n  database: 1\n  cluster.nodes: a:1\n", "config: spring.data.redis.database (line 2): must be 0 with cluster.nodes"},
		{"sentinel without nodes", "spring.data.redis.sentinel.master: m\n", "config: spring.data.redis (line 1): sentinel.nodes: must list the sentinels"},
		{"unknown key", "spring.data.redis.hots: x\n", "config: spring.data.redis.hots (line 1): unknown key (did you mean host?)"},
		{"ssl bundle", "spring.data.redis.ssl.bundle: mine\n", "config: spring.data.redis.ssl.bundle (line 1): names a Spring SSL bundle"},
		{"both sections", "spring.data.redis.host: a\nspring.redis.host: b\n", "config: spring.redis (line 2): is set next to spring.data.redis (line 1); Spring Boot 3 reads only spring.data.redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load([]byte(tc.doc), quiet)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant    %s", err, tc.want)
			}
			if !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("error does not match ErrInvalidConfig")
			}
		})
	}
}

// TestSpringRedisSentinel connects through a real Redis Sentinel (redis-server --sentinel)
// monitoring a real master, as sentinel.master and sentinel.nodes say.
func TestSpringRedisSentinel(t *testing.T) {
	master := redistest.NewServer(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\nsentinel monitor mymaster 127.0.0.1 %d 1\n", port, master.Port)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel on %s did not start: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	doc := fmt.Sprintf("spring:\n  data:\n    redis:\n      database: 3\n      client-name: via-sentinel\n      sentinel:\n        master: mymaster\n        nodes: %s\n", addr)
	cfg := load(t, doc, quiet)
	opt, err := cfg.Redis.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("NewClient through the sentinel: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Do(ctx, client.B().Set().Key("via-sentinel").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	info, err := client.Do(ctx, client.B().ClientInfo().Build()).ToString()
	if err != nil || !strings.Contains(info, " db=3 ") || !strings.Contains(info, " name=via-sentinel ") {
		t.Errorf("CLIENT INFO = %q, %v", info, err)
	}
	// The write reached the master itself.
	direct := redistest.NewClient(t, master.Addr)
	n, err := direct.Do(ctx, direct.B().Info().Section("keyspace").Build()).ToString()
	if err != nil || !strings.Contains(n, "db3:keys=1") {
		t.Errorf("master keyspace = %q, %v; want the key in db3", n, err)
	}
}

// TestEnvironmentOverrides: environment variables override keys as in Spring Boot
// (SPRING_DATA_REDIS_HOST for spring.data.redis.host), also for keys and sections the file
// does not have; their errors name the variable.
func TestEnvironmentOverrides(t *testing.T) {
	env := map[string]string{
		"SPRING_DATA_REDIS_HOST":                      "10.9.8.7",
		"SPRING_DATA_REDIS_PASSWORD":                  "from-secret",
		"SPRING_DATA_REDIS_CLUSTER_NODES":             "",
		"REDISSTREAM_READCOUNT":                       "33",
		"REDISSTREAM_AUTOCLAIM_MINIDLEMS":             "2s",
		"REDISCACHE_BREAKDOWN_LOCKTTLMS":              "2500",
		"REDISSTREAMING_RATELIMIT_POLICIES_API_LIMIT": "7",
	}
	doc := `spring.data.redis:
  host: file-host
  port: 6380
redis-stream:
  read-count: 5
redis-streaming.ratelimit:
  enabled: true
  default-name: api
  policies:
    api: {limit: 100}
`
	c := load(t, doc, config.Options{Getenv: envOf(env), Logger: quiet.Logger})
	if c.Redis.Host != "10.9.8.7" || c.Redis.Port != 6380 || c.Redis.Password != "from-secret" || len(c.Redis.ClusterNodes) != 0 {
		t.Errorf("redis = %+v", c.Redis)
	}
	if c.Stream.ReadCount != 33 || c.Stream.Autoclaim.MinIdle != 2*time.Second {
		t.Errorf("stream read-count %d, min-idle %v", c.Stream.ReadCount, c.Stream.Autoclaim.MinIdle)
	}
	if c.Cache.Breakdown.LockTTL != 2500*time.Millisecond || c.RateLimit.Settings.Policies[0].Limit != 7 {
		t.Errorf("cache lock ttl %v, api limit %d", c.Cache.Breakdown.LockTTL, c.RateLimit.Settings.Policies[0].Limit)
	}
	// A section only the environment sets.
	c = load(t, "", config.Options{Getenv: envOf(map[string]string{"SPRING_DATA_REDIS_HOST": "h"}), Logger: quiet.Logger})
	if !c.Redis.Set || c.Redis.Host != "h" || c.Redis.Path != "spring.data.redis" {
		t.Errorf("environment-only redis = %+v", c.Redis)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"REDISSTREAM_READCOUNT": "many"}, `config: redis-stream.read-count (environment REDISSTREAM_READCOUNT): must be an integer, got "many"`},
		{map[string]string{"REDISSTREAM_READCOUNT": "-4"}, "config: redis-stream.read-count (environment REDISSTREAM_READCOUNT): got -4, want a positive count"},
		{map[string]string{"SPRING_DATA_REDIS_PORT": "99999"}, "config: spring.data.redis.port (environment SPRING_DATA_REDIS_PORT): must be in [1, 65535], got 99999"},
		{map[string]string{"REDISSTREAMING_RATELIMIT_POLICIES_API_LIMIT": "0"}, "config: redis-streaming.ratelimit.policies.api.limit (environment REDISSTREAMING_RATELIMIT_POLICIES_API_LIMIT): limit = 0"},
	} {
		_, err := config.Load([]byte(doc), config.Options{Getenv: envOf(tc.env), Logger: quiet.Logger})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: error = %v\nwant %s", tc.env, err, tc.want)
		}
	}
}
