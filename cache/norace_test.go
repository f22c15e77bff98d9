//go:build !race

package cache

import (
	"context"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

// raceOn reports a -race build, whose reads are several times slower.
const raceOn = false

// A hot hit served from client-side cache memory allocates at most the command it builds.
func TestHotHitAllocations(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	c := newCache(t, redistest.Client(t), cfg)
	if err := c.Set(ctx, "k", user{ID: 1, Name: "ada"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	loader := func(context.Context) (user, error) { return user{}, nil }
	waitFor(t, "a hit from memory", func() bool {
		before := c.Stats().LocalHits
		_, _ = GetOrLoad(ctx, c, "k", DefaultTTL, loader)
		return c.Stats().LocalHits > before
	})
	allocs := testing.AllocsPerRun(1000, func() {
		if u, err := GetOrLoad(ctx, c, "k", DefaultTTL, loader); err != nil || u.ID != 1 {
			t.Fatalf("%+v, %v", u, err)
		}
	})
	if allocs > 2 {
		t.Errorf("a hot hit allocates %.1f times, want at most 2", allocs)
	}
}
