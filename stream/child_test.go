package stream_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/redstream-go/redstream/stream"
)

// startChild runs the test named test of this test binary as a child process with env added
// to the environment, its standard error written to stderr (nil discards it), and returns
// once the child printed "started" (the rest of its output is drained).
func startChild(t *testing.T, test string, stderr io.Writer, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
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
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd
}

// serveChild starts c in a child process, tells startChild so ("started") and runs until
// the process is killed.
func serveChild(t *testing.T, c *stream.Consumer) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	select {}
}
