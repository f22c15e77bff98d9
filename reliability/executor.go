package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
)

// Executor runs functions under a RetryPolicy. It is immutable and safe for concurrent use
// (if the policy's Rand and OnRetry are).
type Executor struct {
	p     RetryPolicy
	b     core.Backoff
	tries int64
	rnd   func(n int64) int64
}

// NewExecutor returns an executor of p. It returns the first invalid field of p, wrapping
// redstream.ErrInvalidConfig; the message names the field, e.g. "reliability:
// RetryPolicy.MaxDelay = 1s, want >= InitialDelay (2s)".
func NewExecutor(p RetryPolicy) (*Executor, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	e := &Executor{p: p, b: p.backoff(), tries: int64(p.attempts()), rnd: p.Rand}
	if e.rnd == nil {
		e.rnd = rand.Int64N
	}
	return e, nil
}

// Do runs fn until it succeeds, returns an error the policy does not retry, or has run
// MaxAttempts+1 times; then it returns fn's last error as is (nil on success).
//
// Between tries it waits as the policy says. When ctx is done during a wait, Do stops at once
// and returns an error that wraps both ctx.Err() and fn's last error. When ctx is already
// done before the first try, fn is not run and the error wraps ctx.Err(). fn receives ctx.
// A nil fn is an error wrapping redstream.ErrInvalidConfig.
func (e *Executor) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	_, err := e.do(ctx, fn)
	return err
}

// Call runs fn under e as [Executor.Do] does and returns its result: the value of the
// successful try, or the zero value with the error Do would return.
func Call[T any](ctx context.Context, e *Executor, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if e == nil {
		return zero, fmt.Errorf("reliability: Call: %w: nil Executor", redstream.ErrInvalidConfig)
	}
	if fn == nil {
		return zero, fmt.Errorf("reliability: Call: %w: nil function", redstream.ErrInvalidConfig)
	}
	var out T
	_, err := e.do(ctx, func(ctx context.Context) error {
		v, err := fn(ctx)
		if err == nil {
			out = v
		}
		return err
	})
	if err != nil {
		return zero, err
	}
	return out, nil
}

// do is Do that also returns the number of tries run.
func (e *Executor) do(ctx context.Context, fn func(ctx context.Context) error) (int, error) {
	if fn == nil {
		return 0, fmt.Errorf("reliability: Do: %w: nil function", redstream.ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("reliability: not started: %w", err)
	}
	var prev int64
	for try := int64(1); ; try++ {
		err := fn(ctx)
		if err == nil {
			return int(try), nil
		}
		if try >= e.tries || !e.p.isRetryable(err) {
			return int(try), err
		}
		us := e.b.Delay(try, prev, e.rnd)
		prev = us
		wait := time.Duration(us) * time.Microsecond
		if e.p.OnRetry != nil {
			e.p.OnRetry(int(try), err, wait)
		}
		if cerr := sleep(ctx, wait); cerr != nil {
			return int(try), fmt.Errorf("reliability: retry interrupted after %d tries: %w (last error: %w)", try, cerr, err)
		}
	}
}

// sleep waits d or until ctx is done, whichever comes first, and returns ctx.Err() in the
// second case.
func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
