package cache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
)

func ExampleGetMany() {
	client, stop := embedded()
	defer stop()
	c, err := cache.New(client, cache.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	db := map[string]User{"user:1": {1, "Ada"}, "user:2": {2, "Grace"}, "user:3": {3, "Alan"}}
	loadUsers := func(ctx context.Context, keys []string) (map[string]User, error) {
		fmt.Println("loading", keys) // one query for all the misses: SELECT ... WHERE id IN (...)
		out := map[string]User{}
		for _, k := range keys {
			if u, ok := db[k]; ok {
				out[k] = u
			}
		}
		return out, nil // user:404 is absent: it gets a null marker
	}
	if err := c.Set(ctx, "user:1", db["user:1"], cache.DefaultTTL); err != nil {
		panic(err)
	}
	for range 2 {
		users, err := cache.GetMany(ctx, c, []string{"user:1", "user:2", "user:3", "user:404"}, cache.DefaultTTL, loadUsers)
		if err != nil {
			panic(err)
		}
		var line []string
		for _, k := range slices.Sorted(maps.Keys(users)) {
			line = append(line, k+"="+users[k].Name)
		}
		fmt.Println(strings.Join(line, " "))
	}
	// Output:
	// loading [user:2 user:3 user:404]
	// user:1=Ada user:2=Grace user:3=Alan
	// user:1=Ada user:2=Grace user:3=Alan
}

// With on-redis-error "load", a cache whose Redis is down answers from the loader (and
// caches nothing); with the default, "error", the caller gets an ErrUnavailable error.
// Either way every call returns within Config.Timeout (100ms by default), and once the
// circuit breaker opens at once.
func ExampleConfig_onRedisError() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	cfg := cache.DefaultConfig()
	cfg.OnRedisError = cache.LoadOnError
	cfg.Name = "example-load"
	loading, _ := cache.New(client, cfg)
	defer loading.Close()
	cfg.OnRedisError = cache.ReturnError
	cfg.Name = "example-error"
	strict, _ := cache.New(client, cfg)
	defer strict.Close()

	mr.Close() // Redis goes away
	loadUser := func(ctx context.Context) (User, error) { return User{ID: 1, Name: "Ada"}, nil }
	ctx := context.Background() // no deadline: the cache's own applies
	u, err := cache.GetOrLoad(ctx, loading, "user:1", cache.DefaultTTL, loadUser)
	fmt.Println(u.Name, err)
	_, err = cache.GetOrLoad(ctx, strict, "user:1", cache.DefaultTTL, loadUser)
	fmt.Println(errors.Is(err, cache.ErrUnavailable))
	fmt.Println(loading.Stats().Fallbacks)
	// Output:
	// Ada <nil>
	// true
	// 1
}
