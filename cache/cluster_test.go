package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

// The cache on a real 3-master Redis Cluster: keys of every shape (braces included) work,
// and a stampede from two clients still loads once.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx := context.Background()
	for _, clientSide := range []bool{false, true} {
		name := "round trips"
		if clientSide {
			name = "client-side cache"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.ClientSideCache.Enabled = clientSide
			a := newCache(t, redistest.ClusterClient(t), cfg)
			b := newCache(t, redistest.ClusterClient(t), cfg)
			for i, key := range []string{"plain", "user:{42}", "}{", "{", "bin\x00\xff", "{}x"} {
				if err := a.Set(ctx, key, i, time.Minute); err != nil {
					t.Fatalf("Set(%q): %v", key, err)
				}
				if v, err := Get[int](ctx, b, key); err != nil || v != i {
					t.Fatalf("Get(%q) = %d, %v; want %d", key, v, err, i)
				}
				if ok, err := b.Expire(ctx, key, time.Hour); !ok || err != nil {
					t.Fatalf("Expire(%q) = %v, %v", key, ok, err)
				}
				if err := b.Delete(ctx, key); err != nil {
					t.Fatalf("Delete(%q): %v", key, err)
				}
			}
			var loads atomic.Int64
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Add(1)
				go func(c *Cache) {
					defer wg.Done()
					v, err := GetOrLoad(ctx, c, "hot{x}", DefaultTTL, func(context.Context) (int, error) {
						loads.Add(1)
						time.Sleep(50 * time.Millisecond)
						return 7, nil
					})
					if err != nil || v != 7 {
						t.Errorf("GetOrLoad = %d, %v", v, err)
					}
				}([]*Cache{a, b}[i%2])
			}
			wg.Wait()
			if got := loads.Load(); got != 1 {
				t.Errorf("loader ran %d times, want 1", got)
			}
			if _, err := GetOrLoad(ctx, a, "none", DefaultTTL, func(context.Context) (int, error) { return 0, ErrNotFound }); !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v", err)
			}
		})
	}
}
