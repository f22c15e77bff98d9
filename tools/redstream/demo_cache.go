package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
)

func init() {
	registerDemo(demo{
		name:    "cache",
		summary: "cache-aside: a stampede of 200 calls from 4 clients on one cold key loads it once",
		order:   50,
		run:     demoCache,
	})
}

// demoCache runs a cache stampede on the embedded Redis: 4 clients (as 4 processes would
// have), 50 goroutines each, all asking for the same cold key at once.
func demoCache(ctx context.Context, out io.Writer) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return err
	}
	defer mr.Close()

	const clients, perClient = 4, 50
	run := func(cfg cache.Config, key string) (loads int64, stats cache.Stats, err error) {
		caches := make([]*cache.Cache, clients)
		for i := range caches {
			// miniredis has no client tracking: no client-side caching here.
			client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
			if err != nil {
				return 0, stats, err
			}
			defer client.Close()
			if caches[i], err = cache.New(client, cfg); err != nil {
				return 0, stats, err
			}
			defer caches[i].Close()
		}
		var n atomic.Int64
		loader := func(ctx context.Context) (string, error) {
			n.Add(1)
			time.Sleep(100 * time.Millisecond) // a slow query
			return "product #42", nil
		}
		start := make(chan struct{})
		errs := make(chan error, clients*perClient)
		var wg sync.WaitGroup
		for i := range clients * perClient {
			wg.Add(1)
			go func(c *cache.Cache) {
				defer wg.Done()
				<-start
				if _, err := cache.GetOrLoad(ctx, c, key, cache.DefaultTTL, loader); err != nil {
					errs <- err
				}
			}(caches[i%clients])
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			return 0, stats, err
		}
		for _, c := range caches {
			s := c.Stats()
			stats.Hits += s.Hits
			stats.Misses += s.Misses
			stats.Loads += s.Loads
			stats.LockWaits += s.LockWaits
			stats.Degraded += s.Degraded
		}
		return n.Load(), stats, nil
	}

	cfg := cache.DefaultConfig()
	cfg.Name = "demo"
	loads, st, err := run(cfg, "product:42")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d concurrent GetOrLoad calls from %d clients on a cold key: the loader ran %d time(s)\n", clients*perClient, clients, loads)
	fmt.Fprintf(out, "  (%d misses shared %d load; %d waited for another client's lock; %d degraded loads)\n", st.Misses, st.Loads, st.LockWaits, st.Degraded)

	off := cfg
	off.KeyPrefix = "cache-unprotected:"
	off.Breakdown.Enabled = false
	loads, _, err = run(off, "product:42")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the same stampede with breakdown protection off: the loader ran %d times\n", loads)

	// Penetration: a key the source does not have is asked for once, then answered by the
	// null marker.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		return err
	}
	defer client.Close()
	c, err := cache.New(client, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	var asked int
	for range 5 {
		_, err := cache.GetOrLoad(ctx, c, "product:missing", cache.DefaultTTL, func(context.Context) (string, error) {
			asked++
			return "", cache.ErrNotFound
		})
		if !errors.Is(err, cache.ErrNotFound) {
			return fmt.Errorf("want not found, got %v", err)
		}
	}
	fmt.Fprintf(out, "5 calls for a key the source lacks: the source was asked %d time(s) (null marker for %v)\n", asked, cfg.NullTTL)
	return nil
}
