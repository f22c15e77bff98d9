package console

import "testing"

// TestParseFacts: the servers' INFO fields, Valkey's own version, an unlimited maxmemory,
// and which policies can evict queue data.
func TestParseFacts(t *testing.T) {
	redis := "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nuptime_in_seconds:42\r\n# Clients\r\nconnected_clients:7\r\n" +
		"# Memory\r\nused_memory_human:1.20M\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\n# Stats\r\ninstantaneous_ops_per_sec:1234\r\n"
	f := parseFacts(redis, false)
	if f.Server != "Redis 7.0.15" || f.Mode != "standalone" || f.Uptime != 42 || f.Clients != 7 || f.UsedMemory != "1.20M" ||
		f.MaxMemory != "" || f.Policy != "noeviction" || f.OpsPerSec != 1234 || f.EvictsQueues {
		t.Errorf("Redis facts: %+v", f)
	}
	valkey := "redis_version:7.2.4\nvalkey_version:8.1.1\nredis_mode:cluster\nmaxmemory:1073741824\nmaxmemory_human:1.00G\nmaxmemory_policy:volatile-lru\n"
	f = parseFacts(valkey, true)
	if f.Server != "Valkey 8.1.1" || f.MaxMemory != "1.00G" || !f.EvictsQueues || !f.Cluster {
		t.Errorf("Valkey facts: %+v", f)
	}
	if f := parseFacts("garbage\n:\n#x:y\n", false); f.Server != "unknown server" || f.EvictsQueues {
		t.Errorf("facts of a reply without fields: %+v", f)
	}
}
