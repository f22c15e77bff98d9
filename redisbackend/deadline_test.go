package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

type ctxKey struct{}

// TestCallContextEndsAtDeadline: a call's context over a context that never ends is done at
// its deadline with context.DeadlineExceeded, keeps the parent's values, and is not handed
// out again once it fired.
func TestCallContextEndsAtDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	ctx, rel := withTimeout(parent, 20*time.Millisecond)
	if _, ok := ctx.(*callCtx); !ok {
		t.Fatalf("withTimeout over a context without deadline or done channel = %T, want a pooled *callCtx", ctx)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 20*time.Millisecond {
		t.Fatalf("Deadline() = %v, %v; want within 20ms", dl, ok)
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Fatalf("Value lost the parent's value")
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end within 5s of a 20ms deadline")
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() after the deadline = %v, want context.DeadlineExceeded", err)
	}
	if context.Cause(ctx) != context.DeadlineExceeded {
		t.Fatalf("Cause = %v", context.Cause(ctx))
	}
	rel.done()
	for range 100 { // a fired context is never pooled: every context handed out is open
		c, r := withTimeout(context.Background(), time.Hour)
		if c == ctx {
			t.Fatal("a context that fired was handed out again")
		}
		if c.Err() != nil {
			t.Fatalf("a new call context has Err() = %v", c.Err())
		}
		r.done()
	}
}

// TestCallContextReused: a released call context comes back with a new deadline and an open
// channel, and the common path costs no allocation.
func TestCallContextReused(t *testing.T) {
	ctx, rel := withTimeout(context.Background(), time.Hour)
	rel.done()
	again, rel := withTimeout(context.Background(), 50*time.Millisecond)
	// sync.Pool may drop an entry (the race detector makes it drop some on purpose): only a
	// context that did come back is checked.
	if again == ctx {
		if dl, _ := again.Deadline(); time.Until(dl) > 50*time.Millisecond {
			t.Fatalf("a reused context kept its old deadline %v", dl)
		}
		select {
		case <-again.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a reused context did not end at its new deadline")
		}
	}
	rel.done()
	if raceEnabled {
		return // sync.Pool drops entries under the race detector, so the count is not the real one
	}
	allocs := testing.AllocsPerRun(1000, func() {
		_, r := withTimeout(context.Background(), time.Second)
		r.done()
	})
	if allocs != 0 {
		t.Fatalf("a call context over context.Background costs %v allocations, want 0", allocs)
	}
}

// TestCallContextOthers: a parent with a sooner deadline is used as is; a parent that can end
// goes through context.WithTimeout, and its cancellation ends the call's context.
func TestCallContextOthers(t *testing.T) {
	soon, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if ctx, rel := withTimeout(soon, time.Hour); ctx != soon {
		t.Fatalf("a parent whose deadline comes first was replaced by %T", ctx)
	} else {
		rel.done()
	}
	parent, stop := context.WithCancel(context.Background())
	ctx, rel := withTimeout(parent, time.Hour)
	defer rel.done()
	if _, ok := ctx.(*callCtx); ok {
		t.Fatal("a parent that can end got a call context that ignores it")
	}
	stop()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the parent did not end the call's context")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err() = %v, want context.Canceled", ctx.Err())
	}
	if ctx, rel := withTimeout(context.Background(), 0); ctx != context.Background() {
		t.Fatal("no timeout should leave the context as is")
	} else {
		rel.done()
	}
}

// TestDecisionAllocations: a decision on a redis-server and on a 3-master cluster (the
// caller's context without a deadline, the limiter's own timeout bounding the call) costs
// at most 5 allocations: the time argument, the Redis key, the key and argument slices, and
// rueidis's reply. The count is the process's (runtime.MemStats), so it is taken in a
// child process of its own (TestDecisionAllocationsChild), where no other test's goroutines
// allocate meanwhile.
func TestDecisionAllocations(t *testing.T) {
	env := []string{"REDSTREAM_ALLOCS_CHILD=1", "REDSTREAM_REDIS_ADDR=" + redistest.Addr(t),
		"REDSTREAM_REDIS_CLUSTER=" + strings.Join(redistest.ClusterAddrs(t), ",")}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDecisionAllocationsChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	counts := regexp.MustCompile(`(server|cluster): ([0-9.]+) allocations per decision`).FindAllStringSubmatch(string(out), -1)
	if len(counts) != 2 {
		t.Fatalf("the child measured %d engines, want server and cluster:\n%s", len(counts), out)
	}
	for _, c := range counts {
		n, _ := strconv.ParseFloat(c[2], 64)
		t.Logf("%s: %v allocations per decision", c[1], n)
		if raceEnabled {
			continue // sync.Pool drops entries under the race detector: the count is not the real one
		}
		if n > 5 {
			t.Errorf("%s: a decision costs %v allocations, want at most 5", c[1], n)
		}
	}
}

// TestDecisionAllocationsChild measures TestDecisionAllocations' counts in a process of its
// own; it prints "<engine>: N allocations per decision".
func TestDecisionAllocationsChild(t *testing.T) {
	if os.Getenv("REDSTREAM_ALLOCS_CHILD") == "" {
		t.Skip("run by TestDecisionAllocations")
	}
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) rueidis.Client
	}{
		{"server", func(t *testing.T) rueidis.Client { return redistest.Client(t) }},
		{"cluster", func(t *testing.T) rueidis.Client { return redistest.ClusterClient(t) }},
	} {
		l, err := NewLimiter(tc.client(t), redstream.TokenBucket(1e6, 1e6), Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		decide := func() {
			if _, err := l.AllowN(ctx, "allocs", time.Now(), 1); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 { // connections open, script loaded, pools filled
			decide()
		}
		fmt.Printf("%s: %v allocations per decision\n", tc.name, testing.AllocsPerRun(2000, decide))
	}
}
