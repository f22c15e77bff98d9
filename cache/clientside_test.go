package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

func TestClientSideCacheInvalidatedByAnotherClient(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	reader := newCache(t, redistest.Client(t), cfg)
	writerCfg := cfg
	writerCfg.ClientSideCache.Enabled = false
	writer := newCache(t, redistest.Client(t), writerCfg)

	if err := writer.Set(ctx, "k", "v1", time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if v, err := Get[string](ctx, reader, "k"); err != nil || v != "v1" {
			t.Fatalf("read %d = %q, %v", i, v, err)
		}
	}
	if st := reader.Stats(); st.LocalHits != 2 || st.Hits != 3 {
		t.Fatalf("stats = %+v, want 3 hits of which 2 from memory", st)
	}

	// Another client's Set invalidates the copy in the reader's memory.
	if err := writer.Set(ctx, "k", "v2", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reader to see v2", func() bool {
		v, err := Get[string](ctx, reader, "k")
		return err == nil && v == "v2"
	})
	// So does a Delete.
	if err := writer.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reader to see the delete", func() bool {
		_, err := Get[string](ctx, reader, "k")
		return errors.Is(err, ErrNotFound)
	})
	// Misses and null markers are cached in memory too, and invalidated alike.
	if _, err := GetOrLoad(ctx, reader, "n", DefaultTTL, func(context.Context) (string, error) { return "", ErrNotFound }); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	waitFor(t, "a null marker served from memory", func() bool {
		before := reader.Stats().LocalHits
		_, err := Get[string](ctx, reader, "n")
		return errors.Is(err, ErrNotFound) && reader.Stats().LocalHits == before+1
	})
	if err := writer.Set(ctx, "n", "now here", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reader to see the value replacing its null marker", func() bool {
		v, err := Get[string](ctx, reader, "n")
		return err == nil && v == "now here"
	})
}

func TestClientSideCacheReadYourWrites(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	c := newCache(t, redistest.Client(t), cfg)
	for i := range 50 {
		if err := c.Set(ctx, "k", i, time.Minute); err != nil {
			t.Fatal(err)
		}
		if v, err := Get[int](ctx, c, "k"); err != nil || v != i {
			t.Fatalf("after Set(%d) the same cache read %d, %v", i, v, err)
		}
		if v, err := Get[int](ctx, c, "k"); err != nil || v != i {
			t.Fatalf("after Set(%d) the same cache read %d, %v", i, v, err)
		}
	}
}

func TestClientSideSliding(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	cfg.SlidingExpiration = true
	cfg.DefaultTTL = 100 * time.Second
	c := newCache(t, client, cfg)
	// More than half of DefaultTTL left: a read reaching Redis does not renew.
	if err := c.Set(ctx, "fresh", 1, 80*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[int](ctx, c, "fresh"); err != nil {
		t.Fatal(err)
	}
	if got := pttl(t, client, c.Key("fresh")); got > 80_000 {
		t.Errorf("PTTL = %d, renewed too early", got)
	}
	// Less than half left: renewed.
	if err := c.Set(ctx, "old", 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[int](ctx, c, "old"); err != nil {
		t.Fatal(err)
	}
	if got := pttl(t, client, c.Key("old")); got < 99_000 {
		t.Errorf("PTTL = %d, want renewed to about 100000", got)
	}
}

func TestWaiterWakesOnInvalidation(t *testing.T) {
	clientA, clientB := redistest.Client(t), redistest.Client(t)
	cfg := testConfig(t)
	cfg.ClientSideCache.Enabled = true
	// Without a wake-up on invalidation, B would read the key again only after an hour.
	cfg.Breakdown.WaitInterval = time.Hour
	cfg.Breakdown.WaitTimeout = time.Hour
	a, b := newCache(t, clientA, cfg), newCache(t, clientB, cfg)

	release := make(chan struct{})
	_, outA := holdLock(t, a, clientA, "k", "from-a", release)
	outB := make(chan string, 1)
	go func() {
		v, err := GetOrLoad(context.Background(), b, "k", DefaultTTL, func(context.Context) (string, error) { return "from-b", nil })
		if err != nil {
			v = err.Error()
		}
		outB <- v
	}()
	waitFor(t, "B to wait for A's lock", func() bool { return b.Stats().LockWaits == 1 })
	close(release)
	if got := <-outA; got != "from-a" {
		t.Fatalf("A = %q", got)
	}
	select {
	case got := <-outB:
		if got != "from-a" {
			t.Errorf("B = %q, want A's value", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B did not wake when A's value replaced the lock")
	}
	if st := b.Stats(); st.Loads != 0 || st.Degraded != 0 {
		t.Errorf("B stats = %+v, want no load", st)
	}
}
