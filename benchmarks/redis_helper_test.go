package benchmarks

import (
	"os"
	"testing"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// The benchmarks that need Redis use a real redis-server: REDSTREAM_REDIS_ADDR when set,
// otherwise one started for this run by internal/redistest (and stopped by TestMain). With
// neither, those benchmarks skip loudly.

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// redisAddr returns the address of the benchmarks' Redis.
func redisAddr(tb testing.TB) string {
	tb.Helper()
	return redistest.Addr(tb)
}

// redisClient returns a rueidis client to the benchmarks' Redis with the default options
// (RESP3, client-side caching available), closed when tb ends.
func redisClient(tb testing.TB) rueidis.Client {
	tb.Helper()
	return redistest.NewClient(tb, redisAddr(tb))
}
