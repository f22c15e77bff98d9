package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/keyslot"
)

var errEOF = fmt.Errorf("redisbackend: gcra.lua: %w", io.EOF)

// TestConnectionLevel: the errors of a dropped or refused connection are connection-level;
// timeouts, error replies and other errors are not. Only a failed dial proves a command
// unsent.
func TestConnectionLevel(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	write := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	for _, tc := range []struct {
		name          string
		err           error
		conn, notSent bool
	}{
		{"nil", nil, false, false},
		{"EOF", errEOF, true, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true, false},
		{"reset", read, true, false},
		{"broken pipe", write, true, false},
		{"closed", net.ErrClosed, true, false},
		{"rueidis closing", rueidis.ErrClosing, true, false},
		{"refused", dial, true, true},
		{"wrapped refused", fmt.Errorf("x: %w", dial), true, true},
		{"dial timeout", dialTimeout, false, false},
		{"deadline", context.DeadlineExceeded, false, false},
		{"other", errDown, false, false},
		{"error reply", &rueidis.RedisError{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConnectionLevel(tc.err); got != tc.conn {
				t.Errorf("ConnectionLevel(%v) = %v, want %v", tc.err, got, tc.conn)
			}
			if got := NotSent(tc.err); got != tc.notSent {
				t.Errorf("NotSent(%v) = %v, want %v", tc.err, got, tc.notSent)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestBurstCollapses: the calls in flight when a connection drops fail at once with EOF and
// count as one failure; calls admitted after it count anew, so sequential calls to a dead
// server open the breaker after Failures; failures later than Burst count anew; timeouts
// never collapse; a probe's failure reopens; a negative Burst counts every failure.
func TestBurstCollapses(t *testing.T) {
	inFlight := func(h *harness, n int) []Ticket {
		tks := make([]Ticket, n)
		for i := range tks {
			var err error
			if tks[i], err = h.b.Allow(); err != nil {
				panic(err)
			}
		}
		return tks
	}
	t.Run("one dropped connection", func(t *testing.T) {
		h := newHarness(t, Config{})
		for round := 0; round < 10; round++ {
			for _, tk := range inFlight(h, 16) {
				h.b.Done(context.Background(), tk, errEOF)
			}
			h.call(t, nil) // the next call, on a new connection
		}
		st := h.b.Stats()
		if st.State != redstream.BreakerClosed || st.Failures != 160 || st.Collapsed != 150 || st.Opens != 0 || h.failed != 160 {
			t.Errorf("after 10 drops of 16 calls: %+v, OnFailure %d; want closed, 160 failures of which 150 collapsed", st, h.failed)
		}
		if lines := h.logLines(); len(lines) != 0 {
			t.Errorf("logs %q, want none", lines)
		}
	})
	t.Run("sequential calls to a dead server", func(t *testing.T) {
		h := newHarness(t, Config{})
		for i := 0; i < 3; i++ {
			if !h.call(t, errEOF) {
				t.Fatalf("call %d rejected", i)
			}
		}
		if st := h.b.Stats(); st.State != redstream.BreakerOpen || st.Collapsed != 0 {
			t.Errorf("after 3 sequential EOFs: %+v, want open, nothing collapsed", st)
		}
	})
	t.Run("three waves", func(t *testing.T) {
		// 64 callers, each calling again at once after its failure: the second wave was
		// admitted after the first failure, and counts.
		h := newHarness(t, Config{})
		for wave := 0; wave < 3; wave++ {
			for _, tk := range inFlight(h, 64) {
				h.b.Done(context.Background(), tk, errEOF)
			}
		}
		if st := h.b.Stats(); st.State != redstream.BreakerOpen || st.Opens != 1 {
			t.Errorf("after 3 waves: %+v, want open", st)
		}
	})
	t.Run("later than the burst", func(t *testing.T) {
		h := newHarness(t, Config{Burst: 10 * time.Millisecond})
		tks := inFlight(h, 3)
		for _, tk := range tks {
			h.b.Done(context.Background(), tk, errEOF)
			h.clock.Advance(11 * time.Millisecond)
		}
		if st := h.b.Stats(); st.State != redstream.BreakerOpen || st.Collapsed != 0 {
			t.Errorf("3 EOFs 11 ms apart: %+v, want open", st)
		}
	})
	t.Run("timeouts count each", func(t *testing.T) {
		h := newHarness(t, Config{})
		for _, tk := range inFlight(h, 3) {
			h.b.Done(context.Background(), tk, context.DeadlineExceeded)
		}
		if st := h.b.Stats(); st.State != redstream.BreakerOpen || st.Collapsed != 0 {
			t.Errorf("3 timeouts at once: %+v, want open", st)
		}
	})
	t.Run("probe", func(t *testing.T) {
		h := newHarness(t, Config{})
		stale := inFlight(h, 1)[0]
		for i := 0; i < 3; i++ {
			h.call(t, errEOF)
		}
		h.clock.Advance(DefaultCoolDown)
		probe, err := h.b.Allow()
		if err != nil || !probe.probe {
			t.Fatalf("after the cool-down: %+v, %v; want a probe", probe, err)
		}
		h.b.Done(context.Background(), stale, errEOF) // an older call: ignored
		h.b.Done(context.Background(), probe, errEOF)
		if st := h.b.Stats(); st.State != redstream.BreakerOpen || st.Opens != 2 {
			t.Errorf("after a probe's EOF: %+v, want open again", st)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		h := newHarness(t, Config{Burst: -1})
		for _, tk := range inFlight(h, 3) {
			h.b.Done(context.Background(), tk, errEOF)
		}
		if st := h.b.Stats(); st.State != redstream.BreakerOpen || st.Collapsed != 0 {
			t.Errorf("Burst -1, 3 EOFs at once: %+v, want open", st)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		// 8 goroutines each fail 16 calls in flight, then succeed once: however the
		// failures interleave, no 3 count in a row.
		br, err := New(Config{Logger: discard(), Clock: newClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{b: br}
		var wg sync.WaitGroup
		for round := 0; round < 20; round++ {
			tks := inFlight(h, 128)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, tk := range tks[16*g : 16*g+16] {
						h.b.Done(context.Background(), tk, errEOF)
					}
				}()
			}
			wg.Wait()
			for i := 0; i < 3; i++ { // the error-rate rule: more successes than failures
				tk, err := h.b.Allow()
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				h.b.Done(context.Background(), tk, nil)
			}
		}
		if st := h.b.Stats(); st.State != redstream.BreakerClosed || st.Failures-st.Collapsed != 20 {
			t.Errorf("20 drops of 128 calls: %+v, want closed and 20 counted failures", st)
		}
	})
}

// fakeTopology is a Lookup whose answer tests set.
type fakeTopology struct {
	mu     sync.Mutex
	ranges []Range
	err    error
	calls  atomic.Int64
}

func (f *fakeTopology) lookup(ctx context.Context) ([]Range, error) {
	f.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("lookup without a deadline")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ranges, f.err
}

func (f *fakeTopology) set(r []Range, err error) {
	f.mu.Lock()
	f.ranges, f.err = r, err
	f.mu.Unlock()
}

// waitLookups waits until f was called n times and the Set has finished the lookup.
func waitLookups(t *testing.T, s *Set, f *fakeTopology, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() < n || s.busy.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups after 5 s, want %d", f.calls.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// keyOn returns a key of a slot in [lo, hi].
func keyOn(t *testing.T, lo, hi uint16) string {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		k := fmt.Sprint("{k", i, "}:x")
		if s := keyslot.Of(k); s >= lo && s <= hi {
			return k
		}
	}
	t.Fatalf("no key in slots %d-%d", lo, hi)
	return ""
}

// TestSetPerNode: a Set looks the topology up on first use and gives each master its own
// breaker: a master failing opens only its breaker (the others' keys keep working, the Set's
// State reads open), its changes carry its node, and an opening makes the next use look the
// topology up again; a failover (the slots move to another node) gives the slots that node's
// closed breaker, and the failed node's breaker closes (one Change) with its counts kept. Until the first lookup answers, every key has the default breaker.
func TestSetPerNode(t *testing.T) {
	clock := newClock()
	topo := &fakeTopology{ranges: []Range{{0, 8191, "a:1"}, {8192, NumSlots - 1, "b:1"}}}
	var mu sync.Mutex
	var changes []Change
	s, err := NewSet(Config{Clock: clock.Now, Logger: discard(), BreakerOptions: redstream.BreakerOptions{OnStateChange: func(c Change) {
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	}}}, topo.lookup)
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := keyOn(t, 0, 8191), keyOn(t, 8192, NumSlots-1)
	if b := s.For(ka); b != s.Default() {
		t.Errorf("before the first lookup: %p, want the default breaker", b)
	}
	waitLookups(t, s, topo, 1)
	a, b := s.For(ka), s.For(kb)
	if a == s.Default() || b == s.Default() || a == b || s.ForNode("a:1") != a || s.ForSlot(keyslot.Of(kb)) != b {
		t.Fatalf("breakers a %p b %p default %p: want one per node", a, b, s.Default())
	}
	for i := 0; i < 3; i++ {
		tk, err := s.For(ka).Allow()
		if err != nil {
			t.Fatal(err)
		}
		s.For(ka).Done(context.Background(), tk, errEOF)
	}
	if a.State() != redstream.BreakerOpen || b.State() != redstream.BreakerClosed || s.State() != redstream.BreakerOpen {
		t.Fatalf("after 3 failures on a: a %v, b %v, Set %v; want a open, b closed, Set open", a.State(), b.State(), s.State())
	}
	// A failover moves a's slots to c; the opening made a lookup due, which the next
	// call starts.
	topo.set([]Range{{0, 8191, "c:1"}, {8192, NumSlots - 1, "b:1"}}, nil)
	if tk, err := b.Allow(); err != nil {
		t.Errorf("b's key with a open: %v", err)
	} else {
		b.Done(context.Background(), tk, nil)
	}
	if _, err := a.Allow(); !errors.Is(err, redstream.ErrCircuitOpen) {
		t.Errorf("a's key with a open: %v, want ErrCircuitOpen", err)
	}
	mu.Lock()
	if len(changes) != 1 || changes[0].Node != "a:1" || changes[0].To != redstream.BreakerOpen {
		t.Errorf("changes %+v, want a:1 opening", changes)
	}
	mu.Unlock()
	if got := s.NodeStates(); got["a:1"] != redstream.BreakerOpen || got["b:1"] != redstream.BreakerClosed || len(got) != 3 {
		t.Errorf("NodeStates %v", got)
	}
	if st := s.Stats(); st.Failures != 3 || st.Successes != 1 || st.Opens != 1 || st.State != redstream.BreakerOpen {
		t.Errorf("Stats %+v", st)
	}

	s.For(kb)
	waitLookups(t, s, topo, 2)
	if c := s.For(ka); c == a || c == s.Default() || c.State() != redstream.BreakerClosed || s.For(kb) != b {
		t.Errorf("after the failover: a's key has %p (%v), want c's closed breaker; b's key %p, want b's %p", c, c.State(), s.For(kb), b)
	}
	if s.ForNode("a:1") != nil {
		t.Errorf("a's breaker kept after a left the topology")
	}
	mu.Lock()
	if len(changes) != 2 || changes[1].Node != "a:1" || changes[1].To != redstream.BreakerClosed {
		t.Errorf("changes %+v, want a:1 closing as it leaves the topology", changes)
	}
	mu.Unlock()
	if st := s.Stats(); st.Failures != 3 || st.Opens != 1 || st.State != redstream.BreakerClosed {
		t.Errorf("Stats after a left: %+v, want a's counts kept", st)
	}

	// Healthy: the next lookup is 30 s away; a failed lookup keeps the topology and
	// retries after a second.
	s.For(ka)
	clock.Advance(refreshHealthy - time.Millisecond)
	s.For(ka)
	time.Sleep(10 * time.Millisecond)
	if n := topo.calls.Load(); n != 2 {
		t.Errorf("%d lookups before 30 s, want 2", n)
	}
	topo.set(nil, errDown)
	clock.Advance(time.Millisecond)
	s.For(ka)
	waitLookups(t, s, topo, 3)
	if s.For(kb) != b {
		t.Errorf("a failed lookup changed the topology")
	}
	topo.set([]Range{{0, NumSlots - 1, "b:1"}}, nil)
	clock.Advance(refreshFailing)
	s.For(ka)
	waitLookups(t, s, topo, 4)
	if s.For(ka) != b {
		t.Errorf("after the retry: a's key not on b")
	}
}

// TestSetSingleServer: a lookup answering nil (not a cluster) is made once, and every key
// has the default breaker; a nil Lookup makes none.
func TestSetSingleServer(t *testing.T) {
	topo := &fakeTopology{}
	s, err := NewSet(Config{Logger: discard()}, topo.lookup)
	if err != nil {
		t.Fatal(err)
	}
	s.For("x")
	waitLookups(t, s, topo, 1)
	for i := 0; i < 100; i++ {
		if s.For(fmt.Sprint(i)) != s.Default() {
			t.Fatal("a single server's key has a breaker of its own")
		}
	}
	time.Sleep(10 * time.Millisecond)
	if n := topo.calls.Load(); n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
	s2, err := NewSet(Config{Logger: discard()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.For("x") != s2.Default() || s2.State() != redstream.BreakerClosed {
		t.Error("a Set without lookup")
	}
}

// TestSetForAllocs: choosing a key's breaker allocates nothing.
func TestSetForAllocs(t *testing.T) {
	topo := &fakeTopology{ranges: []Range{{0, 8191, "a:1"}, {8192, NumSlots - 1, "b:1"}}}
	s, err := NewSet(Config{Logger: discard()}, topo.lookup)
	if err != nil {
		t.Fatal(err)
	}
	s.For("x")
	waitLookups(t, s, topo, 1)
	if n := testing.AllocsPerRun(1000, func() {
		tk, err := s.For("streaming:tb:{user:1}:x").Allow()
		if err == nil {
			s.For("streaming:tb:{user:1}:x").Done(context.Background(), tk, nil)
		}
	}); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
