package benchmarks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bullmqPeer drives BullMQ (bullmq/peer.mjs in Node.js) on the benchmarks' Redis, so that
// BullMQ takes its turn in the interleaved rounds of the stream benchmarks. Install it once
// with `cd benchmarks/bullmq && npm ci`; without it (or without node) the BullMQ contender is
// left out of the run, with a log line saying so.
type bullmqPeer struct {
	cmd *exec.Cmd
	in  *json.Encoder
	out *bufio.Scanner
}

// bullmqReply is one line peer.mjs answers.
type bullmqReply struct {
	OK    bool    `json:"ok"`
	Error string  `json:"error"`
	Added int     `json:"added"`
	Count int     `json:"count"`
	MS    float64 `json:"ms"`
}

// startBullMQ starts peer.mjs against addr, or returns nil (and logs why) when BullMQ is not
// installed.
func startBullMQ(b *testing.B, addr string) *bullmqPeer {
	b.Helper()
	if _, err := os.Stat(filepath.Join("bullmq", "node_modules", "bullmq")); err != nil {
		b.Log("BullMQ left out: run `npm ci` in benchmarks/bullmq to compare with it")
		return nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		b.Log("BullMQ left out: no node on PATH")
		return nil
	}
	cmd := exec.Command(node, "peer.mjs", addr)
	cmd.Dir = "bullmq"
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &bullmqPeer{cmd: cmd, in: json.NewEncoder(stdin), out: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	return p
}

// do sends one command and waits for its reply.
func (p *bullmqPeer) do(cmd map[string]any) (bullmqReply, error) {
	if err := p.in.Encode(cmd); err != nil {
		return bullmqReply{}, err
	}
	if !p.out.Scan() {
		return bullmqReply{}, fmt.Errorf("bullmq peer exited: %v", p.out.Err())
	}
	var r bullmqReply
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("bullmq peer: %q: %w", p.out.Text(), err)
	}
	if !r.OK {
		return r, fmt.Errorf("bullmq peer: %s", r.Error)
	}
	return r, nil
}

// lib returns the benchLib adding n jobs per chunk with op ("add", "add-delayed",
// "add-unique") to queue.
func (p *bullmqPeer) lib(op, queue string, dup bool) benchLib {
	return benchLib{name: "bullmq", chunk: func(start, n int) error {
		_, err := p.do(map[string]any{"op": op, "queue": queue, "start": start, "n": n, "dup": dup})
		return err
	}}
}

// count returns the number of jobs in queue, in any state.
func (p *bullmqPeer) count(queue string) (int, error) {
	r, err := p.do(map[string]any{"op": "count", "queue": queue})
	return r.Count, err
}
