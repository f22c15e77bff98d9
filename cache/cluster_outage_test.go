package cache

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

// dedicatedCluster starts a 3-master cluster of its own for t (the package's shared one
// must survive), with a short node timeout so that a killed master is noticed quickly.
func dedicatedCluster(t *testing.T) ([]*redistest.Server, []string) {
	t.Helper()
	cli, err := redistest.CLIBin()
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*redistest.Server
	var addrs []string
	for range 3 {
		s := redistest.NewServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000")
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	if out, err := exec.Command(cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	for _, n := range nodes {
		waitClusterState(t, cli, n.Port, "ok", 3)
	}
	return nodes, addrs
}

func waitClusterState(t *testing.T, cli string, port int, state string, known int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(cli, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "cluster", "info").Output()
		if err == nil && strings.Contains(string(out), "cluster_state:"+state) && strings.Contains(string(out), fmt.Sprintf("cluster_known_nodes:%d", known)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: cluster not %s: %s", port, state, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterMasterKilled: a cache on a real 3-master cluster whose first master is killed
// keeps answering every GetOrLoad and GetMany under "load", each within a bound of the
// per-call timeout (from Redis or from the loader: through the killed node's connection
// errors, the cluster's CLUSTERDOWN replies once the others notice, and the open breaker);
// after the master is restarted the cache uses Redis again.
func TestClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	nodes, addrs := dedicatedCluster(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cfg := testConfig(t)
	cfg.Timeout = DefaultTimeout
	cfg.OnRedisError = LoadOnError
	c := newCache(t, client, cfg)
	ctx := context.Background()
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("user:%d", i))
	}
	load := func(_ context.Context, ks []string) (map[string]int, error) {
		m := map[string]int{}
		for _, k := range ks {
			n, _ := strconv.Atoi(strings.TrimPrefix(k, "user:"))
			m[k] = n
		}
		return m, nil
	}
	check := func(phase string) time.Duration {
		t.Helper()
		begin := time.Now()
		got, err := GetMany(ctx, c, keys, DefaultTTL, load)
		if err != nil || len(got) != len(keys) {
			t.Fatalf("%s: GetMany = %d values, %v", phase, len(got), err)
		}
		for _, k := range keys[:6] {
			v, err := GetOrLoad(ctx, c, k, DefaultTTL, func(ctx context.Context) (int, error) {
				m, _ := load(ctx, []string{k})
				return m[k], nil
			})
			if want, _ := strconv.Atoi(strings.TrimPrefix(k, "user:")); err != nil || v != want {
				t.Fatalf("%s: GetOrLoad(%s) = %d, %v", phase, k, v, err)
			}
		}
		return time.Since(begin)
	}
	check("healthy")
	if st := c.Stats(); st.Loads != 1 {
		t.Fatalf("healthy: %d loads, want 1", st.Loads)
	}

	nodes[0].Stop()
	var slowest time.Duration
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		slowest = max(slowest, check("master killed"))
		time.Sleep(20 * time.Millisecond)
	}
	st := c.Stats()
	t.Logf("master killed: slowest round (1 GetMany of 30 keys + 6 GetOrLoad) %v; stats %+v", slowest.Round(time.Millisecond), st)
	// A round is seven operations of at most a few calls each, each bounded by Timeout.
	if slowest > 7*3*DefaultTimeout+2*time.Second {
		t.Errorf("slowest round %v", slowest)
	}
	if st.Fallbacks == 0 {
		t.Errorf("no fallback counted with a master down: %+v", st)
	}

	if err := nodes[0].Restart(); err != nil {
		t.Fatal(err)
	}
	cli, _ := redistest.CLIBin()
	for _, n := range nodes {
		waitClusterState(t, cli, n.Port, "ok", 3)
	}
	back := time.Now()
	deadline := back.Add(20 * time.Second)
	for {
		before := c.Stats().Fallbacks
		check("restarted")
		if c.Stats().Fallbacks == before {
			t.Logf("a whole round answered by Redis %v after the cluster was ok again", time.Since(back).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache still falls back 20s after the master came back: %+v", c.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
