package console

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// redisFacts are what an operator checks first about the server (INFO), on a cluster about
// the node that answered.
type redisFacts struct {
	Server       string // "Redis 7.0.15", "Valkey 8.1.1"
	Mode         string // standalone, cluster, sentinel
	UsedMemory   string // human form, as INFO gives it
	MaxMemory    string // "" when unlimited
	Policy       string // maxmemory-policy
	Clients      int64
	OpsPerSec    int64
	Uptime       int64 // seconds
	Cluster      bool  // the console's client is a cluster client
	EvictsQueues bool  // Policy can evict keys, so stream entries, pending lists and schedules may be lost
}

// facts reads the server's facts with one INFO.
func (c *Console) facts(ctx context.Context) (redisFacts, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	cl := c.client
	info, err := cl.Do(ctx, cl.B().Info().Section("server").Section("clients").Section("memory").Section("stats").Build()).ToString()
	if err != nil {
		return redisFacts{}, err
	}
	return parseFacts(info, cl.Mode() == rueidis.ClientModeCluster), nil
}

// parseFacts reads the fields of an INFO reply that redisFacts shows; fields it does not
// find stay empty or zero.
func parseFacts(info string, cluster bool) redisFacts {
	f := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(k, "#") {
			f[k] = v
		}
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	r := redisFacts{
		Server:     "Redis " + f["redis_version"],
		Mode:       f["redis_mode"],
		UsedMemory: f["used_memory_human"],
		Policy:     f["maxmemory_policy"],
		Clients:    num("connected_clients"),
		OpsPerSec:  num("instantaneous_ops_per_sec"),
		Uptime:     num("uptime_in_seconds"),
		Cluster:    cluster,
	}
	if v := f["valkey_version"]; v != "" {
		r.Server = "Valkey " + v
	} else if f["redis_version"] == "" {
		r.Server = "unknown server"
	}
	if num("maxmemory") > 0 {
		r.MaxMemory = f["maxmemory_human"]
	}
	// Every policy but noeviction removes keys once maxmemory is reached; the volatile ones
	// only keys with a TTL, which redstream's streams mostly lack, but its schedules, unique
	// ids and results have one.
	r.EvictsQueues = r.Policy != "" && r.Policy != "noeviction"
	return r
}
