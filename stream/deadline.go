package stream

import (
	"context"
	"time"
)

// defaultCallTimeout bounds a call of this package (Send, a sink write, Trim) whose context
// has no deadline, so that no call waits forever on a hung server (rueidis retries read-only
// commands until their context ends).
const defaultCallTimeout = 10 * time.Second

// withDefaultDeadline returns ctx, with a deadline of d from now when it has none.
func withDefaultDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
