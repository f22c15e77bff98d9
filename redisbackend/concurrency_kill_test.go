package redisbackend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// The lease kill test: holders in 3 child processes contend for the slots of one key, each
// recording in Redis, by the server's clock, when it held a lease: "open <token> <before>
// <after>" around an admitted Acquire (before: TIME read before the call, so the lease
// expires no sooner than before + TTL; after: TIME read after it, when the lease is
// certainly held, and it expires no later than after + TTL; "try <holder>" precedes the
// call, so a holder killed during it leaves a try without an open), "renew <token>" before
// an Extend and "ext <token> <before> <after>" after a successful one, "lost <token>" after
// an Extend that found the lease expired (its holder stalled past the TTL), and "close
// <token> <t>" with t read before Release. A killed holder leaves opens without a close.
const (
	killLimit = 3
	killTTL   = 600 * time.Millisecond
)

// serverMicros reads the server's TIME in µs.
func serverMicros(ctx context.Context, c rueidis.Client) (int64, error) {
	ts, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
	if err != nil || len(ts) != 2 {
		return 0, fmt.Errorf("TIME: %v %v", ts, err)
	}
	s, _ := strconv.ParseInt(ts[0], 10, 64)
	us, _ := strconv.ParseInt(ts[1], 10, 64)
	return s*1e6 + us, nil
}

// TestLeaseHolderChild is a holder process of TestLeaseKill: two goroutines acquire a slot,
// hold it 10 to 60 ms, extend it, hold it again and release it, until the process is killed.
// Each prints "held" once it holds a lease and "free" before it releases one.
func TestLeaseHolderChild(t *testing.T) {
	key := os.Getenv("REDSTREAM_LEASE_KEY")
	if key == "" {
		t.Skip("run by TestLeaseKill")
	}
	c := redistest.Client(t)
	l, err := NewConcurrencyLimiter(c, []redstream.Spec{redstream.Concurrency(killLimit, killTTL)},
		Options{KeyPrefix: os.Getenv("REDSTREAM_LEASE_PREFIX"), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logKey := key + ":log"
	var out sync.Mutex
	say := func(s string) { out.Lock(); os.Stdout.WriteString(s + "\n"); out.Unlock() }
	push := func(ctx context.Context, s string) {
		if err := c.Do(ctx, c.B().Rpush().Key(logKey).Element(s).Build()).Error(); err != nil {
			panic(err)
		}
	}
	hold := func() { time.Sleep(time.Duration(10+rand.IntN(50)) * time.Millisecond) }
	ctx := context.Background()
	for g := range 2 {
		name := os.Getenv("REDSTREAM_LEASE_HOLDER") + "." + strconv.Itoa(g)
		go func() {
			for {
				before, err := serverMicros(ctx, c)
				if err != nil {
					panic(err)
				}
				push(ctx, "try "+name)
				lease, err := l.Acquire(ctx, key, time.Time{}, 1)
				if err != nil {
					panic(err)
				}
				if !lease.Allowed {
					time.Sleep(min(lease.RetryAfter, 20*time.Millisecond) + time.Millisecond)
					continue
				}
				after, _ := serverMicros(ctx, c)
				tok := strconv.FormatUint(lease.Token, 10)
				push(ctx, fmt.Sprintf("open %s %d %d %s", tok, before, after, name))
				say("held")
				hold()
				push(ctx, "renew "+tok)
				before, _ = serverMicros(ctx, c)
				if lease, err = l.Extend(ctx, lease, time.Time{}); errors.Is(err, redstream.ErrLeaseLost) {
					push(ctx, "lost "+tok)
					say("free")
					continue
				} else if err != nil {
					panic(err)
				}
				after, _ = serverMicros(ctx, c)
				push(ctx, fmt.Sprintf("ext %s %d %d", tok, before, after))
				hold()
				at, _ := serverMicros(ctx, c)
				push(ctx, fmt.Sprintf("close %s %d", tok, at))
				say("free")
				if _, err := l.Release(ctx, lease, time.Time{}); err != nil {
					panic(fmt.Sprintf("release: %v", err))
				}
			}
		}()
	}
	say("started")
	select {}
}

// holder is one child process of TestLeaseKill and how many leases it holds now; killed
// is the server's time once it is dead (every lease it took or extended expires by killed
// plus the TTL).
type holder struct {
	cmd    *exec.Cmd
	held   atomic.Int64
	done   chan struct{}
	killed int64
}

func startHolder(t *testing.T, env ...string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, done: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch sc.Text() {
			case "started":
				close(started)
			case "held":
				h.held.Add(1)
			case "free":
				h.held.Add(-1)
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	select {
	case <-started:
	case <-h.done:
		t.Fatal("a holder exited before it started")
	case <-time.After(30 * time.Second):
		t.Fatal("a holder never started")
	}
	return h
}

// killHolding SIGKILLs h at a moment it holds a lease (waiting up to 10 s for one) and
// records the server's time 100 ms later, once any call it had sent has run.
func killHolding(t *testing.T, c rueidis.Client, h *holder) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.held.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a holder never held a lease")
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	<-h.done
	time.Sleep(100 * time.Millisecond)
	now, err := serverMicros(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	h.killed = now
}

// leaseSpan is one lease of the log: certainly held from start to end (server µs); a lease
// left by a killed holder expires by expiry, or by its holder's death plus the TTL when it
// was killed during an Extend (renewing).
type leaseSpan struct {
	start, end, expiry int64
	closed, renewing   bool
}

// readSpans parses the holders' log: a lease is held at least until its last "before" plus
// the TTL, and until its close if that comes first (a holder that stalls past the TTL loses
// its lease before it closes it); one never closed (its holder was killed) expires no later
// than its last "after" plus the TTL. dangling names the holders (process index) whose
// last call was an Acquire the log does not know the outcome of.
func readSpans(t *testing.T, lines []string) (spans map[string]*leaseSpan, dangling map[string]bool) {
	t.Helper()
	spans, last := map[string]*leaseSpan{}, map[string]string{}
	for _, line := range lines {
		f := strings.Fields(line)
		if f[0] == "try" && len(f) == 2 {
			last[f[1]] = "try"
			continue
		}
		var v int64
		if len(f) > 2 {
			v, _ = strconv.ParseInt(f[2], 10, 64)
		}
		switch {
		case f[0] == "open" && len(f) == 5:
			last[f[4]] = "open"
			after, _ := strconv.ParseInt(f[3], 10, 64)
			spans[f[1]] = &leaseSpan{start: after, end: v + killTTL.Microseconds(), expiry: after + killTTL.Microseconds()}
		case f[0] == "renew" && len(f) == 2 && spans[f[1]] != nil:
			spans[f[1]].renewing = true
		case f[0] == "lost" && len(f) == 2 && spans[f[1]] != nil:
			spans[f[1]].closed, spans[f[1]].renewing = true, false
		case f[0] == "ext" && len(f) == 4 && spans[f[1]] != nil:
			after, _ := strconv.ParseInt(f[3], 10, 64)
			spans[f[1]].end, spans[f[1]].expiry = v+killTTL.Microseconds(), after+killTTL.Microseconds()
			spans[f[1]].renewing = false
		case f[0] == "close" && spans[f[1]] != nil:
			spans[f[1]].end, spans[f[1]].closed = min(spans[f[1]].end, v), true
		default:
			t.Fatalf("bad log line %q", line)
		}
	}
	dangling = map[string]bool{}
	for g, ev := range last {
		if ev == "try" {
			dangling[strings.Split(g, ".")[0]] = true
		}
	}
	return spans, dangling
}

// maxHeld returns the most spans that overlap at one instant (an end at t frees its slot
// before a start at t).
func maxHeld(spans map[string]*leaseSpan) int {
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, 1}, ev{s.end, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	held, most := 0, 0
	for _, e := range evs {
		held += e.delta
		most = max(most, held)
	}
	return most
}

// TestLeaseKill: 3 processes, 2 holders each, contend for 3 slots of one key; they are
// SIGKILLed one after the other while holding leases. A watcher counts the units the key
// holds every millisecond, and the holders' own log says when each lease was held: at no
// instant are more than 3 held. Once every holder is dead, each slot a killed holder held
// is free by its lease's expiry: all 3 are acquired at once no later than the expiry of the
// latest lease left behind.
func TestLeaseKill(t *testing.T) {
	addr := redistest.Addr(t)
	c := redistest.Client(t)
	key, prefix := uniq("lease-kill"), uniq("lk")
	l, err := NewConcurrencyLimiter(c, []redstream.Spec{redstream.Concurrency(killLimit, killTTL)}, Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var most, samples atomic.Int64
	watched := make(chan struct{})
	go func() { // the watcher: live units of the key by the server's clock, atomically
		defer close(watched)
		count := rueidis.NewLuaScript(`local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', now - tonumber(ARGV[1])), '+inf')`)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			n, err := count.Exec(ctx, c, l.Keys(key), []string{strconv.FormatInt(killTTL.Microseconds(), 10)}).AsInt64()
			if err != nil {
				continue
			}
			samples.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		}
	}()
	env := []string{"REDSTREAM_REDIS_ADDR=" + addr, "REDSTREAM_LEASE_KEY=" + key, "REDSTREAM_LEASE_PREFIX=" + prefix}
	var hs []*holder
	for i := range 3 {
		hs = append(hs, startHolder(t, append(env, "REDSTREAM_LEASE_HOLDER="+strconv.Itoa(i))...))
	}
	for _, h := range hs {
		time.Sleep(time.Second)
		killHolding(t, c, h)
	}
	close(stop)
	<-watched

	lines, err := c.Do(ctx, c.B().Lrange().Key(key+":log").Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	spans, dangling := readSpans(t, lines)
	var left []*leaseSpan
	var expiry int64
	renewing := 0
	for _, s := range spans {
		if !s.closed {
			left = append(left, s)
			expiry = max(expiry, s.expiry)
		}
		if s.renewing { // killed during an Extend that may have run: by its death plus the TTL
			renewing++
			for _, h := range hs {
				expiry = max(expiry, h.killed+killTTL.Microseconds())
			}
		}
	}
	for i, h := range hs { // a lease the log lost expires by its holder's death plus the TTL
		if dangling[strconv.Itoa(i)] {
			expiry = max(expiry, h.killed+killTTL.Microseconds())
		}
	}
	t.Logf("%d leases, %d left by killed holders (%d holders killed inside Acquire, %d leases inside Extend); watcher: %d samples, at most %d units held", len(spans), len(left), len(dangling), renewing, samples.Load(), most.Load())
	if len(spans) < 20 || len(left) < 1 || samples.Load() < 100 {
		t.Fatalf("too little contention to prove anything: %d leases, %d left behind, %d samples", len(spans), len(left), samples.Load())
	}
	if m := most.Load(); m > killLimit {
		t.Errorf("the watcher saw %d units held, limit %d", m, killLimit)
	}
	if m := maxHeld(spans); m > killLimit {
		t.Errorf("the holders' log shows %d leases held at once, limit %d", m, killLimit)
	}

	// Every slot comes back by the expiry of the leases the killed holders left: the
	// latest of them expires by expiry, when all 3 slots are free.
	for {
		now, err := serverMicros(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(ctx, key, time.Time{}, killLimit)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Allowed {
			t.Logf("all %d slots free %v after the last killed lease's expiry bound", killLimit, time.Duration(now-expiry)*time.Microsecond)
			break
		}
		if now > expiry {
			t.Fatalf("at %d µs, %d µs after the latest killed lease's expiry, Acquire(%d) is denied: %+v",
				now, now-expiry, killLimit, lease.Decision)
		}
		time.Sleep(min(lease.RetryAfter, 5*time.Millisecond))
	}
}
