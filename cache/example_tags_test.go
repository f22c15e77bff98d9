package cache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/cache"
)

// ExampleTags drops every cached view of one user with one write: entries loaded or set
// with a tag are misses for every later read once the tag is invalidated, in every process
// and on Redis Cluster; other entries stay.
func ExampleTags() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	c, err := cache.New(client, cache.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	version := "v1"
	load := func(context.Context) (string, error) { return version, nil }
	for _, key := range []string{"user:1:profile", "user:1:orders"} {
		_, _ = cache.GetOrLoad(ctx, c, key, time.Hour, load, cache.Tags("user:1"))
	}
	_ = c.Set(ctx, "user:2:profile", "v1", time.Hour, cache.Tags("user:2"))

	version = "v2" // user 1 changed in the database
	if err := c.InvalidateTag(ctx, "user:1"); err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1:profile", "user:1:orders"} {
		v, _ := cache.GetOrLoad(ctx, c, key, time.Hour, load, cache.Tags("user:1")) // reloads
		fmt.Println(key, v)
	}
	v, _ := cache.Get[string](ctx, c, "user:2:profile")
	fmt.Println("user:2:profile", v)
	// Output:
	// user:1:profile v2
	// user:1:orders v2
	// user:2:profile v1
}
