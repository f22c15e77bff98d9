//go:build unix

package main

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redstream-go/redstream/internal/redistest"
)

// TestStoppedServer: a real redis-server frozen by SIGSTOP (the kernel still accepts
// connections, nothing answers) fails each command within its --timeout; after SIGCONT the
// same command works.
func TestStoppedServer(t *testing.T) {
	bin, err := redistest.ServerBin()
	if err != nil {
		if redistest.Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	port := freeTCPPort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := runCmd(t, "streams", "--redis", addr, "--timeout", "1s"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"streams", "--redis", addr, "--timeout", "2s"},
		{"dlq", "topics", "--redis", addr, "--timeout", "2s"},
		{"dlq", "purge", "--yes", "--topic", "t", "--redis", addr, "--timeout", "2s"},
	} {
		start := time.Now()
		_, err := runCmd(t, args...)
		d := time.Since(start)
		if err == nil || d > 20*time.Second {
			t.Errorf("%v on a stopped server: %v after %v, want an error after about 2s", args, err, d)
		}
		t.Logf("%v: %v after %v", args, err, d.Round(time.Millisecond))
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, "streams", "--redis", addr); err != nil {
		t.Errorf("after SIGCONT: %v\n%s", err, out)
	}
}
