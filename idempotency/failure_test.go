package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// TestRedisDown: with Redis stopped, the default policy refuses to run the function (fail
// closed) and the breaker opens after 3 failures; FailOpen runs it unprotected.
func TestRedisDown(t *testing.T) {
	s := redistest.NewServer(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed, err := NewRedis(c, Options{Name: "down-closed", Breaker: breakerFor(t)})
	if err != nil {
		t.Fatal(err)
	}
	open, err := NewRedis(c, Options{Name: "down-open", FailOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("ran"), nil }
	var last error
	for range 4 {
		_, last = closed.Do(ctx, "k", "fp", fn)
		if last == nil {
			t.Fatal("fail closed: nil error with Redis down")
		}
	}
	if runs != 0 {
		t.Fatalf("fail closed: fn ran %d times", runs)
	}
	if !errors.Is(last, redstream.ErrCircuitOpen) {
		t.Errorf("after 4 failures: %v, want ErrCircuitOpen", last)
	}
	r, err := open.Do(ctx, "k", "fp", fn)
	if err != nil || runs != 1 || string(r.Value) != "ran" || r.Replayed {
		t.Fatalf("fail open: %+v, %v, %d runs", r, err, runs)
	}
}

func breakerFor(t *testing.T) (b redstream.BreakerOptions) {
	t.Helper()
	b.CoolDown = time.Minute
	return b
}

// TestRedisDeadline: a hung server answers no call; Do returns within about its Timeout.
func TestRedisDeadline(t *testing.T) {
	s := redistest.NewServer(t, "--enable-debug-command", "yes")
	c := redistest.NewClient(t, s.Addr)
	admin := redistest.NewClient(t, s.Addr)
	i, err := NewRedis(c, Options{Name: "hung", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := i.Do(context.Background(), "warm", "", value("")); err != nil {
		t.Fatal(err)
	}
	go admin.Do(context.Background(), admin.B().Arbitrary("DEBUG", "SLEEP").Args("1").Build())
	time.Sleep(50 * time.Millisecond)
	meter := redistest.NewStallMeter(t)
	var derr error
	took, stall := meter.Time(func() { _, derr = i.Do(context.Background(), "k", "fp", value("x")) })
	if !errors.Is(derr, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", derr)
	}
	if took > 50*time.Millisecond+100*time.Millisecond+stall {
		t.Fatalf("took %v (stall %v), want about the 50ms timeout", took, stall)
	}
}

// TestOutcomeWritesBypassOpenBreaker: with the breaker open, an acquire fails at once, and
// the writes after a function ran still reach Redis.
func TestOutcomeWritesBypassOpenBreaker(t *testing.T) {
	g, err := newGuard(redistest.Client(t), Options{Name: "bypass", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := g.br.For("k")
	for range 3 {
		tk, err := b.Allow()
		if err != nil {
			break
		}
		b.Done(ctx, tk, errors.New("down"))
	}
	calls := 0
	f := func(context.Context) error { calls++; return nil }
	if err := g.do(ctx, "k", true, f); !errors.Is(err, redstream.ErrCircuitOpen) || calls != 0 {
		t.Fatalf("guarded call on an open breaker: %v after %d calls", err, calls)
	}
	if err := g.do(ctx, "k", false, f); err != nil || calls != 1 {
		t.Fatalf("outcome write on an open breaker: %v after %d calls", err, calls)
	}
}
