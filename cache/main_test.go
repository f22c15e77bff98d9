package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		// A closed rueidis cluster client leaves a goroutine sleeping out a 5s refresh delay,
		// and a client closed while its server is down one sleeping out a reconnect delay.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testConfig returns DefaultConfig with a key prefix of its own for t, so tests sharing
// one redis-server never see each other's keys, jitter off unless a test wants it, and a
// Timeout of 2s.
func testConfig(t testing.TB) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Name = t.Name()
	cfg.KeyPrefix = fmt.Sprintf("test:%d:%s:", testRun.Add(1), strings.ReplaceAll(t.Name(), "/", ":"))
	cfg.JitterRatio = 0
	// A loaded machine can make a healthy Redis call take longer than the 100ms default;
	// the outage tests set DefaultTimeout back explicitly.
	cfg.Timeout = 2 * time.Second
	return cfg
}

// testRun makes every testConfig's prefix unique, also across -count repetitions and runs
// against a long-lived REDSTREAM_REDIS_ADDR server.
var testRun atomic.Int64

func init() { testRun.Store(time.Now().UnixNano()) }

// newCache returns a Cache on client with cfg, closed when the test ends; the keys under
// its prefix are deleted then.
func newCache(t testing.TB, client rueidis.Client, cfg Config) *Cache {
	t.Helper()
	c, err := New(client, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		if strings.HasPrefix(cfg.KeyPrefix, "test:") && client.Mode() != rueidis.ClientModeCluster {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // the server may be down
			defer cancel()
			keys, err := client.Do(ctx, client.B().Keys().Pattern(cfg.KeyPrefix+"*").Build()).AsStrSlice()
			if err == nil && len(keys) > 0 {
				_ = client.Do(ctx, client.B().Del().Key(keys...).Build()).Error()
			}
		}
	})
	return c
}

// raw returns what Redis holds at the Redis key rk, and whether it exists.
func raw(t testing.TB, client rueidis.Client, rk string) (string, bool) {
	t.Helper()
	s, err := client.Do(context.Background(), client.B().Get().Key(rk).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", rk, err)
	}
	return s, true
}

// pttl returns the remaining TTL of rk in milliseconds (-2 missing, -1 no TTL).
func pttl(t testing.TB, client rueidis.Client, rk string) int64 {
	t.Helper()
	n, err := client.Do(context.Background(), client.B().Pttl().Key(rk).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", rk, err)
	}
	return n
}

func errorsIsInvalidConfig(err error) bool { return errors.Is(err, redstream.ErrInvalidConfig) }
