package health

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/redis/rueidis"
)

// ClusterLookup returns the Lookup of the client get returns (get may fail, for example
// until a Connector has made its client): CLUSTER SLOTS on a cluster client, each range's
// node named by its master's address (or its node id when the address is unknown); nil
// for a client that is not a cluster's.
func ClusterLookup(get func() (rueidis.Client, error)) Lookup {
	return func(ctx context.Context) ([]Range, error) {
		c, err := get()
		if err != nil {
			return nil, err
		}
		if c.Mode() != rueidis.ClientModeCluster {
			return nil, nil
		}
		entries, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
		if err != nil {
			return nil, err
		}
		return parseSlots(entries)
	}
}

// parseSlots reads a CLUSTER SLOTS reply: [start, end, [ip, port, id, ...], replicas...].
func parseSlots(entries []rueidis.RedisMessage) ([]Range, error) {
	out := make([]Range, 0, len(entries))
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("health: CLUSTER SLOTS entry %v: %v", e, err)
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		master, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(master) < 2 || lo < 0 || hi < lo || hi >= NumSlots {
			return nil, fmt.Errorf("health: CLUSTER SLOTS entry %v", e)
		}
		ip, _ := master[0].ToString()
		port, _ := master[1].AsInt64()
		node := ""
		if ip != "" && ip != "?" {
			node = net.JoinHostPort(ip, strconv.FormatInt(port, 10))
		} else if len(master) > 2 {
			node, _ = master[2].ToString()
		}
		out = append(out, Range{Lo: uint16(lo), Hi: uint16(hi), Node: node})
	}
	return out, nil
}
