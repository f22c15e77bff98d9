package idempotency

import (
	"context"
	"errors"
	"fmt"
	"github.com/redstream-go/redstream"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/health"
)

// guard gives every Redis call of the engine its deadline and its breaker (one per
// cluster master, chosen by the record key's slot). It is the one place that reads
// Options.Breaker and Options.Timeout.
type guard struct {
	timeout time.Duration // 0: the caller's context alone
	br      *health.Set   // nil when the breaker is disabled
}

func newGuard(client rueidis.Client, o Options) (guard, error) {
	g := guard{timeout: o.Timeout}
	if o.Breaker.Disabled {
		return g, nil
	}
	br, err := health.NewSet(breakerConfig(o.Breaker, o), health.ClusterLookup(func() (rueidis.Client, error) { return client, nil }))
	if err != nil {
		return g, fmt.Errorf("idempotency: Breaker: %w", err)
	}
	g.br = br
	return g, nil
}

// breakerConfig is the breaker of Options.Breaker.
func breakerConfig(b redstream.BreakerOptions, o Options) health.Config {
	cfg := health.Config{
		BreakerOptions: b, Logger: o.Logger,
		Component: "idempotency", Attrs: []slog.Attr{slog.String("name", o.Name)},
		Degraded: "calls fail at once (redstream.ErrCircuitOpen)",
	}
	if o.FailOpen {
		cfg.Degraded = "functions run unprotected (fail-open)"
	}
	return cfg
}

// do runs f, one Redis call on the record key rk, under the breaker of rk's master and
// bounded by the timeout. On an open breaker it fails at once with an error wrapping
// redstream.ErrCircuitOpen. The calls that write the outcome of a function that ran
// (complete, release, renew) pass guarded false: they are tried whatever the breaker's
// state, within the timeout, since a stored result is worth a call to a doubtful server.
func (g *guard) do(ctx context.Context, rk string, guarded bool, f func(ctx context.Context) error) error {
	var (
		b *health.Breaker
		t health.Ticket
	)
	if g.br != nil && guarded {
		b = g.br.For(rk)
		var err error
		if t, err = b.Allow(); err != nil {
			return err
		}
	}
	cctx, cancel := health.WithTimeout(ctx, g.timeout)
	err := f(cctx)
	cancel()
	if b != nil {
		var herr error
		if isBackendFailure(err) {
			herr = err
		}
		b.Done(ctx, t, herr)
	}
	if err != nil && g.timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer within the timeout, %v)", err, g.timeout)
	}
	return err
}

// errUnexpectedReply marks a reply of the wrong shape: the server answered.
var errUnexpectedReply = errors.New("unexpected reply")

// isBackendFailure reports whether err says Redis cannot serve (a transport error, a
// timeout, an error reply of a server that cannot serve now), as opposed to an answer.
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
