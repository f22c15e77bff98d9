package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redstream-go/redstream/cache"
)

// ExampleStale keeps serving a user while the database fails: with fail-safe on, the last
// value the cache knew comes back with a nil error, flagged stale, and the failing
// database is not asked again for that key within the throttle interval.
func ExampleStale() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	cfg := cache.DefaultConfig()
	cfg.FailSafe.Enabled = true                  // fail-safe.enabled: true
	cfg.FailSafe.MaxStaleness = 10 * time.Minute // fail-safe.max-staleness-ms: 600000
	cfg.FailSafe.Throttle = time.Second          // fail-safe.throttle-ms: 1000
	c, err := cache.New(client, cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, _ = cache.GetOrLoad(ctx, c, "user:1", time.Minute, func(context.Context) (User, error) {
		return User{ID: 1, Name: "Ada"}, nil
	})
	client.Do(ctx, client.B().Del().Key(c.Key("user:1")).Build()) // evicted from Redis; the database is down now
	asked := 0
	down := func(context.Context) (User, error) { asked++; return User{}, errors.New("database down") }
	for range 3 {
		var stale bool
		u, err := cache.GetOrLoad(ctx, c, "user:1", time.Minute, down, cache.Stale(&stale))
		fmt.Println(u.Name, err, stale)
	}
	fmt.Println("database asked", asked, "time")
	// Output:
	// Ada <nil> true
	// Ada <nil> true
	// Ada <nil> true
	// database asked 1 time
}

// ExampleLoadTimeouts answers from the stale value when the database is slow: past the
// soft timeout the caller gets the value it had, and the load finishes in the background.
func ExampleLoadTimeouts() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	cfg := cache.DefaultConfig()
	cfg.FailSafe.Enabled = true                 // the stale value comes from fail-safe
	cfg.LoadSoftTimeout = 50 * time.Millisecond // load-soft-timeout-ms: 50
	cfg.LoadHardTimeout = 2 * time.Second       // load-hard-timeout-ms: 2000
	c, err := cache.New(client, cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, _ = cache.GetOrLoad(ctx, c, "user:1", time.Minute, func(context.Context) (User, error) {
		return User{ID: 1, Name: "Ada"}, nil
	})
	client.Do(ctx, client.B().Del().Key(c.Key("user:1")).Build()) // evicted from Redis
	slow := func(context.Context) (User, error) {
		time.Sleep(300 * time.Millisecond)
		return User{ID: 1, Name: "Ada Lovelace"}, nil
	}
	var stale bool
	u, _ := cache.GetOrLoad(ctx, c, "user:1", time.Minute, slow, cache.Stale(&stale))
	fmt.Println(u.Name, stale) // after 50ms
	// One call can wait longer, or bound its load tighter:
	// cache.GetOrLoad(ctx, c, key, ttl, slow, cache.LoadTimeouts(200*time.Millisecond, time.Second))
	time.Sleep(400 * time.Millisecond) // the background load stored its value
	u, _ = cache.Get[User](ctx, c, "user:1")
	fmt.Println(u.Name)
	// Output:
	// Ada true
	// Ada Lovelace
}
