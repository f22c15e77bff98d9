// Package redistest starts real Redis servers for tests: one redis-server per test package
// (started on first use), a real 3-master Redis Cluster on request, and dedicated servers a
// test may stop and restart. Every process it starts is stopped by Main (call it from
// TestMain) or by the test's cleanup.
//
// Environment:
//   - REDSTREAM_REDIS_SERVER=/path/to/redis-server and REDSTREAM_REDIS_CLI=/path/to/redis-cli
//     choose the binaries (any Redis-compatible server: Valkey answers as redis-server);
//     REDSTREAM_REDIS_BIN=/dir takes both from one folder. The default is redis-server and
//     redis-cli in PATH.
//   - REDSTREAM_REDIS_ADDR=host:port uses that server instead of starting one.
//   - REDSTREAM_REDIS_CLUSTER=host:port[,host:port...] uses that cluster instead of starting one.
//   - REDSTREAM_REQUIRE_REDIS=1 turns the loud skip (no redis-server binary, no address)
//     into a test failure; CI sets it.
//
// Only a missing binary may skip. A server that is there but fails to start (a bad
// directive, a crash, no PING answer, a cluster that does not form) always fails the test,
// with the server's log.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Required reports whether REDSTREAM_REQUIRE_REDIS=1, in which case a missing server fails
// the test instead of skipping it.
func Required() bool { return os.Getenv("REDSTREAM_REQUIRE_REDIS") == "1" }

// errMissing reports a server or cli binary that is not installed: the one case that may
// skip instead of failing.
type errMissing struct{ what string }

func (e errMissing) Error() string { return e.what }

// ServerBin returns the redis-server binary the package starts: REDSTREAM_REDIS_SERVER,
// else redis-server in REDSTREAM_REDIS_BIN, else redis-server in PATH.
func ServerBin() (string, error) { return binary("REDSTREAM_REDIS_SERVER", "redis-server") }

// CLIBin returns the redis-cli binary used to create clusters: REDSTREAM_REDIS_CLI, else
// redis-cli in REDSTREAM_REDIS_BIN, else redis-cli in PATH.
func CLIBin() (string, error) { return binary("REDSTREAM_REDIS_CLI", "redis-cli") }

func binary(env, name string) (string, error) {
	p := os.Getenv(env)
	if p == "" {
		if dir := os.Getenv("REDSTREAM_REDIS_BIN"); dir != "" {
			p = filepath.Join(dir, name)
		}
	}
	if p == "" {
		found, err := exec.LookPath(name)
		if err != nil {
			return "", errMissing{name + " not found in PATH"}
		}
		return found, nil
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return "", errMissing{fmt.Sprintf("%s %s: %v", name, p, err)}
	}
	return found, nil
}

// unavailable skips the test (or fails it, when required) if the server binary is missing,
// and fails it, with the server's log, for any other reason the server did not start.
func unavailable(t testing.TB, why error) {
	t.Helper()
	var missing errMissing
	if !errors.As(why, &missing) {
		t.Fatalf("redistest: the Redis server failed to start (a test failure, not a skip): %v", why)
	}
	msg := fmt.Sprintf("\n*** redistest: NO REAL REDIS: %v ***\n*** install redis-server or set REDSTREAM_REDIS_ADDR; set REDSTREAM_REQUIRE_REDIS=1 to fail instead ***", why)
	if Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

var (
	procsMu sync.Mutex // guards procs
	procs   []*Server

	mu        sync.Mutex // guards the lazily started shared server and cluster
	shared    *Server
	sharedErr error
	cluster   []*Server
	clusterE  error
)

// Main runs the tests and then stops every server this package started. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	StopAll()
	return code
}

// StopAll stops every server started through this package that is still running and
// deletes their directories.
func StopAll() {
	mu.Lock()
	shared, sharedErr, cluster, clusterE = nil, nil, nil, nil
	mu.Unlock()
	procsMu.Lock()
	ps := procs
	procs = nil
	procsMu.Unlock()
	for _, p := range ps {
		p.remove()
	}
}

// Addr returns the address of this test package's shared redis-server, starting it on first
// use (or REDSTREAM_REDIS_ADDR). Tests sharing it must use distinct keys.
func Addr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("REDSTREAM_REDIS_ADDR"); a != "" {
		return a
	}
	mu.Lock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start(false)
	}
	s, err := shared, sharedErr
	mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	return s.Addr
}

// Client returns a new rueidis client to the shared server, closed when the test ends.
func Client(t testing.TB) rueidis.Client {
	t.Helper()
	return NewClient(t, Addr(t))
}

// NewClient returns a rueidis client to addrs (one address, or cluster seeds), closed when
// the test ends.
func NewClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("redistest: connect %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// ClusterAddrs returns the seed addresses of this test package's 3-master Redis Cluster,
// starting it on first use (or REDSTREAM_REDIS_CLUSTER).
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	if a := os.Getenv("REDSTREAM_REDIS_CLUSTER"); a != "" {
		return strings.Split(a, ",")
	}
	mu.Lock()
	if cluster == nil && clusterE == nil {
		cluster, clusterE = startCluster(3)
	}
	nodes, err := cluster, clusterE
	mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// ClusterClient returns a new rueidis client to the package's cluster, closed when the test
// ends.
func ClusterClient(t testing.TB) rueidis.Client {
	t.Helper()
	return NewClient(t, ClusterAddrs(t)...)
}

// Server is one redis-server process started by this package.
type Server struct {
	Addr    string
	Port    int
	dir     string
	args    []string
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
}

// NewServer starts a dedicated redis-server for t, stopped when the test ends. Tests that
// stop, restart or reconfigure Redis use it instead of the shared one. extra arguments are
// passed to redis-server (e.g. "--maxmemory", "1mb").
func NewServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := start(false, extra...)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.remove)
	return s
}

// remove stops the server and deletes its directory (the end of a test or of the package's
// tests; Stop alone keeps the directory, so that Restart finds its persisted data).
func (s *Server) remove() {
	s.Stop()
	_ = os.RemoveAll(s.dir)
}

var announce sync.Once

func start(clusterMode bool, extra ...string) (*Server, error) {
	bin, err := ServerBin()
	if err != nil {
		return nil, err
	}
	announce.Do(func() {
		out, _ := exec.Command(bin, "--version").Output()
		fmt.Fprintf(os.Stderr, "redistest: starting %s (%s)\n", bin, strings.TrimSpace(string(out)))
	})
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := freePort(clusterMode)
		if err != nil {
			return nil, err
		}
		args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning"}
		if clusterMode {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
				"--cluster-node-timeout", "5000")
		}
		args = append(args, extra...)
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, dir: dir, args: append([]string{bin}, args...)}
		lastErr = s.launch()
		if lastErr == nil {
			procsMu.Lock()
			procs = append(procs, s)
			procsMu.Unlock()
			return s, nil
		}
		if !errors.Is(lastErr, errRetry) {
			break // a bad directive or a crash: another port will not help
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("redistest: cannot start %s: %w", strings.Join(append([]string{bin}, extra...), " "), lastErr)
}

func (s *Server) launch() error {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	setProcAttr(cmd)
	out, _ := os.Create(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.Port)))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.stopped = cmd, done, false
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.Port)))
			text := strings.TrimSpace(string(log))
			if strings.Contains(text, "Address already in use") {
				return fmt.Errorf("%w (port taken): %s", errRetry, text)
			}
			return fmt.Errorf("redis-server exited (%v); its log:\n%s", cmd.ProcessState, text)
		default:
		}
		if ping(s.Addr) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	log, _ := os.ReadFile(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.Port)))
	return fmt.Errorf("%w: redis-server did not answer PING within 10s; its log:\n%s", errRetry, strings.TrimSpace(string(log)))
}

// errRetry marks a start that may succeed on another try: the port was taken meanwhile, or a
// loaded machine kept the server from answering in time.
var errRetry = errors.New("redistest: transient start failure")

// Stop kills the server and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done, stopped := s.cmd, s.done, s.stopped
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil || stopped {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart stops the server (losing its data, as after a crash without persistence) and
// starts it again on the same port.
func (s *Server) Restart() error {
	s.Stop()
	return s.launch()
}

// ping sends a RESP PING and waits for +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// freePort returns a loopback port that is free now (and, for cluster nodes, whose bus port
// port+10000 is free too).
func freePort(clusterBus bool) (int, error) {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !clusterBus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if lb, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000)); err == nil {
			lb.Close()
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free port")
}

func startCluster(n int) ([]*Server, error) {
	cli, err := CLIBin()
	if err != nil {
		return nil, err
	}
	nodes := make([]*Server, 0, n)
	fail := func(err error) ([]*Server, error) {
		for _, s := range nodes {
			s.Stop()
		}
		return nil, err
	}
	addrs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		s, err := start(true)
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("%s --cluster create: %v: %s", cli, err, out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range addrs {
		if err := waitClusterOK(ctx, cli, a); err != nil {
			return fail(err)
		}
	}
	// The client must see all masters agree on the slot map; one cluster-aware round trip
	// through every node confirms it.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	for i := 0; i < 64; i++ {
		k := fmt.Sprintf("redistest:probe:%d", i)
		if err := c.Do(ctx, c.B().Set().Key(k).Value("1").Px(time.Second).Build()).Error(); err != nil {
			if ctx.Err() != nil {
				return fail(fmt.Errorf("redistest: cluster not serving: %w", err))
			}
			time.Sleep(100 * time.Millisecond)
			i--
		}
	}
	return nodes, nil
}

func waitClusterOK(ctx context.Context, cli, addr string) error {
	for {
		out, err := exec.CommandContext(ctx, cli, "-h", "127.0.0.1", "-p", strings.TrimPrefix(addr[strings.LastIndex(addr, ":"):], ":"), "cluster", "info").Output()
		if err == nil && strings.Contains(string(out), "cluster_state:ok") && strings.Contains(string(out), "cluster_known_nodes:3") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster at %s not ok: %s", addr, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
