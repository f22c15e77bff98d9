package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// incrScript touches two keys of one hash slot, as every redstream script does.
var incrScript = rueidis.NewLuaScript(`
local a = redis.call('INCRBY', KEYS[1], ARGV[1])
local b = redis.call('INCRBY', KEYS[2], ARGV[1])
return {a, b, string.format('%d', a + b)}`)

func runScript(t *testing.T, c rueidis.Client, tag string) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		vals, err := incrScript.Exec(ctx, c, []string{"{" + tag + "}:a", "{" + tag + "}:b"}, []string{"5"}).ToArray()
		if err != nil {
			t.Fatalf("script on %s: %v", tag, err)
		}
		a, _ := vals[0].AsInt64()
		s, _ := vals[2].ToString()
		if want := int64(5 * i); a != want || s != fmt.Sprint(2*want) {
			t.Fatalf("round %d: got a=%d sum=%s, want %d and %d", i, a, s, want, 2*want)
		}
	}
}

func TestScriptOnSingleServer(t *testing.T) {
	runScript(t, Client(t), "single")
}

func TestScriptOnCluster(t *testing.T) {
	c := ClusterClient(t)
	nodes := c.Nodes()
	if len(nodes) < 3 {
		t.Fatalf("cluster client sees %d nodes, want 3", len(nodes))
	}
	// Tags chosen to land on different masters: the cluster really spreads slots.
	slots := map[string]bool{}
	for i := 0; i < 30; i++ {
		tag := fmt.Sprintf("user:%d", i)
		runScript(t, c, tag)
		out, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(tag).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		slots[fmt.Sprint(out*3/16384)] = true
	}
	if len(slots) != 3 {
		t.Fatalf("30 tags reached %d thirds of the slot space, want 3", len(slots))
	}
}

func TestDedicatedServerRestart(t *testing.T) {
	s := NewServer(t)
	c := NewClient(t, s.Addr)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// Data is gone after a restart without persistence; the client reconnects.
	var err error
	for i := 0; i < 50; i++ {
		if err = c.Do(ctx, c.B().Get().Key("k").Build()).Error(); rueidis.IsRedisNil(err) {
			return
		}
	}
	t.Fatalf("after restart: got %v, want a nil reply", err)
}

// TestStartFailureIsNotMissing: a server that is installed but refuses its arguments is an
// error carrying its log, never the "missing binary" case that may skip.
func TestStartFailureIsNotMissing(t *testing.T) {
	if _, err := ServerBin(); err != nil {
		unavailable(t, err)
	}
	_, err := start(false, "--no-such-directive", "yes")
	if err == nil {
		t.Fatal("a server with an unknown directive started")
	}
	var missing errMissing
	if errors.As(err, &missing) {
		t.Fatalf("start failure reported as a missing binary: %v", err)
	}
	if !strings.Contains(err.Error(), "no-such-directive") || !strings.Contains(err.Error(), "its log") {
		t.Fatalf("error lacks the directive or the server's log: %v", err)
	}
}

// TestMissingBinary: the binary comes from REDSTREAM_REDIS_SERVER / REDSTREAM_REDIS_BIN, and
// a missing one is the missing-binary case.
func TestMissingBinary(t *testing.T) {
	t.Setenv("REDSTREAM_REDIS_SERVER", filepath.Join(t.TempDir(), "redis-server"))
	_, err := start(false)
	var missing errMissing
	if !errors.As(err, &missing) {
		t.Fatalf("start with a missing binary: %v, want the missing-binary error", err)
	}
	t.Setenv("REDSTREAM_REDIS_SERVER", "")
	dir := t.TempDir()
	t.Setenv("REDSTREAM_REDIS_BIN", dir)
	if bin, err := ServerBin(); !errors.As(err, &missing) {
		t.Fatalf("ServerBin with an empty REDSTREAM_REDIS_BIN = %q, %v; want missing", bin, err)
	}
	if bin, err := CLIBin(); !errors.As(err, &missing) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("CLIBin with an empty REDSTREAM_REDIS_BIN = %q, %v; want missing in %s", bin, err, dir)
	}
}
