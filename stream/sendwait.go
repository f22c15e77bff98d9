package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/rueidis"
)

// defaultSendTimeout is the default of Config.SendTimeout: the longest a send (Send,
// SendBatch, a delayed send) waits for Redis, whatever the caller's context.
const defaultSendTimeout = 2 * time.Second

// ErrOutcomeUnknown is wrapped by the error of a send that ended without knowing whether
// Redis wrote the message: no reply came by the send's deadline (the earlier of its
// context's and Config.SendTimeout), or the connection failed after the command may have
// been written. The message may be in the stream, or not. Retry with the same idempotency
// key (WithIdempotencyKey) to write it at most once; a retry without a key may write it
// twice. Errors that do not wrap it (a Redis error reply, a failed dial, a bad message) mean
// the message was not written.
var ErrOutcomeUnknown = errors.New("stream: outcome unknown")

// sendContext returns ctx with the producer's send deadline (Config.SendTimeout from now)
// when that is earlier than ctx's own.
func (p *Producer) sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.cfg.SendTimeout)
}

// await runs call in a goroutine of its own and returns its result, or late(ctx's error)
// as soon as ctx ends, without waiting for call: rueidis does not always honour a context
// (a command queued behind a reconnection to a hung server waits for the dial, whatever
// its own deadline), so a send returns at its deadline only if it stops waiting by itself.
// call must end on its own (every rueidis call here has ctx, and rueidis's own timeouts,
// as bounds); its goroutine then ends too, having written its result to a buffered
// channel nobody reads. A panic in call becomes a result of panicked.
func await[T any](ctx context.Context, call func() T, late func(error) T) T {
	ch := make(chan T, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- late(fmt.Errorf("stream: a Redis call panicked: %v", r))
			}
		}()
		ch <- call()
	}()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		select {
		case r := <-ch: // the reply came with the deadline: take it
			return r
		default:
		}
		return late(context.Cause(ctx))
	}
}

// unknownResult is the result of a call abandoned at its deadline.
func unknownResult(err error) rueidis.RedisResult {
	return rueidis.NewErrorResult(unknown(err))
}

// unknown wraps err (a deadline, a connection failure) with ErrOutcomeUnknown.
func unknown(err error) error {
	if errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w, the message may have been written: %w", ErrOutcomeUnknown, err)
}

// do runs cmd, returning by ctx's end. Every send waits through await, also on a connection
// that has not failed yet: at the start of a hang (a server that stops answering on a live
// connection), sends that trusted rueidis to honour their context were seen to return up to
// 200 ms past their deadline.
func (p *Producer) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return await(ctx, func() rueidis.RedisResult { return p.client.Do(ctx, cmd) }, unknownResult)
}

// exec runs script (EVALSHA, falling back to EVAL), returning by ctx's end, as do.
func (p *Producer) exec(ctx context.Context, script *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	return await(ctx, func() rueidis.RedisResult { return script.Exec(ctx, p.client, keys, args) }, unknownResult)
}

// doMulti runs cmds in one pipeline, returning by ctx's end (then every result is an
// ErrOutcomeUnknown).
func (p *Producer) doMulti(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	return await(ctx, func() []rueidis.RedisResult { return p.client.DoMulti(ctx, cmds...) }, func(err error) []rueidis.RedisResult {
		res := make([]rueidis.RedisResult, len(cmds))
		for i := range res {
			res[i] = unknownResult(err)
		}
		return res
	})
}

// sendErr classifies the error of a send's command: an error reply or a failed dial means
// the message was not written; anything else (a deadline, a connection lost after the
// write) leaves it unknown.
func sendErr(err error) error {
	if isRedisErr(err) || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return err
	}
	return unknown(err)
}
