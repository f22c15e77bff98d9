package config_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/config"
	"github.com/redstream-go/redstream/metrics"
)

// ExampleLoad_quota turns on leased quota for a policy: its hot key's requests are admitted
// in process from slices of the key's budget, a few Redis calls in all.
func ExampleLoad_quota() {
	srv, err := miniredis.Run() // an embedded Redis standing for the application's
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	yaml := `
redis-streaming.ratelimit:
  enabled: true
  backend: redis
  key-prefix: example:quota
  default-name: tenants
  policies:
    tenants:
      algorithm: fixed
      window-ms: 60000
      limit: 100000
      quota:
        enabled: true
        duration-ms: 100   # a lease lasts at most 100 ms
        max-share: 0.1     # and takes at most 10% of the limit
`
	cfg, err := config.Load([]byte(yaml), config.Options{Redis: client})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted := 0
	for i := range 1000 { // 10,000 requests a second on one key for 0.1 s
		d, err := cfg.RateLimit.Default.AllowN(context.Background(), "tenant-1", now.Add(time.Duration(i)*100*time.Microsecond), 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	q := metrics.LeasedQuotaCounters("example:quota:tenants")
	fmt.Println("admitted:", admitted)
	fmt.Println("Redis calls:", q.Calls.Get(), "answered in process:", q.LocalAllowed.Get())
	// Output:
	// admitted: 1000
	// Redis calls: 3 answered in process: 997
}
