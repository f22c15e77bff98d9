package stream_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// incrScript is the guarded write of the fencing tests: INCR KEYS[1].
const incrScript = "return redis.call('INCR', KEYS[1])"

// staleModes are the ways the stalled handler of TestStaleDeliveryRefused tries to complete
// its message once it runs again, one per round in turn.
var staleModes = []string{"ack", "sync-ack", "dead-letter", "fail"}

// fenceConfig is fastConfig with a shorter min-idle, so that rounds are fast.
func fenceConfig() stream.Config {
	cfg := fastConfig()
	cfg.Autoclaim = stream.AutoclaimConfig{MinIdle: 100 * time.Millisecond, Interval: 20 * time.Millisecond}
	return cfg
}

// TestStaleDeliveryChild is the stalled consumer of TestStaleDeliveryRefused, in a child
// process: for each message it announces "handling <id> <delivery>", waits for a line on
// its standard input (the parent stops it meanwhile), then makes a guarded write and
// completes the message as the message's Status says, and once the consumer has counted
// both refusals it prints "refused <id> <guard refused> <completion refused> <total refused>".
func TestStaleDeliveryChild(t *testing.T) {
	topic := os.Getenv("REDSTREAM_FENCE_TOPIC")
	if topic == "" {
		t.Skip("run by TestStaleDeliveryRefused")
	}
	client := redistest.Client(t)
	cfg := fenceConfig()
	cfg.ConsumerName = "stalled"
	set := cfg.Metrics
	c := newConsumer(t, client, cfg)
	in := bufio.NewScanner(os.Stdin)
	var want float64
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 1, MaxDeliveries: 100,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			fmt.Printf("handling %s %d\n", m.ID, m.DeliveryCount)
			if !in.Scan() {
				select {} // the parent is gone
			}
			_, gerr := m.Guard(ctx, incrScript, []string{"{" + topic + "}:stale"})
			refused := true // the consumer's own ack and dead letter: seen in the count only
			var ret error
			switch m.Body.Status {
			case "sync-ack":
				refused = errors.Is(m.Ack(ctx), stream.ErrStaleDelivery)
			case "dead-letter":
				refused = errors.Is(m.DeadLetter(ctx, "stale"), stream.ErrStaleDelivery)
			case "fail":
				ret = stream.Permanent(errors.New("stale failure"))
			}
			want += 2
			go func(id string, want float64) {
				deadline := time.Now().Add(10 * time.Second)
				got := staleRefused(set)
				for got < want && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
					got = staleRefused(set)
				}
				fmt.Printf("refused %s %t %t %v\n", id, errors.Is(gerr, stream.ErrStaleDelivery), refused, got)
			}(m.ID, want)
			return ret
		}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	select {}
}

// staleRefused sums redis_streaming_mq_stale_refused_total over its labels in set.
func staleRefused(set *metrics.Set) float64 {
	var b bytes.Buffer
	set.WritePrometheus(&b)
	total := 0.0
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "redis_streaming_mq_stale_refused_total{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			total += v
		}
	}
	return total
}

// TestStaleDeliveryRefused: a consumer process takes a message and is stopped (SIGSTOP) in
// its handler past its lease; another consumer takes the message over; then the first one
// runs again (SIGCONT) and tries to complete the message: a guarded write, then an ack (the
// consumer's batch or Message.Ack) or a dead letter (Message.DeadLetter or the consumer's,
// after a permanent failure). Every one of these writes is refused and counted, over 100
// rounds, whether the other consumer has completed the message by then or still holds it
// (and then completes it, its own writes accepted).
func TestStaleDeliveryRefused(t *testing.T) {
	addr := redistest.Addr(t)
	client := redistest.Client(t)
	cfg := fenceConfig()
	topic := newTopic(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestStaleDeliveryChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REDSTREAM_FENCE_TOPIC="+topic, "REDSTREAM_REDIS_ADDR="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := childLines(out)
	expectLine(t, lines, "started")
	p := newProducer(t, client, cfg)
	const rounds = 100
	for r := 0; r < rounds; r++ {
		staleRound(t, client, cmd, stdin, lines, p, topic, r)
	}
	ctx := context.Background()
	if n, err := client.Do(ctx, client.B().Get().Key("{"+topic+"}:stale").Build()).ToString(); !rueidis.IsRedisNil(err) {
		t.Errorf("stale guarded writes applied: %q, %v; want none", n, err)
	}
	if n, err := client.Do(ctx, client.B().Get().Key("{"+topic+"}:fresh").Build()).ToString(); n != strconv.Itoa(rounds) {
		t.Errorf("current guarded writes: %q (%v), want %d", n, err, rounds)
	}
	if n := xlen(t, client, "{"+topic+"}:dlq"); n != 0 {
		t.Errorf("%d dead letters written by stale deliveries, want 0", n)
	}
	if n := pending(t, client, topic, "g"); n != 0 {
		t.Errorf("%d entries pending at the end, want 0", n)
	}
}

// staleRound is round r of TestStaleDeliveryRefused.
func staleRound(t *testing.T, client rueidis.Client, cmd *exec.Cmd, stdin io.Writer, lines <-chan string, p *stream.Producer, topic string, r int) {
	t.Helper()
	mode := staleModes[r%len(staleModes)]
	holds := r%2 == 1 // the other consumer still holds the message when the stalled one runs again
	id := send(t, p, topic, order{ID: r, Status: mode})
	if got := expectLine(t, lines, "handling "); !strings.HasPrefix(got, id+" ") {
		t.Fatalf("round %d: the child handles %q, want %s", r, got, id)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan int64, 1), make(chan struct{})
	cfg := fenceConfig()
	cfg.ConsumerName = fmt.Sprintf("fresh-%d", r)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			entered <- m.DeliveryCount
			if holds {
				<-release
			}
			if _, err := m.Guard(ctx, incrScript, []string{"{" + topic + "}:fresh"}); err != nil {
				return stream.Permanent(fmt.Errorf("the current delivery's guarded write: %w", err))
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	defer func() { _ = c.Close(context.Background()) }()
	select {
	case n := <-entered:
		if n < 2 {
			t.Fatalf("round %d: taken over as delivery %d, want >= 2", r, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("round %d: the message was not taken over", r)
	}
	if !holds {
		eventually(t, 10*time.Second, "the takeover's ack", func() bool { return pending(t, client, topic, "g") == 0 })
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(expectLine(t, lines, "refused "))
	want := []string{id, "true", "true", strconv.Itoa(2 * (r + 1))}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("round %d (%s, held %t): refused %v, want %v (id, guard refused, completion refused, refusals counted)", r, mode, holds, got, want)
	}
	if holds {
		if owner := pendingOwner(t, client, topic, id); owner != cfg.ConsumerName {
			t.Fatalf("round %d (%s): after the stale completion the entry is pending for %q, want %s", r, mode, owner, cfg.ConsumerName)
		}
		close(release)
		eventually(t, 10*time.Second, "the takeover's ack", func() bool { return pending(t, client, topic, "g") == 0 })
	}
}

// pendingOwner returns the consumer entry id is pending for in group g, "" when none.
func pendingOwner(t *testing.T, client rueidis.Client, topic, id string) string {
	t.Helper()
	res, err := client.Do(context.Background(), client.B().Xpending().Key(topic).Group("g").Start(id).End(id).Count(1).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 {
		return ""
	}
	f, _ := res[0].ToArray()
	owner, _ := f[1].ToString()
	return owner
}

// childLines sends the lines of r on the returned channel, closed at EOF.
func childLines(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// expectLine skips lines until one starting with prefix and returns the rest of it.
func expectLine(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
		case <-timeout:
			t.Fatalf("the child did not print %q within 20 s", prefix)
		}
	}
}

// TestGuardNotDelivered: Guard on a message no Consumer delivered fails without running.
func TestGuardNotDelivered(t *testing.T) {
	m := stream.NewMessage(order{ID: 1})
	if _, err := m.Guard(context.Background(), incrScript, []string{"k"}); err == nil {
		t.Error("Guard of a message not delivered by a Consumer succeeded")
	}
}

// TestGuardCluster: on a 3-master Redis Cluster, a guarded write to a key with the stream's
// hash tag runs, and one to a key of another slot fails with an error, not a panic, and
// writes nothing.
func TestGuardCluster(t *testing.T) {
	client := redistest.ClusterClient(t)
	ctx := context.Background()
	topic := newTopic(t)
	other := "other-" + topic
	for i := 0; keySlot(other) == keySlot(topic); i++ {
		other = fmt.Sprintf("other-%d-%s", i, topic)
	}
	cfg := fastConfig()
	type outcome struct{ same, other error }
	got := make(chan outcome, 1)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			_, same := m.Guard(ctx, incrScript, []string{"{" + topic + "}:n"})
			_, elsewhere := m.Guard(ctx, incrScript, []string{other})
			got <- outcome{same, elsewhere}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	send(t, newProducer(t, client, cfg), topic, order{1, "x"})
	var o outcome
	select {
	case o = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the message was not handled")
	}
	if o.same != nil {
		t.Errorf("guarded write in the stream's slot: %v", o.same)
	}
	if o.other == nil || errors.Is(o.other, stream.ErrStaleDelivery) {
		t.Errorf("guarded write to another slot: %v, want a slot error", o.other)
	}
	if n, _ := client.Do(ctx, client.B().Get().Key("{"+topic+"}:n").Build()).ToString(); n != "1" {
		t.Errorf("the write in the stream's slot: %q, want 1", n)
	}
	if n, err := client.Do(ctx, client.B().Get().Key(other).Build()).ToString(); !rueidis.IsRedisNil(err) {
		t.Errorf("the write to another slot ran: %q, %v", n, err)
	}
}
