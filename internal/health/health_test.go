package health

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redstream-go/redstream"
)

// fakeClock is a manually advanced clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var errDown = errors.New("connection refused")

type harness struct {
	b       *Breaker
	clock   *fakeClock
	logs    *bytes.Buffer
	changes []Change
	failed  int
}

func newHarness(t *testing.T, c Config) *harness {
	t.Helper()
	h := &harness{clock: newClock(), logs: &bytes.Buffer{}}
	c.Clock = h.clock.Now
	c.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c.OnStateChange = func(ch Change) { h.changes = append(h.changes, ch) }
	c.OnFailure = func(error) { h.failed++ }
	b, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	return h
}

// call makes one call whose backend answers with err; it reports whether the call reached
// the backend.
func (h *harness) call(t *testing.T, err error) bool {
	t.Helper()
	tk, aerr := h.b.Allow()
	if aerr != nil {
		if !errors.Is(aerr, redstream.ErrCircuitOpen) {
			t.Fatalf("Allow error %v does not wrap ErrCircuitOpen", aerr)
		}
		return false
	}
	h.b.Done(context.Background(), tk, err)
	return true
}

func (h *harness) logLines() []string {
	return strings.FieldsFunc(h.logs.String(), func(r rune) bool { return r == '\n' })
}

func TestConsecutiveFailuresOpenAndRecover(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: 3, CoolDown: time.Second}, Component: "test: limiter", Degraded: "decisions follow the failure policy",
		Attrs: []slog.Attr{slog.String("prefix", "p")}})
	for i := 0; i < 2; i++ {
		if !h.call(t, errDown) {
			t.Fatalf("call %d rejected before the threshold", i)
		}
	}
	if got := h.b.State(); got != redstream.BreakerClosed {
		t.Fatalf("after 2 failures: state %v, want closed", got)
	}
	if !h.call(t, errDown) || h.b.State() != redstream.BreakerOpen {
		t.Fatalf("after 3 failures: state %v, want open", h.b.State())
	}
	for i := 0; i < 100; i++ {
		if h.call(t, nil) {
			t.Fatalf("call %d reached the backend while open", i)
		}
	}
	h.clock.Advance(999 * time.Millisecond)
	if h.call(t, nil) {
		t.Fatal("call reached the backend before the cool-down ended")
	}
	// Cool-down over: one probe; it fails, so the breaker opens again, without a new Warn.
	h.clock.Advance(time.Millisecond)
	if !h.call(t, errDown) {
		t.Fatal("no probe after the cool-down")
	}
	if got := h.b.State(); got != redstream.BreakerOpen {
		t.Fatalf("after a failed probe: %v, want open", got)
	}
	if h.call(t, nil) {
		t.Fatal("a failed probe did not restart the cool-down")
	}
	h.clock.Advance(time.Second)
	if !h.call(t, nil) {
		t.Fatal("no probe after the second cool-down")
	}
	if got := h.b.State(); got != redstream.BreakerClosed {
		t.Fatalf("after a good probe: %v, want closed", got)
	}
	st := h.b.Stats()
	want := Stats{State: redstream.BreakerClosed, Successes: 1, Failures: 4, Rejected: 102, Opens: 2}
	if st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if h.failed != 4 {
		t.Errorf("OnFailure called %d times, want 4", h.failed)
	}
	var path []string
	for _, c := range h.changes {
		path = append(path, c.From.String()+">"+c.To.String())
	}
	if got, want := strings.Join(path, " "), "closed>open open>half-open half-open>open open>half-open half-open>closed"; got != want {
		t.Errorf("transitions %q, want %q", got, want)
	}
	if h.changes[0].Err != errDown || !h.changes[0].At.Equal(newClock().t) {
		t.Errorf("first change = %+v, want the error and the fake time", h.changes[0])
	}
	lines := h.logLines()
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[1], "level=INFO") {
		t.Fatalf("log lines %q, want one WARN and one INFO", lines)
	}
	for _, s := range []string{"test: limiter: backend failing, circuit breaker open; decisions follow the failure policy", "prefix=p", "connection refused", "consecutive_failures=3"} {
		if !strings.Contains(lines[0], s) {
			t.Errorf("warn line %q lacks %q", lines[0], s)
		}
	}
	if !strings.Contains(lines[1], "backend answers again") || !strings.Contains(lines[1], "prefix=p") {
		t.Errorf("info line %q", lines[1])
	}
}

func TestSuccessResetsConsecutive(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: 3, ErrorRate: -1}})
	for i := 0; i < 50; i++ {
		h.call(t, errDown)
		h.call(t, errDown)
		h.call(t, nil)
	}
	if got := h.b.State(); got != redstream.BreakerClosed {
		t.Fatalf("state %v after alternating failures with the rate rule off, want closed", got)
	}
	if len(h.logLines()) != 0 {
		t.Errorf("logs %q, want none", h.logLines())
	}
}

func TestErrorRateOpens(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: -1, ErrorRate: 0.5, MinCalls: 20, Window: 10 * time.Second}})
	// 9 calls, 5 failures: too few calls to judge.
	for i := 0; i < 9; i++ {
		var err error
		if i%2 == 0 {
			err = errDown
		}
		h.call(t, err)
		h.clock.Advance(100 * time.Millisecond)
	}
	if h.b.State() != redstream.BreakerClosed {
		t.Fatal("opened below MinCalls")
	}
	// Old calls leave the window: 30 successes over 12 s, then 3 failures in 4 calls.
	for i := 0; i < 30; i++ {
		h.call(t, nil)
		h.clock.Advance(400 * time.Millisecond)
	}
	opened := -1
	for i := 0; i < 200 && opened < 0; i++ {
		var err error
		if i%4 != 3 {
			err = errDown
		}
		h.call(t, err)
		h.clock.Advance(50 * time.Millisecond)
		if h.b.State() == redstream.BreakerOpen {
			opened = i
		}
	}
	if opened < 0 {
		t.Fatal("a 75% error rate never opened the breaker")
	}
	// The window holds the last 10 s: about 25 successes from the 400 ms phase plus the
	// new calls; 50% is reached after about 40 of them (0.75k >= 0.5(k + 25 - k/8)).
	if opened < 30 || opened > 50 {
		t.Errorf("opened after %d calls at a 75%% error rate, want about 40", opened)
	}
}

func TestHalfOpenProbeSlots(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: 1, CoolDown: time.Second, Probes: 2}})
	h.call(t, errDown)
	h.clock.Advance(time.Second)
	t1, err1 := h.b.Allow()
	t2, err2 := h.b.Allow()
	_, err3 := h.b.Allow()
	if err1 != nil || err2 != nil || !errors.Is(err3, redstream.ErrCircuitOpen) {
		t.Fatalf("half-open with 2 probes: %v %v %v, want two probes and a rejection", err1, err2, err3)
	}
	if h.b.State() != redstream.BreakerHalfOpen {
		t.Fatalf("state %v, want half-open", h.b.State())
	}
	h.b.Done(context.Background(), t1, nil)
	if h.b.State() != redstream.BreakerHalfOpen {
		t.Fatal("one of two probes closed the breaker")
	}
	h.b.Done(context.Background(), t2, nil)
	if h.b.State() != redstream.BreakerClosed {
		t.Fatal("two good probes did not close the breaker")
	}
}

func TestCallerCancelIsNotAFailure(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 10; i++ {
		tk, err := h.b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		h.b.Done(ctx, tk, context.Canceled)
	}
	if h.b.State() != redstream.BreakerClosed || h.b.Stats().Failures != 0 {
		t.Fatalf("caller cancellations counted: %+v", h.b.Stats())
	}
	// A cancelled probe frees its slot.
	h.call(t, errDown)
	h.clock.Advance(DefaultCoolDown)
	tk, err := h.b.Allow()
	if err != nil || !tk.probe {
		t.Fatalf("no probe: %v", err)
	}
	h.b.Done(ctx, tk, context.Canceled)
	if !h.call(t, nil) || h.b.State() != redstream.BreakerClosed {
		t.Fatalf("the slot of a cancelled probe was not freed: %v", h.b.State())
	}
}

func TestLostProbeIsGivenUp(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: 1, CoolDown: time.Second}})
	h.call(t, errDown)
	h.clock.Advance(time.Second)
	if _, err := h.b.Allow(); err != nil { // a probe whose outcome is never reported
		t.Fatal(err)
	}
	if h.call(t, nil) {
		t.Fatal("second probe while the first is in flight")
	}
	h.clock.Advance(time.Second)
	if !h.call(t, nil) || h.b.State() != redstream.BreakerClosed {
		t.Fatalf("a lost probe kept the breaker half-open: %v", h.b.State())
	}
}

func TestStaleOutcomesIgnored(t *testing.T) {
	h := newHarness(t, Config{BreakerOptions: redstream.BreakerOptions{Failures: 2}})
	slow, err := h.b.Allow() // a call started while closed, answered after the breaker opened
	if err != nil {
		t.Fatal(err)
	}
	h.call(t, errDown)
	h.call(t, errDown)
	if h.b.State() != redstream.BreakerOpen {
		t.Fatal("not open")
	}
	h.b.Done(context.Background(), slow, nil)
	if h.b.State() != redstream.BreakerOpen {
		t.Fatal("a stale success closed the breaker")
	}
	h.clock.Advance(DefaultCoolDown)
	h.call(t, nil) // probe closes
	late, _ := h.b.Allow()
	h.call(t, errDown)
	h.b.Done(context.Background(), late, errDown)
	if h.b.State() != redstream.BreakerOpen {
		t.Fatalf("two failures after closing: %v, want open", h.b.State())
	}
	if got := len(h.logLines()); got != 3 {
		t.Errorf("%d log lines, want 3 (warn, info, warn): %q", got, h.logLines())
	}
}

func TestConcurrentOutageLogsOnce(t *testing.T) {
	var logs syncBuffer
	var changes atomic.Int64
	b, err := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), BreakerOptions: redstream.BreakerOptions{OnStateChange: func(Change) { changes.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if tk, err := b.Allow(); err == nil {
					b.Done(context.Background(), tk, errDown)
				}
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
		t.Errorf("%d warnings, want 1:\n%s", got, logs.String())
	}
	if changes.Load() != 1 || b.State() != redstream.BreakerOpen {
		t.Errorf("%d changes, state %v; want 1, open", changes.Load(), b.State())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestOpenIsFast(t *testing.T) {
	b, err := New(Config{BreakerOptions: redstream.BreakerOptions{Failures: 1, CoolDown: time.Hour}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := b.Allow()
	b.Done(context.Background(), tk, errDown)
	start := time.Now()
	for i := 0; i < 10000; i++ {
		if _, err := b.Allow(); err == nil {
			t.Fatal("allowed while open")
		}
	}
	// 10,000 rejections in well under a second: each is far below the 5 ms an open
	// breaker may cost (typically a few hundred nanoseconds).
	if took := time.Since(start); took > time.Second {
		t.Errorf("10000 rejections took %v", took)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, c := range map[string]Config{
		"rate above 1":      {BreakerOptions: redstream.BreakerOptions{ErrorRate: 1.5}},
		"negative window":   {BreakerOptions: redstream.BreakerOptions{Window: -time.Second}},
		"negative cooldown": {BreakerOptions: redstream.BreakerOptions{CoolDown: -1}},
		"negative probes":   {BreakerOptions: redstream.BreakerOptions{Probes: -1}},
		"negative mincalls": {BreakerOptions: redstream.BreakerOptions{MinCalls: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(c); !errors.Is(err, redstream.ErrInvalidConfig) {
				t.Errorf("New(%+v) = %v, want ErrInvalidConfig", c, err)
			}
		})
	}
}

func TestWithTimeout(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > 50*time.Millisecond {
		t.Fatalf("deadline %v %v, want within 50ms", dl, ok)
	}
	outer, cancelOuter := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelOuter()
	if got, c := WithTimeout(outer, time.Second); got != outer {
		t.Error("a sooner caller deadline was not kept as is")
	} else {
		c()
	}
	if got, c := WithTimeout(outer, 0); got != outer {
		t.Error("d = 0 changed the context")
	} else {
		c()
	}
}
