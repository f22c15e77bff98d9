package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
)

// embedded starts an in-process Redis (miniredis) and a rueidis client for it. miniredis has
// no client tracking, hence DisableCache; use a real Redis for client-side caching.
func embedded() (rueidis.Client, func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return client, func() { client.Close(); mr.Close() }
}

type User struct {
	ID   int
	Name string
}

func Example() {
	client, stop := embedded()
	defer stop()

	c, err := cache.New(client, cache.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer c.Close() // the client stays open: it is the caller's

	var loads atomic.Int64
	loadUser := func(ctx context.Context) (User, error) {
		loads.Add(1)
		time.Sleep(20 * time.Millisecond) // a slow database
		return User{ID: 1, Name: "Ada"}, nil
	}

	// 100 concurrent requests for one cold key: one load.
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cache.GetOrLoad(context.Background(), c, "user:1", cache.DefaultTTL, loadUser); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()

	u, err := cache.Get[User](context.Background(), c, "user:1")
	fmt.Println(u.Name, err, "- loads:", loads.Load())
	// Output: Ada <nil> - loads: 1
}

func ExampleGetOrLoad_notFound() {
	client, stop := embedded()
	defer stop()
	c, err := cache.New(client, cache.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	loads := 0
	findUser := func(ctx context.Context) (User, error) {
		loads++
		return User{}, fmt.Errorf("user 404: %w", cache.ErrNotFound) // the source has no such user
	}
	for range 3 {
		_, err := cache.GetOrLoad(context.Background(), c, "user:404", time.Hour, findUser)
		fmt.Println(errors.Is(err, cache.ErrNotFound))
	}
	fmt.Println("loads:", loads, "null hits:", c.Stats().NullHits)
	// Output:
	// true
	// true
	// true
	// loads: 1 null hits: 2
}

func ExampleCache_Set() {
	client, stop := embedded()
	defer stop()
	cfg := cache.DefaultConfig()
	cfg.EnvIsolation, cfg.Env = true, "prod"
	c, err := cache.New(client, cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	if err := c.Set(ctx, "user:2", User{ID: 2, Name: "Grace"}, 10*time.Minute); err != nil {
		panic(err)
	}
	u, err := cache.Get[User](ctx, c, "user:2")
	fmt.Println(u, err, c.Key("user:2"))

	_, err = cache.Get[int](ctx, c, "user:2") // the wrong type is an error, not a miss
	fmt.Println(errors.Is(err, cache.ErrDecode))

	ok, _ := c.Expire(ctx, "user:2", time.Hour)
	fmt.Println("renewed:", ok)
	_ = c.Delete(ctx, "user:2")
	ok, _ = c.Exists(ctx, "user:2")
	fmt.Println("exists:", ok)

	err = c.Set(ctx, "user:3", User{}, 0) // zero TTL: use cache.DefaultTTL for the default
	fmt.Println(err)
	// Output:
	// {2 Grace} <nil> cache:prod:user:2
	// true
	// renewed: true
	// exists: false
	// cache: invalid argument: ttl must be positive, got 0s
}

func ExampleConfig_Validate() {
	cfg := cache.DefaultConfig()
	cfg.KeyPrefix = "shop:"
	cfg.JitterRatio = 1.5
	fmt.Println(cfg.Validate())
	// Output:
	// cache: JitterRatio (redis-cache.jitter-ratio) must be in [0, 1), got 1.5
}
