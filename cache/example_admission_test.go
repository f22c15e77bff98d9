package cache_test

import (
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/cache"
)

// ExampleNewAdmissionStore keeps the hot keys in process memory when the keys read are
// more than the memory holds: the rueidis client's store admits a copy by how often its
// key is read (TinyLFU), within CacheSizeEachConn bytes per connection.
func ExampleNewAdmissionStore() {
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{"127.0.0.1:6379"},
		NewCacheStoreFn:   cache.NewAdmissionStore, // admit by frequency
		CacheSizeEachConn: 64 << 20,                // bytes of copies per connection
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	cfg := cache.DefaultConfig()
	cfg.ClientSideCache.Enabled = true // client-side-cache.enabled: true
	c, err := cache.New(client, cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
}
