package cache

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

type user struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func TestSetGetDeleteExists(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))

	if _, err := Get[user](ctx, c, "u1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get on a cold key: err = %v, want ErrNotFound", err)
	}
	want := user{ID: 1, Name: "ada"}
	if err := c.Set(ctx, "u1", want, time.Minute); err != nil {
		t.Fatalf("Set: %v", err)
	}
	got, err := Get[user](ctx, c, "u1")
	if err != nil || got != want {
		t.Fatalf("Get = %+v, %v; want %+v, nil", got, err, want)
	}
	if s, _ := raw(t, client, c.Key("u1")); s != `{"id":1,"name":"ada"}` {
		t.Errorf("stored %q, want the plain JSON", s)
	}
	if ok, err := c.Exists(ctx, "u1"); !ok || err != nil {
		t.Errorf("Exists = %v, %v; want true", ok, err)
	}
	if err := c.Delete(ctx, "u1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ok, err := c.Exists(ctx, "u1"); ok || err != nil {
		t.Errorf("Exists after Delete = %v, %v; want false", ok, err)
	}
	if err := c.Delete(ctx, "u1"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if st := c.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Errorf("stats = %+v, want 1 hit and 1 miss", st)
	}
}

func TestKeyLayout(t *testing.T) {
	client := redistest.Client(t)
	for _, tc := range []struct {
		name, prefix, env string
		isolation         bool
		want              string
	}{
		{"default", "cache:", "", false, "cache:user:1"},
		{"env isolation", "cache:", "prod", true, "cache:prod:user:1"},
		{"env ignored without isolation", "cache:", "prod", false, "cache:user:1"},
		{"isolation without env", "cache:", "", true, "cache:user:1"},
		{"empty prefix", "", "", false, "user:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.KeyPrefix, cfg.Env, cfg.EnvIsolation = tc.prefix, tc.env, tc.isolation
			c := newCache(t, client, cfg)
			if got := c.Key("user:1"); got != tc.want {
				t.Errorf("Key = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDefaultTTLAndExpire(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.DefaultTTL = 30 * time.Second
	c := newCache(t, client, cfg)

	if err := c.Set(ctx, "k", "v", DefaultTTL); err != nil {
		t.Fatal(err)
	}
	if got := pttl(t, client, c.Key("k")); got <= 29_000 || got > 30_000 {
		t.Errorf("PTTL after Set with DefaultTTL = %dms, want about 30000", got)
	}
	ok, err := c.Expire(ctx, "k", 5*time.Minute)
	if !ok || err != nil {
		t.Fatalf("Expire = %v, %v; want true", ok, err)
	}
	if got := pttl(t, client, c.Key("k")); got <= 299_000 || got > 300_000 {
		t.Errorf("PTTL after Expire(5m) = %dms", got)
	}
	if ok, err := c.Expire(ctx, "missing", time.Minute); ok || err != nil {
		t.Errorf("Expire of a missing key = %v, %v; want false, nil", ok, err)
	}
}

func TestJitterBounds(t *testing.T) {
	t.Run("pure", func(t *testing.T) {
		const ttl = 1000 * time.Millisecond
		seen := map[int64]bool{}
		for range 20000 {
			ms := jitter(ttl, 0.1)
			if ms < 1000 || ms > 1100 {
				t.Fatalf("jitter(1s, 0.1) = %dms, want in [1000, 1100]", ms)
			}
			seen[ms] = true
		}
		if len(seen) < 90 {
			t.Errorf("jitter produced %d distinct values out of 101, want nearly all", len(seen))
		}
		if got := jitter(ttl, 0); got != 1000 {
			t.Errorf("jitter with ratio 0 = %d, want 1000", got)
		}
		if got := jitter(time.Millisecond, 0.5); got != 1 {
			t.Errorf("jitter(1ms, 0.5) = %d, want 1 (the extra floors to 0)", got)
		}
		if got := jitter(time.Duration(math.MaxInt64), 0.99); got < time.Duration(math.MaxInt64).Milliseconds() {
			t.Errorf("jitter of the largest duration overflowed: %d", got)
		}
	})
	t.Run("redis", func(t *testing.T) {
		ctx := context.Background()
		client := redistest.Client(t)
		cfg := testConfig(t)
		cfg.JitterRatio = 0.5
		cfg.NullTTL = 10 * time.Second
		c := newCache(t, client, cfg)
		distinct := map[int64]bool{}
		for i := range 40 {
			key := string(rune('a'+i%26)) + string(rune('0'+i/26))
			if err := c.Set(ctx, key, i, 100*time.Second); err != nil {
				t.Fatal(err)
			}
			got := pttl(t, client, c.Key(key))
			// Written just now, so at most a few ms have passed.
			if got < 99_000 || got > 150_000 {
				t.Fatalf("PTTL = %dms, want in [100000, 150000] minus elapsed", got)
			}
			distinct[got/1000] = true
		}
		if len(distinct) < 10 {
			t.Errorf("40 writes spread over only %d distinct seconds, want jitter", len(distinct))
		}
		// Null markers are jittered too.
		_, err := GetOrLoad(ctx, c, "absent", DefaultTTL, func(context.Context) (int, error) { return 0, ErrNotFound })
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
		if got := pttl(t, client, c.Key("absent")); got < 9_000 || got > 15_000 {
			t.Errorf("null marker PTTL = %dms, want in [10000, 15000]", got)
		}
	})
}

func TestDecodeErrorIsNotAMiss(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	if err := c.Set(ctx, "k", "not a number", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[int](ctx, c, "k"); !errors.Is(err, ErrDecode) {
		t.Errorf("Get[int] of a string: err = %v, want ErrDecode", err)
	}
	loads := 0
	_, err := GetOrLoad(ctx, c, "k", DefaultTTL, func(context.Context) (int, error) { loads++; return 1, nil })
	if !errors.Is(err, ErrDecode) || loads != 0 {
		t.Errorf("GetOrLoad[int] of a string: err = %v, loads = %d; want ErrDecode and no load", err, loads)
	}
	// Garbage written by someone else.
	if err := client.Do(ctx, client.B().Set().Key(c.Key("g")).Value("{broken").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[user](ctx, c, "g"); !errors.Is(err, ErrDecode) {
		t.Errorf("Get of broken JSON: err = %v, want ErrDecode", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	okLoader := func(context.Context) (int, error) { return 1, nil }
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"Set zero ttl", func() error { return c.Set(ctx, "k", 1, 0) }, ErrInvalidArgument},
		{"Set negative ttl", func() error { return c.Set(ctx, "k", 1, -time.Second) }, ErrInvalidArgument},
		{"Set sub-millisecond ttl", func() error { return c.Set(ctx, "k", 1, time.Microsecond) }, ErrInvalidArgument},
		{"Set empty key", func() error { return c.Set(ctx, "", 1, time.Second) }, ErrInvalidArgument},
		{"Set channel", func() error { return c.Set(ctx, "k", make(chan int), time.Second) }, ErrEncode},
		{"Set func", func() error { return c.Set(ctx, "k", func() {}, time.Second) }, ErrEncode},
		{"Set NaN", func() error { return c.Set(ctx, "k", math.NaN(), time.Second) }, ErrEncode},
		{"Expire zero ttl", func() error { _, err := c.Expire(ctx, "k", 0); return err }, ErrInvalidArgument},
		{"Expire negative ttl", func() error { _, err := c.Expire(ctx, "k", -2); return err }, ErrInvalidArgument},
		{"Get empty key", func() error { _, err := Get[int](ctx, c, ""); return err }, ErrInvalidArgument},
		{"Exists empty key", func() error { _, err := c.Exists(ctx, ""); return err }, ErrInvalidArgument},
		{"Delete empty key", func() error { return c.Delete(ctx, "") }, ErrInvalidArgument},
		{"GetOrLoad nil loader", func() error { _, err := GetOrLoad[int](ctx, c, "k", DefaultTTL, nil); return err }, ErrInvalidArgument},
		{"GetOrLoad zero ttl", func() error { _, err := GetOrLoad(ctx, c, "k", 0, okLoader); return err }, ErrInvalidArgument},
		{"GetOrLoad negative ttl", func() error { _, err := GetOrLoad(ctx, c, "k", -time.Hour, okLoader); return err }, ErrInvalidArgument},
		{"GetOrLoad unencodable value", func() error {
			_, err := GetOrLoad(ctx, c, "chan", DefaultTTL, func(context.Context) (chan int, error) { return make(chan int), nil })
			return err
		}, ErrEncode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if msg := err.Error(); len(msg) < 7 || msg[:7] != "cache: " {
				t.Errorf("error %q does not start with the package name", msg)
			}
		})
	}
	if _, ok := raw(t, client, c.Key("chan")); ok {
		t.Error("an unencodable loaded value left something in Redis")
	}
	if st := c.Stats(); st.LoadErrors != 0 {
		t.Errorf("an encode failure counted as a load error: %+v", st)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	client := redistest.Client(t)
	if _, err := New(nil, DefaultConfig()); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("New(nil client): err = %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"zero config", func(c *Config) { *c = Config{} }},
		{"zero default ttl", func(c *Config) { c.DefaultTTL = 0 }},
		{"negative default ttl", func(c *Config) { c.DefaultTTL = -time.Second }},
		{"zero null ttl", func(c *Config) { c.NullTTL = 0 }},
		{"sub-ms null ttl", func(c *Config) { c.NullTTL = time.Microsecond }},
		{"jitter 1", func(c *Config) { c.JitterRatio = 1 }},
		{"jitter negative", func(c *Config) { c.JitterRatio = -0.1 }},
		{"jitter NaN", func(c *Config) { c.JitterRatio = math.NaN() }},
		{"zero lock ttl", func(c *Config) { c.Breakdown.LockTTL = 0 }},
		{"negative wait timeout", func(c *Config) { c.Breakdown.WaitTimeout = -1 }},
		{"zero wait interval", func(c *Config) { c.Breakdown.WaitInterval = 0 }},
		{"zero local ttl", func(c *Config) { c.ClientSideCache = ClientSideCacheConfig{Enabled: true} }},
		{"empty name", func(c *Config) { c.Name = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			_, err := New(client, cfg)
			if err == nil {
				t.Fatal("New accepted an invalid config")
			}
			if !errorsIsInvalidConfig(err) {
				t.Errorf("err = %v, want redstream.ErrInvalidConfig", err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	c := newCache(t, client, testConfig(t))
	c.Close()
	c.Close() // idempotent
	if err := c.Set(ctx, "k", 1, time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close: %v", err)
	}
	if _, err := GetOrLoad(ctx, c, "k", DefaultTTL, func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("GetOrLoad after Close: %v", err)
	}
	if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
		t.Errorf("Close closed the client: %v", err)
	}
}

func TestSlidingExpiration(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.SlidingExpiration = true
	cfg.DefaultTTL = 100 * time.Second
	c := newCache(t, client, cfg)

	if err := c.Set(ctx, "v", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[int](ctx, c, "v"); err != nil {
		t.Fatal(err)
	}
	if got := pttl(t, client, c.Key("v")); got < 99_000 {
		t.Errorf("PTTL after a sliding hit = %dms, want renewed to about 100000", got)
	}
	// Null markers are never renewed.
	if _, err := GetOrLoad(ctx, c, "n", DefaultTTL, func(context.Context) (int, error) { return 0, ErrNotFound }); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	before := pttl(t, client, c.Key("n"))
	if _, err := GetOrLoad(ctx, c, "n", DefaultTTL, func(context.Context) (int, error) { return 0, ErrNotFound }); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if after := pttl(t, client, c.Key("n")); after > before || after > 60_000 {
		t.Errorf("null marker PTTL went from %d to %d: renewed", before, after)
	}
	// Without sliding expiration a hit leaves the TTL alone.
	plain := newCache(t, client, testConfig(t))
	if err := plain.Set(ctx, "v", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[int](ctx, plain, "v"); err != nil {
		t.Fatal(err)
	}
	if got := pttl(t, client, plain.Key("v")); got > 5_000 {
		t.Errorf("PTTL without sliding = %dms, want <= 5000", got)
	}
}
