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

// defaultTimeout is the timeout of a zero Options.Timeout: DefaultTimeout, except in this
// package's own tests, whose equivalence suites run on a loaded machine (the tests of the
// deadline itself set their Timeout explicitly).
var defaultTimeout = DefaultTimeout

// guard gives every Redis call of an engine its deadline and its breaker.
type guard struct {
	timeout time.Duration         // <= 0: the caller's context alone
	br      *health.Set           // one breaker per cluster master; nil when disabled
	src     *atomic.Pointer[link] // the engine's link, for the breakers' topology lookups
	// suspect is set while the last call ended without an answer: rueidis closes a
	// connection whose call outlived its context and redials it, and a call that waits
	// for that dial (on a hung server, up to the dialer's timeout) does not return at its
	// own context's end. Calls made while it is set run on their own goroutine (bounded).
	suspect *atomic.Bool
}

// newGuard validates timeout and b; component and degraded word the breaker's log lines.
func newGuard(timeout time.Duration, b redstream.BreakerOptions, log *slog.Logger, component, degraded string, attrs ...slog.Attr) (guard, error) {
	switch {
	case timeout == 0:
		timeout = defaultTimeout
	case timeout < 0:
		timeout = 0
	}
	g := guard{timeout: timeout, suspect: new(atomic.Bool), src: new(atomic.Pointer[link])}
	if b.Disabled {
		return g, nil
	}
	src := g.src
	lookup := health.ClusterLookup(func() (rueidis.Client, error) {
		k := src.Load()
		if k == nil {
			return nil, ErrNotConnected
		}
		c, _, err := k.get()
		return c, err
	})
	cfg := health.Config{BreakerOptions: b, Logger: log, Component: component, Degraded: degraded, Attrs: attrs}
	br, err := health.NewSet(cfg, lookup)
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

// bind gives the guard's breakers the engine's link, through which they look the
// cluster's topology up.
func (g *guard) bind(k link) { g.src.Store(&k) }

// call is one Redis call under a guard: the breaker of the call's node, its ticket and the
// time the call had.
type call struct {
	br     *health.Breaker
	t      health.Ticket
	budget time.Duration
}

// begin asks the breaker of the node serving key (a Redis key of the call) for a call and
// bounds ctx by the timeout. On an open breaker it returns an error wrapping
// redstream.ErrCircuitOpen and the caller must not call Redis.
func (g *guard) begin(ctx context.Context, key string) (context.Context, release, call, error) {
	return g.beginN(ctx, key, 1)
}

// beginN is begin for a call that decides as much as k calls: its deadline is k timeouts.
func (g *guard) beginN(ctx context.Context, key string, k int) (context.Context, release, call, error) {
	c, err := g.admit(key)
	if err != nil {
		return nil, release{}, c, err
	}
	cctx, cancel := g.bound(ctx, k, &c)
	return cctx, cancel, c, nil
}

// admit asks the breaker of the node serving key for a call; the error wraps
// redstream.ErrCircuitOpen.
func (g *guard) admit(key string) (call, error) {
	var c call
	if g.br != nil {
		c.br = g.br.For(key)
		var err error
		if c.t, err = c.br.Allow(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// bound bounds ctx by k timeouts for the admitted call c and notes in c the time the
// caller's own deadline leaves it.
func (g *guard) bound(ctx context.Context, k int, c *call) (context.Context, release) {
	d := g.timeout * time.Duration(max(k, 1))
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); d <= 0 || left <= d {
			c.budget = left // the caller's deadline bounds the call
		}
	}
	return withTimeout(ctx, d)
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
	if c.br != nil {
		var herr error
		if isBackendFailure(err) {
			herr = err
		}
		judge := ctx
		if herr != nil && c.budget >= minCallerBudget && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			judge = context.Background()
		}
		c.br.Done(judge, c.t, herr)
	}
	if err != nil && g.timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer within the timeout, %v per decision)", err, g.timeout)
	}
	return err
}

// once runs f, a Redis call under ctx, and runs it again, once, if its error proves that
// the command never reached Redis (health.NotSent: a failed dial, such as a connection
// refused) and ctx has time left. rueidis gives the calls in flight on a dropped
// connection one error (EOF, a reset) whether their command was written or not, and a
// written command may have run: those are never repeated, or a decision could count twice.
func once(ctx context.Context, f func() error) error {
	err := f()
	if retryable(ctx, err) {
		err = f()
	}
	return err
}

// retryable reports whether a call that failed with err may be made again at once (see
// once).
func retryable(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && health.NotSent(err)
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

// state returns the breakers' worst state (closed without a breaker): open when any
// master's breaker is open.
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
