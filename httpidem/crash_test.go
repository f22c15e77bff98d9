package httpidem_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redstream-go/redstream/httpidem"
	"github.com/redstream-go/redstream/idempotency"
	"github.com/redstream-go/redstream/internal/redistest"
)

// childEnv carries the Redis address to the child process of TestKilledMidRequest.
const childEnv = "HTTPIDEM_CHILD_REDIS"

const crashLease = 600 * time.Millisecond

func crashMiddleware(t *testing.T, addr string, next http.Handler) http.Handler {
	t.Helper()
	idem, err := idempotency.NewRedis(redistest.NewClient(t, addr), idempotency.Options{Name: "killed", Lease: crashLease})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httpidem.New(httpidem.Options{Idempotent: idem, Principal: byUser})
	if err != nil {
		t.Fatal(err)
	}
	return m.Wrap(next)
}

// TestKilledMidRequestChild is the process TestKilledMidRequest kills: it takes the key,
// says "started" and hangs in the handler.
func TestKilledMidRequestChild(t *testing.T) {
	addr := os.Getenv(childEnv)
	if addr == "" {
		t.Skip("run by TestKilledMidRequest in a child process")
	}
	h := crashMiddleware(t, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("started")
		select {}
	}))
	do(t, h, req{user: "u", key: []string{`"crash-key"`}, body: "pay 10"})
}

// TestKilledMidRequest: a process SIGKILLed while its handler runs holds the key until its
// lease runs out (a retry meanwhile is 409); the next retry runs the handler once, and the
// one after it gets the stored response.
func TestKilledMidRequest(t *testing.T) {
	addr := redistest.Addr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidRequestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "started" {
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !strings.Contains(cmd.ProcessState.String(), "killed") {
		t.Fatalf("child: %v; stderr %s", cmd.ProcessState, stderr.String())
	}
	killed := time.Now()

	var runs atomic.Int64
	h := crashMiddleware(t, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "charged")
	}))
	retry := func() int { return do(t, h, req{user: "u", key: []string{`"crash-key"`}, body: "pay 10"}).Code }
	if c := retry(); c != http.StatusConflict && time.Since(killed) < crashLease {
		t.Fatalf("retry within the dead holder's lease: %d, want 409", c)
	}
	time.Sleep(crashLease + 100*time.Millisecond)
	for n := range 3 {
		if c := retry(); c != http.StatusCreated {
			t.Fatalf("retry %d after the lease: %d, want 201", n, c)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times after the crash, want 1", runs.Load())
	}
}
