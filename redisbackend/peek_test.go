package redisbackend

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/memory"
)

// peekCase is one limiter the peek tests run: one spec, or several (a multi-limiter).
type peekCase struct {
	name  string
	specs []redstream.Spec
}

var peekCases = []peekCase{
	{"token-bucket", []redstream.Spec{redstream.TokenBucket(5, 10)}},
	{"leaky-bucket", []redstream.Spec{redstream.LeakyBucket(4, 5)}},
	{"sliding", []redstream.Spec{redstream.SlidingWindow(200*time.Millisecond, 5)}},
	{"sliding-counter", []redstream.Spec{redstream.SlidingCounter(200*time.Millisecond, 6)}},
	{"fixed", []redstream.Spec{redstream.FixedWindow(200*time.Millisecond, 4)}},
	{"multi", []redstream.Spec{redstream.TokenBucket(3, 10), redstream.SlidingWindow(time.Second, 8), redstream.FixedWindow(time.Second, 7)}},
}

// newPeekPair returns a Redis limiter of pc on c and an in-process one of the same specs.
func newPeekPair(t *testing.T, c rueidis.Client, pc peekCase) (*Limiter, *memory.Limiter) {
	t.Helper()
	var (
		l   *Limiter
		err error
	)
	// The explicit times are in the past: a long margin keeps Redis (by its own clock) from
	// expiring state the sequence still needs on a loaded machine.
	opts := Options{KeyPrefix: uniq("peek:" + pc.name), ExpiryMargin: time.Hour}
	if len(pc.specs) == 1 {
		l, err = NewLimiter(c, pc.specs[0], opts)
	} else {
		l, err = NewMultiLimiter(c, pc.specs, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	ref, err := memory.NewMultiLimiter(pc.specs, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l, ref
}

// TestPeekIsTheNextDecision: on miniredis, a real redis-server and a real cluster, for the
// five algorithms and a multi-limiter, at explicit times going forward, standing still and
// going back: two peeks answer the same, the peek is exactly the decision AllowN then
// returns (and what the in-process engine peeks and decides), a twin key that is never
// peeked at gets the same decisions (a peek changes nothing), and a peeked-at new key
// leaves no Redis key behind.
func TestPeekIsTheNextDecision(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			for _, pc := range peekCases {
				t.Run(pc.name, func(t *testing.T) {
					l, ref := newPeekPair(t, c, pc)
					rng := rand.New(rand.NewPCG(1, uint64(len(pc.name))))
					keyA, keyB := "user:{7} \x00\xff", "user:twin"
					now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
					max := int64(3)
					for _, p := range l.coreLimits() {
						max = min(max, p.Max())
					}
					admitted, denied := 0, 0
					for step := 0; step < 80; step++ {
						switch r := rng.IntN(10); {
						case r < 6:
							now = now.Add(time.Duration(rng.IntN(150)) * time.Millisecond)
						case r < 8: // standing still
						default:
							now = now.Add(-time.Duration(rng.IntN(30)) * time.Millisecond)
						}
						n := 1 + rng.Int64N(max)
						// A peek at another time, which must change nothing either.
						if _, err := l.PeekN(ctx, keyA, now.Add(time.Duration(rng.IntN(500))*time.Millisecond), 1); err != nil {
							t.Fatal(err)
						}
						p1, err := l.PeekN(ctx, keyA, now, n)
						if err != nil {
							t.Fatalf("step %d: PeekN: %v", step, err)
						}
						p2, err := l.PeekN(ctx, keyA, now, n)
						if err != nil || p2 != p1 {
							t.Fatalf("step %d: second peek %+v, %v; first %+v", step, p2, err, p1)
						}
						each, err := l.PeekEach(ctx, keyA, now, n)
						if err != nil || len(each) != len(pc.specs) {
							t.Fatalf("step %d: PeekEach = %d decisions, %v", step, len(each), err)
						}
						mp, err := ref.PeekN(ctx, keyA, now, n)
						if err != nil || mp != p1 {
							t.Fatalf("step %d: memory peeks %+v (%v), Redis %+v", step, mp, err, p1)
						}
						mEach, err := ref.PeekEach(ctx, keyA, now, n)
						if err != nil {
							t.Fatal(err)
						}
						for i := range each {
							if each[i] != mEach[i] {
								t.Fatalf("step %d: limit %d: memory peeks %+v, Redis %+v", step, i, mEach[i], each[i])
							}
						}
						d, err := l.AllowN(ctx, keyA, now, n)
						if err != nil || d != p1 {
							t.Fatalf("step %d at %v, n=%d: AllowN = %+v, %v; the peek said %+v", step, now.Format("15:04:05.000"), n, d, err, p1)
						}
						twin, err := l.AllowN(ctx, keyB, now, n)
						if err != nil || twin != d {
							t.Fatalf("step %d: the key never peeked at got %+v, %v; the peeked one %+v", step, twin, err, d)
						}
						if md, err := ref.AllowN(ctx, keyA, now, n); err != nil || md != d {
							t.Fatalf("step %d: memory decides %+v, %v; Redis %+v", step, md, err, d)
						}
						if d.Allowed {
							admitted++
						} else {
							denied++
						}
					}
					if admitted == 0 || denied == 0 {
						t.Fatalf("%d admitted, %d denied: the sequence does not exercise both", admitted, denied)
					}
					fresh := "never-decided"
					if d, err := l.PeekN(ctx, fresh, now, 1); err != nil || !d.Allowed {
						t.Fatalf("peek of a new key = %+v, %v", d, err)
					}
					n, err := c.Do(ctx, c.B().Exists().Key(l.Keys(fresh)...).Build()).AsInt64()
					if err != nil || n != 0 {
						t.Fatalf("after a peek of a new key, %d of its keys exist (%v)", n, err)
					}
					t.Logf("%d admitted, %d denied; every peek was the next decision", admitted, denied)
				})
			}
		})
	}
}

// TestPeekServerTime: with the zero time the peek reads the server's TIME, as Allow does.
func TestPeekServerTime(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			ctx := context.Background()
			l, err := NewLimiter(c, redstream.FixedWindow(time.Hour, 10), Options{KeyPrefix: uniq("peek:time")})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if _, err := l.AllowN(ctx, "k", time.Time{}, 1); err != nil {
					t.Fatal(err)
				}
			}
			d, err := l.PeekN(ctx, "k", time.Time{}, 1)
			// A window boundary may fall between the calls (once an hour): then all 10 remain.
			if err != nil || !d.Allowed || d.Limit != 10 || (d.Remaining != 6 && d.Remaining != 9) || d.ResetAfter <= 0 || d.ResetAfter > time.Hour {
				t.Fatalf("Peek at the server's time after 3 requests = %+v, %v; want allowed, 6 remaining", d, err)
			}
		})
	}
}

// TestPeekBadInput: bad input is the error AllowN returns, before any Redis call.
func TestPeekBadInput(t *testing.T) {
	c, m := miniClient(t)
	l, err := NewMultiLimiter(c, []redstream.Spec{redstream.TokenBucket(5, 1), redstream.FixedWindow(time.Second, 3)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int) { maxBulk = old }(maxBulk)
	maxBulk = 1 << 20 // as a server with a 1 MB proto-max-bulk-len, so the test key stays small
	m.Close()         // no Redis: an error other than the expected one would be a Redis error
	ctx := context.Background()
	tests := []struct {
		name string
		key  string
		now  time.Time
		n    int64
		want error
	}{
		{"empty key", "", time.Time{}, 1, redstream.ErrEmptyKey},
		{"zero cost", "k", time.Time{}, 0, redstream.ErrInvalidCost},
		{"negative cost", "k", time.Time{}, -1, redstream.ErrInvalidCost},
		{"cost above the smallest limit", "k", time.Time{}, 4, redstream.ErrCostTooLarge},
		{"before the epoch", "k", time.Unix(-1, 0), 1, redstream.ErrInvalidTime},
		{"key too large", strings.Repeat("x", maxBulk), time.Time{}, 1, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.PeekN(ctx, tt.key, tt.now, tt.n); !errors.Is(err, tt.want) {
				t.Errorf("PeekN: %v, want %v", err, tt.want)
			}
			if _, err := l.PeekEach(ctx, tt.key, tt.now, tt.n); !errors.Is(err, tt.want) {
				t.Errorf("PeekEach: %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := l.PeekN(ctx, "k", time.Time{}, 1); err == nil || !strings.Contains(err.Error(), "peek.lua") {
		t.Errorf("Peek with Redis gone: %v, want an error naming peek.lua", err)
	}
}

// TestPeekHungServer: on a redis-server frozen by SIGSTOP a peek returns an error (never
// the failure policy's admitted decision) at its context's deadline, and without one at
// peekTimeout.
func TestPeekHungServer(t *testing.T) {
	srv := redistest.NewServer(t)
	c := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	l, err := NewLimiter(c, redstream.TokenBucket(5, 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PeekN(ctx, "k", time.Time{}, 1); err != nil {
		t.Fatal(err)
	}
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 {
		t.Fatal("no process_id in INFO server")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	begin := time.Now()
	d, err := l.PeekN(short, "k", time.Time{}, 1)
	cancel()
	if took := time.Since(begin); err == nil || took > 4*time.Second {
		t.Fatalf("peek with a 300ms deadline on a hung server = %+v, %v after %v; want an error at the deadline", d, err, took)
	}
	begin = time.Now()
	d, err = l.PeekN(ctx, "k", time.Time{}, 1)
	took := time.Since(begin)
	if err == nil || d.Allowed || took > peekTimeout+5*time.Second {
		t.Fatalf("peek without a deadline on a hung server = %+v, %v after %v; want an error within about %v", d, err, took, peekTimeout)
	}
	t.Logf("hung server: peek failed after %v (%v)", took.Round(time.Millisecond), err)
}

// TestPeekWithoutEvalshaRo: on a server without EVALSHA_RO (Redis 6.2; here 7 with the
// command renamed away) the peek falls back to EVALSHA and answers the same.
func TestPeekWithoutEvalshaRo(t *testing.T) {
	s := redistest.NewServer(t, "--rename-command", "EVALSHA_RO", "evalsha_ro_disabled")
	c := redistest.NewClient(t, s.Addr)
	ctx := context.Background()
	l, err := NewLimiter(c, redstream.SlidingWindow(time.Minute, 3), Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := l.AllowN(ctx, "k", at, 1); err != nil {
		t.Fatal(err)
	}
	d, err := l.PeekN(ctx, "k", at.Add(time.Second), 1)
	want := redstream.Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: time.Minute}
	if err != nil || d != want {
		t.Fatalf("Peek = %+v, %v; want %+v", d, err, want)
	}
}

// TestPeekReplyMatchesCore checks the Go side of one reply: the limits' decisions are the
// core's, limit by limit, combined as core.Combine does.
func TestPeekReplyMatchesCore(t *testing.T) {
	c, _ := miniClient(t)
	ctx := context.Background()
	specs := []redstream.Spec{redstream.TokenBucket(2, 1), redstream.FixedWindow(time.Minute, 5)}
	l, err := NewMultiLimiter(c, specs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	for i := 0; i < 2; i++ {
		if _, err := l.AllowN(ctx, "k", at, 1); err != nil {
			t.Fatal(err)
		}
	}
	each, err := l.PeekEach(ctx, "k", at, 1)
	if err != nil {
		t.Fatal(err)
	}
	ls := l.coreLimits()
	var st core.State
	var want []core.Decision
	for i, p := range ls {
		st = core.State{}
		for j := 0; j < 2; j++ {
			var d core.Decision
			if err := p.StepState(&st, at.UnixMicro(), 1, &d); err != nil {
				t.Fatal(err)
			}
		}
		var d core.Decision
		var next coreops.Next
		if err := coreops.CheckState(p, &st, at.UnixMicro(), 1, &d, &next); err != nil {
			t.Fatal(err)
		}
		want = append(want, d)
		if got := each[i]; got.Allowed != d.Allowed || got.Remaining != d.Remaining || got.Limit != d.Limit ||
			got.RetryAfter != time.Duration(d.RetryAfter)*time.Microsecond || got.ResetAfter != time.Duration(d.ResetAfter)*time.Microsecond {
			t.Errorf("limit %d: %+v, core %+v", i, got, d)
		}
	}
	if each[0].Allowed || !each[1].Allowed {
		t.Fatalf("the bucket should deny and the window admit: %+v", each)
	}
	comb, err := l.PeekN(ctx, "k", at, 1)
	cw := core.Combine(want)
	if err != nil || comb.Allowed || comb.Remaining != cw.Remaining || comb.RetryAfter != time.Duration(cw.RetryAfter)*time.Microsecond {
		t.Fatalf("PeekN = %+v, %v; core.Combine %+v", comb, err, cw)
	}
}

// TestPeekOnReplica: peek.lua writes nothing, so it runs on a read-only replica (which
// refuses any write a script attempts) and answers what the primary answers once the
// replica has caught up.
func TestPeekOnReplica(t *testing.T) {
	primary := redistest.NewServer(t)
	replica := redistest.NewServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	pc, rc := redistest.NewClient(t, primary.Addr), redistest.NewClient(t, replica.Addr)
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; {
		info, err := rc.Do(ctx, rc.B().Info().Section("replication").Build()).ToString()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not sync within 20s: %v\n%s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, pk := range peekCases {
		t.Run(pk.name, func(t *testing.T) {
			// Explicit times in the past: a long margin keeps the keys from expiring (by the
			// servers' clocks) while the test reads them.
			opts := Options{KeyPrefix: "replica:" + pk.name, ExpiryMargin: time.Hour}
			newL := func(c rueidis.Client) *Limiter {
				var (
					l   *Limiter
					err error
				)
				if len(pk.specs) == 1 {
					l, err = NewLimiter(c, pk.specs[0], opts)
				} else {
					l, err = NewMultiLimiter(c, pk.specs, opts)
				}
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			onPrimary, onReplica := newL(pc), newL(rc)
			for i := 0; i < 3; i++ {
				if _, err := onPrimary.AllowN(ctx, "k", at, 1); err != nil {
					t.Fatal(err)
				}
			}
			want, err := onPrimary.PeekN(ctx, "k", at, 1)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(15 * time.Second)
			for {
				got, err := onReplica.PeekN(ctx, "k", at, 1)
				if err == nil && got == want {
					return
				}
				if err != nil && !strings.Contains(err.Error(), "LOADING") && !strings.Contains(err.Error(), "MASTERDOWN") {
					t.Fatalf("peek on the replica: %v", err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("peek on the replica = %+v, %v; the primary peeks %+v", got, err, want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	// A deciding script is refused there: the replica really is read-only.
	l, err := NewLimiter(rc, redstream.TokenBucket(5, 1), Options{KeyPrefix: "replica:write"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AllowN(ctx, "k", at, 1); err == nil {
		t.Fatal("a decision on the replica succeeded: it is not read-only, the test proves nothing")
	}
}

// TestPeekErrorReplies: malformed arguments are error replies naming the script.
func TestPeekErrorReplies(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			for _, tt := range []struct {
				keys []string
				args []string
				want string
			}{
				{[]string{"k"}, []string{"1", "1", "tb", "1000"}, "peek: bad arguments"},
				{[]string{"k"}, []string{"1", "0", "fw", "1000", "5", "0"}, "peek: bad arguments"},
				{[]string{"k"}, []string{"1", "6", "fw", "1000", "5", "0"}, "peek: cost out of range"},
				{[]string{"k"}, []string{"1", "1", "zz", "1000", "5", "0"}, "peek: unknown algorithm"},
				{[]string{"k"}, []string{"-1", "1", "fw", "1000", "5", "0"}, "peek: now out of range"},
				{nil, []string{"1", "1"}, "peek: bad arguments"},
			} {
				err := c.Do(ctx, c.B().Eval().Script(luaScripts["peek"].Source).Numkeys(int64(len(tt.keys))).Key(tt.keys...).Arg(tt.args...).Build()).Error()
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("args %v: %v, want an error containing %q", tt.args, err, tt.want)
				}
			}
		})
	}
}
