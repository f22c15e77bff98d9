package redisbackend

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The suites here prove equivalence, not latency, on a machine that may be loaded:
	// a zero Options.Timeout means 10 s in them. The deadline's own tests set
	// Options.Timeout (TestDefaultTimeout checks that zero means DefaultTimeout).
	defaultTimeout = 10 * time.Second
	code := redistest.Main(m)
	if code == 0 {
		// rueidis closes connections dropped by a cluster topology refresh 5 s later, in a
		// goroutine that outlives the client by design.
		// rueidis's own: a cluster topology refresh, and the reconnect delay (at most a second
		// of sleep) of a client closed while its server was down.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// backend is one Redis the tests run against.
type backend struct {
	name   string
	client func(t *testing.T) rueidis.Client
}

// miniClient returns a client to a fresh embedded miniredis, both closed when t ends.
func miniClient(t testing.TB) (rueidis.Client, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("connect miniredis: %v", err)
	}
	t.Cleanup(c.Close)
	return c, m
}

// backends lists miniredis (always), the package's real redis-server and its real 3-master
// cluster (skipped loudly, or failed under REDSTREAM_REQUIRE_REDIS=1, when unavailable).
var backends = []backend{
	{"miniredis", func(t *testing.T) rueidis.Client { c, _ := miniClient(t); return c }},
	{"redis", func(t *testing.T) rueidis.Client { return redistest.Client(t) }},
	{"cluster", func(t *testing.T) rueidis.Client { return redistest.ClusterClient(t) }},
}

var (
	nonce = strconv.FormatUint(rand.Uint64(), 36)
	seq   atomic.Int64
)

// uniq returns a name unique to this run, so tests sharing a server never share keys.
func uniq(base string) string {
	return base + ":" + nonce + ":" + strconv.FormatInt(seq.Add(1), 10)
}

// checks returns the number of conformance cases per algorithm for a backend: 500 against
// real Redis when REDSTREAM_REQUIRE_REDIS=1 (CI), fewer otherwise; REDSTREAM_CHECKS
// overrides both.
func checks(real bool) int {
	if s := os.Getenv("REDSTREAM_CHECKS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	if real && redistest.Required() {
		return 500
	}
	return 100
}
