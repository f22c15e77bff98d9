package stream_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/stream"
)

// lostDelivery is a script that adds an entry and delivers it to a consumer in the same
// step, before a blocked reader can take it: the state a read whose reply was lost leaves
// (the entry is pending for the consumer, which never saw it).
const lostDelivery = `local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', '1', 'STREAMS', KEYS[1], '>')
return id`

// TestLostReadReply: an entry delivered to the consumer by a read whose reply was lost is
// handled as soon as a read fails (here: its connection is killed), with its delivery count
// kept, instead of after MinIdle (60 s by default).
func TestLostReadReply(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	admin := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	cfg := stream.Config{ConsumerName: "me", Metrics: vm.NewSet()}
	topic := newTopic(t)
	got := make(chan *stream.Message[order], 4)
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g",
		Handle: func(ctx context.Context, m *stream.Message[order]) error { got <- m; return nil }}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	time.Sleep(200 * time.Millisecond) // the reader blocks in XREADGROUP

	// A field list as the producer writes it, taken from a real send.
	p := newProducer(t, client, cfg)
	send(t, p, topic, order{1, "sent"})
	if m := <-got; m.Body.ID != 1 {
		t.Fatalf("got %+v", m.Body)
	}
	first, err := admin.Do(ctx, admin.B().Xrange().Key(topic).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil || len(first) != 1 {
		t.Fatalf("XRANGE: %v %v", first, err)
	}
	args := []string{"g", "me"}
	for k, v := range first[0].FieldValues {
		if k == "body" {
			v = `{"id":2,"status":"lost"}`
		}
		args = append(args, k, v)
	}
	id, err := admin.Do(ctx, admin.B().Eval().Script(lostDelivery).Numkeys(1).Key(topic).Arg(args...).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Fatalf("%s handled before any read failed: the script did not leave it undelivered", m.ID)
	case <-time.After(300 * time.Millisecond):
	}
	killed := time.Now()
	if err := admin.Do(ctx, admin.B().ClientKill().TypeNormal().SkipmeYes().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		took := time.Since(killed)
		t.Logf("the entry whose delivery reply was lost was handled %v after the read failed", took.Round(time.Millisecond))
		// The lost read counted delivery 1; handing the entry out again counts delivery 2,
		// so that the count stays a fence (no two hand-outs share one).
		if m.ID != id || m.DeliveryCount != 2 {
			t.Errorf("handled %s as delivery %d, want %s as delivery 2", m.ID, m.DeliveryCount, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the entry whose reply was lost was not handled within 5 s of the failed read (min-idle is %v)", stream.DefaultMinIdle)
	}
	eventually(t, 5*time.Second, "nothing pending", func() bool { return pending(t, admin, topic, "g") == 0 })
}

// TestHungServerDefaults: with the default settings, a producer that retries every failed
// send and a consumer keep going through a 4 s hang (SIGSTOP); within 5 s of SIGCONT every
// entry in the stream has been handled, including those whose send or read reply was lost.
func TestHungServerDefaults(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redistest.NewClient(t, srv.Addr)
	admin := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	cfg := stream.Config{Metrics: vm.NewSet()}
	topic := newTopic(t)
	var mu sync.Mutex
	handled := map[string]bool{}
	c := newConsumer(t, client, cfg)
	if err := stream.Register(c, stream.Handler[order]{Topic: topic, Group: "g", Concurrency: 4,
		Handle: func(ctx context.Context, m *stream.Message[order]) error {
			mu.Lock()
			handled[m.ID] = true
			mu.Unlock()
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	startConsumer(t, c)
	p := newProducer(t, client, cfg)
	pid := serverPID(t, admin)
	stop := make(chan struct{})
	sent := make(chan int)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := p.Send(sctx, topic, stream.NewMessage(order{i, "hang"}))
			cancel()
			if err == nil {
				n++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	time.Sleep(4 * time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	n := <-sent
	var inStream []string
	var took time.Duration
	eventually(t, 70*time.Second, "every entry in the stream handled", func() bool {
		list, err := admin.Do(ctx, admin.B().Xrange().Key(topic).Start("-").End("+").Build()).AsXRange()
		if err != nil {
			return false
		}
		inStream = inStream[:0]
		mu.Lock()
		defer mu.Unlock()
		for _, e := range list {
			if !handled[e.ID] {
				return false
			}
			inStream = append(inStream, e.ID)
		}
		took = time.Since(resumed)
		return true
	})
	t.Logf("%d sends succeeded, %d entries in the stream, all handled %v after SIGCONT", n, len(inStream), took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("every entry handled %v after SIGCONT, want within 5 s", took.Round(time.Millisecond))
	}
}
