package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/health"
)

// DefaultTimeout bounds the Redis call of one decision or deduplicator check when
// Options.Timeout (DedupOptions.Timeout) is zero.
const DefaultTimeout = 100 * time.Millisecond

// BreakerOptions configures the circuit breaker of an engine (Options.Breaker,
// DedupOptions.Breaker). The zero value is the default breaker: it opens after 3
// consecutive failures, or when half of at least 20 calls in 10 s failed; while open,
// calls fail at once with an error wrapping redstream.ErrCircuitOpen, without reaching
// Redis; after a cool-down of 1 s one probe call reaches Redis, and closes the breaker
// when it succeeds or opens it for another cool-down when it fails.
//
// A failure is a Redis call that did not answer in time (Timeout), could not be sent or
// read (connection refused, reset), or got an error reply of a server that cannot serve
// (LOADING, BUSY, READONLY, OOM, CLUSTERDOWN, ...). A script's runtime error on one key
// proves the server alive and is not a failure; neither is a call whose caller cancelled
// its own context. A call that outlived the caller's own deadline is a failure when that
// deadline left it at least 10 ms, so that callers with deadlines shorter than the timeout
// open the breaker on a hung server too.
type BreakerOptions struct {
	// Disabled turns the breaker off: every call reaches Redis and, against a hung
	// server, waits for its Timeout.
	Disabled bool
	// Failures is the number of consecutive failures that opens the breaker (default
	// 3); negative disables this rule. The breaker is the engine's, not a cluster node's:
	// on a cluster one failing master can open it for every key; -1 there leaves the
	// error-rate rule to judge.
	Failures int
	// ErrorRate, in (0, 1], opens the breaker when that fraction of the calls of the last
	// Window failed, once MinCalls calls were made (default 0.5); negative disables this
	// rule.
	ErrorRate float64
	// MinCalls is the number of calls in Window below which ErrorRate is not judged
	// (default 20).
	MinCalls int
	// Window is the period ErrorRate is measured over (default 10 s).
	Window time.Duration
	// CoolDown is how long the open breaker fails calls before a probe (default 1 s).
	// It bounds how long decisions keep failing after Redis is back.
	CoolDown time.Duration
	// Probes is the number of concurrent probe calls when the cool-down is over, and the
	// number of successful probes that close the breaker (default 1).
	Probes int
	// OnStateChange, when set, is called after each transition of the breaker,
	// synchronously on the goroutine whose call caused it; keep it fast.
	OnStateChange func(BreakerChange)
	// OnFailure, when set, is called with each failed Redis call (not with the fast
	// failures of an open breaker), synchronously on the caller's goroutine; keep it fast.
	OnFailure func(error)
}

// BreakerChange is one transition of an engine's circuit breaker.
type BreakerChange struct {
	From, To redstream.BreakerState
	// Err is the failure that opened the breaker; nil when it half-opens or closes.
	Err error
	// At is when the transition happened.
	At time.Time
}

// defaultTimeout is the timeout of a zero Options.Timeout: DefaultTimeout, except in this
// package's own tests, whose equivalence suites run on a loaded machine (the tests of the
// deadline itself set their Timeout explicitly).
var defaultTimeout = DefaultTimeout

// guard gives every Redis call of an engine its deadline and its breaker.
type guard struct {
	timeout time.Duration // <= 0: the caller's context alone
	br      *health.Breaker
	// suspect is set while the last call ended without an answer: rueidis closes a
	// connection whose call outlived its context and redials it, and a call that waits
	// for that dial (on a hung server, up to the dialer's timeout) does not return at its
	// own context's end. Calls made while it is set run on their own goroutine (bounded).
	suspect *atomic.Bool
}

// newGuard validates timeout and b; component and degraded word the breaker's log lines.
func newGuard(timeout time.Duration, b BreakerOptions, log *slog.Logger, component, degraded string, attrs ...slog.Attr) (guard, error) {
	switch {
	case timeout == 0:
		timeout = defaultTimeout
	case timeout < 0:
		timeout = 0
	}
	g := guard{timeout: timeout, suspect: new(atomic.Bool)}
	if b.Disabled {
		return g, nil
	}
	cfg := health.Config{
		Failures: b.Failures, ErrorRate: b.ErrorRate, MinCalls: b.MinCalls, Window: b.Window,
		CoolDown: b.CoolDown, Probes: b.Probes, Logger: log, Component: component, Degraded: degraded,
		Attrs: attrs, OnFailure: b.OnFailure,
	}
	if f := b.OnStateChange; f != nil {
		cfg.OnStateChange = func(c health.Change) { f(BreakerChange{From: c.From, To: c.To, Err: c.Err, At: c.At}) }
	}
	br, err := health.New(cfg)
	if err != nil {
		return g, fmt.Errorf("redisbackend: Breaker: %w", err)
	}
	g.br = br
	return g, nil
}

// minCallerBudget is the least time a caller's own deadline must have left a Redis call
// for its expiry to count as a failure of Redis: ten times a healthy call with its network
// round trip. A caller whose deadline was nearly spent says nothing about Redis.
const minCallerBudget = 10 * time.Millisecond

// call is one Redis call under a guard: the breaker's ticket and the time the call had.
type call struct {
	t      health.Ticket
	budget time.Duration
}

// begin asks the breaker for a call and bounds ctx by the timeout. On an open breaker it
// returns an error wrapping redstream.ErrCircuitOpen and the caller must not call Redis.
func (g *guard) begin(ctx context.Context) (context.Context, context.CancelFunc, call, error) {
	return g.beginN(ctx, 1)
}

// beginN is begin for a call that decides as much as k calls: its deadline is k timeouts.
func (g *guard) beginN(ctx context.Context, k int) (context.Context, context.CancelFunc, call, error) {
	var c call
	if g.br != nil {
		var err error
		if c.t, err = g.br.Allow(); err != nil {
			return nil, nil, c, err
		}
	}
	d := g.timeout * time.Duration(max(k, 1))
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); d <= 0 || left <= d {
			c.budget = left // the caller's deadline bounds the call
		}
	}
	cctx, cancel := health.WithTimeout(ctx, d)
	return cctx, cancel, c, nil
}

// end reports a call's outcome (err is the Redis result's error) to the breaker and
// returns err, naming the timeout when it fired. ctx is the caller's context. A call the
// caller cancelled is not a failure; one that outlived the caller's own deadline is, if
// that deadline left it at least minCallerBudget (a hung server is found by callers whose
// deadlines are shorter than the timeout too).
func (g *guard) end(ctx context.Context, c call, err error) error {
	if failed := err != nil && !isAnswer(err); failed != g.suspect.Load() {
		g.suspect.Store(failed)
	}
	if g.br != nil {
		var herr error
		if isBackendFailure(err) {
			herr = err
		}
		judge := ctx
		if herr != nil && c.budget >= minCallerBudget && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			judge = context.Background()
		}
		g.br.Done(judge, c.t, herr)
	}
	if err != nil && g.timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer within the timeout, %v per decision)", err, g.timeout)
	}
	return err
}

// suspected reports whether the last call ended without an answer, so that the next one
// should run bounded.
func (g *guard) suspected() bool { return g.suspect.Load() }

// bounded runs f, a Redis call under ctx, on its own goroutine and returns its result, or
// ctx's error as soon as ctx ends, leaving f to finish in the background (rueidis bounds it
// by its own dial and write timeouts) and dropping its result. It costs a goroutine and a
// channel, so engines use it only while their guard is suspected.
func bounded[T any](ctx context.Context, f func() T) (T, error) {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// isAnswer reports whether err is an answer of the server (a script's error reply, a reply
// of an unexpected shape) rather than the absence of one.
func isAnswer(err error) bool {
	if errors.Is(err, errUnexpectedReply) {
		return true
	}
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// state returns the breaker's state (closed without a breaker).
func (g *guard) state() redstream.BreakerState {
	if g.br == nil {
		return redstream.BreakerClosed
	}
	return g.br.State()
}

// errUnexpectedReply marks a reply of the wrong shape: the server answered.
var errUnexpectedReply = errors.New("unexpected reply")

// isBackendFailure reports whether err says Redis cannot serve, as opposed to an answer
// (nil, a script's error, a reply of an unexpected shape): a transport error, a timeout, or
// an error reply of a server that cannot serve now.
func isBackendFailure(err error) bool {
	if err == nil || errors.Is(err, errUnexpectedReply) {
		return false
	}
	if e, ok := rueidis.IsRedisErr(err); ok {
		code, _, _ := strings.Cut(e.Error(), " ")
		switch code {
		case "LOADING", "BUSY", "READONLY", "OOM", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN",
			"NOREPLICAS", "MISCONF", "NOAUTH", "WRONGPASS", "NOPERM", "UNBLOCKED":
			return true
		}
		return strings.Contains(e.Error(), "max number of clients")
	}
	return true
}

// caps is what an engine has learnt about its server's features, shared by the engines of
// one client: whether the server refuses read-only scripts (no EVALSHA_RO, Redis 6.2 and
// older; or miniredis, which counts TIME as a write).
type caps struct {
	noRO atomic.Bool
}

// maxCapsClients bounds the clients whose capabilities are remembered process-wide; past
// it, each engine of a new client remembers its own (one probe per engine).
const maxCapsClients = 1024

var (
	capsMu       sync.Mutex
	capsByClient = make(map[rueidis.Client]*caps)
)

// capsOf returns the capabilities remembered for client c.
func capsOf(c rueidis.Client) *caps {
	if c == nil || !reflect.ValueOf(c).Comparable() {
		return new(caps)
	}
	capsMu.Lock()
	defer capsMu.Unlock()
	if cp, ok := capsByClient[c]; ok {
		return cp
	}
	cp := new(caps)
	if len(capsByClient) < maxCapsClients {
		capsByClient[c] = cp
	}
	return cp
}

// link is how an engine reaches Redis: its client, or the Connector that will make one.
type link struct {
	client rueidis.Client // nil when built by a Connector
	conn   *Connector
	caps   *caps
}

// get returns the client and its capabilities, or an error wrapping ErrNotConnected.
func (k *link) get() (rueidis.Client, *caps, error) {
	if k.client != nil {
		return k.client, k.caps, nil
	}
	return k.conn.get()
}
